"""Issue 14's experiments on the GPU, at small sizes: SM copies, latency, round trips, launch paths, and the three
that need a process per setting (wait modes, hardware queues, module loading), run as a user runs them."""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from gpu_rows import rows_of

pytestmark = pytest.mark.gpu
SRC = str(Path(__file__).resolve().parents[1] / "src")


def sweep(tmp_path: Path, *args: str) -> pd.DataFrame:
    """``python -m bench sweep --quick ARGS`` into tmp_path: its rows (the command must succeed)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-m", "bench", "sweep", "--quick", *args, "--out", str(tmp_path)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return pd.read_parquet(tmp_path)


def test_sm_copies_are_verified_and_reach_a_link_rate():
    rows = rows_of("zerocopy", [{"direction": direction, "bytes": nbytes} for direction in ("H2D", "D2H")
                                for nbytes in (64 << 10, 16 << 20)])
    assert (rows["status"] == "ok").all() and rows["verified"].all(), rows["error"].tolist()
    large = rows[rows["bytes"] == 16 << 20]
    assert (large["gbps"] > 20).all(), large["gbps"].tolist()  # a PCIe Gen4/5 link: tens of GB/s
    assert (rows[rows["bytes"] == 64 << 10]["gbps"] < large["gbps"].min()).all()


def test_host_mapped_memory_is_further_away_than_device_memory():
    rows = rows_of("latency", [{"memory": memory, "bytes": 1 << 20} for memory in ("host-mapped", "device")])
    assert (rows["status"] == "ok").all() and rows["verified"].all(), rows["error"].tolist()
    by = rows.set_index("memory")["ns_per_access"]
    assert 50 < by["device"] < by["host-mapped"] < 20_000, by.to_dict()


def test_a_round_trip_costs_more_than_its_copy():
    rows = rows_of("roundtrip", [{"direction": "H2D", "bytes": 4}, {"direction": "D2H", "bytes": 4096}])
    assert (rows["status"] == "ok").all() and rows["verified"].all(), rows["error"].tolist()
    assert (rows["median"] > rows["gpu_us"]).all() and (rows["gpu_us"] > 0).all()


def test_every_launch_path_is_measured_or_says_why_not():
    rows = rows_of("launch", [{"path": path} for path in
                              ("dispatcher", "precompiled", "cupy-raw", "cuda-core", "cuda-bindings", "graph")])
    assert set(rows["status"]) <= {"ok", "unsupported"}
    assert (rows[rows["status"] == "unsupported"]["error"].str.len() > 0).all()
    ok = rows[rows["status"] == "ok"].set_index("path")["median"]
    assert {"dispatcher", "precompiled", "cupy-raw", "graph"} <= set(ok.index), rows[["path", "error"]]
    assert ok["graph"] < ok["precompiled"]  # one graph launch for a hundred kernels


def test_wait_modes_take_effect_and_a_sleeping_host_burns_less_cpu(tmp_path):
    rows = sweep(tmp_path, "--experiments", "waitmodes", "--axis", "schedule=spin,blocking-sync",
                 "--axis", "wait=stream")
    assert (rows["status"] == "ok").all(), rows["error"].tolist()
    by = rows.set_index("schedule")
    assert list(by["schedule_in_effect"]) == list(by.index)  # the flag reached the context
    assert by.loc["spin", "cpu_fraction"] > 0.5 > by.loc["blocking-sync", "cpu_fraction"]
    assert by.loc["spin", "median"] < by.loc["blocking-sync", "median"]


def test_one_hardware_queue_lines_streams_up(tmp_path):
    rows = sweep(tmp_path, "--experiments", "connections", "--axis", "connections=1,unset,1 after init",
                 "--axis", "workload=spins", "--axis", "streams=8")
    assert (rows["status"] == "ok").all(), rows["error"].tolist()
    lengths = rows.set_index("connections")["spin_lengths"]
    assert lengths["unset"] < 3 < lengths["1"]  # eight queues: side by side; one queue: in line
    assert lengths["1 after init"] < 3  # set after the context existed: no effect


def test_module_loading_rows_and_a_loaded_kernel_never_waits(tmp_path):
    rows = sweep(tmp_path, "--experiments", "firstcall", "--axis", "module_loading=lazy,eager",
                 "--axis", "call=module-load,first-launch,second-launch")
    assert (rows["status"] == "ok").all(), rows["error"].tolist()
    assert set(rows[rows["call"] == "second-launch"]["verdict"]) == {"returns"}
