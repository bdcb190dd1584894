"""Faults, interruption, resume, monitoring, compare, report and datasets (CPU only)."""

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from bench import cli, compare, env, report, store, sweep
from bench.timing import StopRule, Timer
from fake_experiments import CRASHING, FINE, OUT_OF_MEMORY, STICKY
from synthetic import alloc_and_graphs_rows, bandwidth_rows, blocking_rows

SRC = str(Path(__file__).resolve().parents[1] / "src")
TESTS = str(Path(__file__).resolve().parent)


def _plans(*experiments):
    return [sweep.Plan(experiment, sweep.expand(experiment.axes)) for experiment in experiments]


def test_a_failing_experiment_loses_no_other_rows(tmp_path):
    path = tmp_path / "r.parquet"
    outcome = sweep.run(_plans(CRASHING, STICKY, OUT_OF_MEMORY, FINE), Timer(StopRule()), {"gpu_name": "g"}, path,
                        run_id="r", isolate=True, device=None)
    rows = store.read(path)
    assert not outcome.interrupted and len(rows) == 20 and store.read_metadata(path)["complete"]
    by = {name: group for name, group in rows.groupby("experiment")}
    assert list(by["fine"]["status"]) == ["ok"] * 5  # after three broken experiments, untouched
    for name in ("crashing", "sticky"):
        assert list(by[name]["status"]) == ["ok", "ok", "failed", "failed", "failed"]
    assert all("exit code 3" in error for error in by["crashing"]["error"].iloc[2:])
    assert all("cudaErrorIllegalAddress" in error for error in by["sticky"]["error"].iloc[2:])
    assert list(by["out-of-memory"]["status"]) == ["ok"] + ["skipped"] * 4
    assert "out of memory" in by["out-of-memory"]["error"].iloc[1]


def test_resume_runs_only_what_is_missing(tmp_path):
    path = tmp_path / "r.parquet"
    with pytest.raises(RuntimeError):  # in-process, the error ends the sweep; the two rows before it are kept
        sweep.run(_plans(STICKY), Timer(StopRule()), {"gpu_name": "g"}, path, run_id="first")
    previous = store.read(path)
    assert list(previous["status"]) == ["ok", "ok"]
    (plan,) = sweep.without_done(_plans(dataclasses.replace(FINE, name="sticky")), previous)
    assert [config["n"] for config in plan.configs] == [2, 3, 4]
    sweep.run([plan], Timer(StopRule()), {"gpu_name": "g"}, path, run_id="second", previous=previous)
    rows = store.read(path)
    assert list(rows["n"]) == [0, 1, 2, 3, 4] and list(rows["run_id"]) == ["first"] * 2 + ["second"] * 3


def test_failed_rows_run_again_on_resume():
    previous = pd.DataFrame([{"experiment": "fine", "n": 0.0, "status": "ok"},
                             {"experiment": "fine", "n": 1.0, "status": "failed"},
                             {"experiment": "fine", "n": 2.0, "status": "skipped"}])
    (plan,) = sweep.without_done(_plans(FINE), previous)
    assert [config["n"] for config in plan.configs] == [1, 3, 4]


SIGTERM_SCRIPT = """
import signal, sys
from bench import cli, sweep
from bench.timing import StopRule, Timer
from fake_experiments import SLOW
signal.signal(signal.SIGTERM, cli._on_sigterm)
outcome = sweep.run([sweep.Plan(SLOW, sweep.expand(SLOW.axes))], Timer(StopRule()), {}, sys.argv[1], run_id="r",
                    isolate=True, save_every_s=0.0)
print("stopped in", outcome.stopped_in, len(outcome.rows))
sys.exit(cli._interrupted_status(outcome))
"""


def test_sigterm_keeps_finished_rows_and_says_where(tmp_path):
    path = tmp_path / "r.parquet"
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, TESTS])}
    child = subprocess.Popen([sys.executable, "-c", SIGTERM_SCRIPT, str(path)], env=environment,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    child.send_signal(signal.SIGTERM)
    stdout, stderr = child.communicate(timeout=60)
    assert child.returncode == 128 + signal.SIGTERM, stderr
    assert "stopped in slow" in stdout
    rows = store.read(path)
    assert 1 <= len(rows) < 5 and (rows["status"] == "ok").all()
    assert store.read_metadata(path)["complete"] is False


def test_monitor_columns_and_throttle_reasons():
    calm = {"sm_clock_mhz": 1980, "throttle_bits": 0x1, "other_processes": 0}  # idle is not throttling
    hot = {"sm_clock_mhz": 1500, "throttle_bits": 0x20 | 0x4, "other_processes": 1}
    assert env.over_interval(calm, calm) == {"sm_clock_seen_mhz": 1980, "throttle_reasons": "", "throttled": False,
                                             "other_processes": 0}
    seen = env.over_interval(calm, hot)
    assert seen["throttled"] and seen["throttle_reasons"] == "sw_power_cap,sw_thermal"
    assert seen["sm_clock_seen_mhz"] == 1500 and seen["other_processes"] == 1
    assert env.over_interval({}, hot) == {}
    assert env.other_processes({10, 11, 99}, {10, 11}) == 1
    assert env.other_processes({5000, 5001}, {10, 11}) == 0  # host PIDs seen from a container: ours by count
    assert env.other_processes({5000, 5001, 5002}, {10, 11}) == 1


def test_sweep_rows_carry_what_the_monitor_saw(tmp_path):
    readings = iter([{"sm_clock_mhz": 1980, "throttle_bits": 0, "other_processes": 0},
                     {"sm_clock_mhz": 1400, "throttle_bits": 0x40, "other_processes": 0}]
                    + [{"sm_clock_mhz": 1980, "throttle_bits": 0, "other_processes": 2}] * 10)
    outcome = sweep.run(_plans(FINE), Timer(StopRule()), {}, tmp_path / "r.parquet", run_id="r",
                        monitor=lambda: next(readings))
    rows = pd.DataFrame(outcome.rows)
    assert list(rows["throttled"]) == [True, True, False, False, False]
    assert list(rows["other_processes"]) == [0, 2, 2, 2, 2]

    class Console:
        lines = []

        def print(self, text, **kwargs):
            self.lines.append(str(text))

    console = Console()
    cli._print_summary([], outcome, console)
    assert any("2 configurations ran while the GPU was throttled (hw_thermal)" in line for line in console.lines)
    assert any("4 configurations ran while other processes used the GPU" in line for line in console.lines)


def _bandwidth_file(path, scale=1.0, run_id="r1", hostname="node-a", **environment):
    rows = bandwidth_rows().head(20).copy()
    rows["samples_ms"] = [[m * scale * (1 + 0.001 * i) for i in range(-2, 3)] for m in rows["median_ms"]]
    rows["median_ms"] = rows["median_ms"] * scale
    rows["run_id"], rows["hostname"], rows["gpu_uuid"] = run_id, hostname, f"GPU-{hostname}"
    for column, value in environment.items():
        rows[column] = value
    store.write(path, rows.to_dict("records"), {"run_id": run_id})
    return path


@pytest.mark.parametrize("old, new, expected", [
    ([1.0, 1.01, 0.99, 1.0], [1.002, 1.0, 1.01, 0.995], "same"),
    ([1.0, 1.01, 0.99, 1.0], [1.2, 1.21, 1.19, 1.2], "slower"),
    ([1.0, 1.01, 0.99, 1.0], [0.8, 0.81, 0.79, 0.8], "faster"),
    ([1.0, 1.0], [2.0, 2.0], "unclear"),  # too few samples
    ([1.0, 0.5, 1.6, 1.0, 0.7, 1.3], [1.1, 0.6, 1.7, 1.1, 0.8, 1.4], "same"),  # noisy: within the noise
])
def test_compare_verdicts(old, new, expected):
    assert compare.verdict(old, new) == expected


def test_compare_files_and_gate(tmp_path):
    old = _bandwidth_file(tmp_path / "old.parquet")
    new = _bandwidth_file(tmp_path / "new.parquet", scale=1.2, run_id="r2", driver_version="999.0")
    result = compare.compare(store.read(old), store.read(new))
    assert len(result.table) == 20 and set(result.table["verdict"]) == {"slower"}
    assert any("driver_version differs" in warning for warning in result.warnings)
    assert len(result.slower_than(10)) == 20 and len(result.slower_than(30)) == 0
    environment = {**os.environ, "PYTHONPATH": SRC}
    gate = subprocess.run([sys.executable, "-m", "bench", "compare", str(old), str(new), "--fail-above", "10"],
                          env=environment, capture_output=True, text=True, cwd=tmp_path)
    assert gate.returncode == 1 and "slower by more than 10%" in gate.stdout and "driver_version" in gate.stdout
    same = subprocess.run([sys.executable, "-m", "bench", "compare", str(old), str(old), "--fail-above", "10"],
                          env=environment, capture_output=True, text=True, cwd=tmp_path)
    assert same.returncode == 0 and "20 same" in same.stdout


def test_a_directory_of_results_is_one_dataset(tmp_path):
    _bandwidth_file(tmp_path / "fleet" / "node-a" / "r1.parquet", hostname="node-a")
    _bandwidth_file(tmp_path / "fleet" / "node-b" / "r1.parquet", run_id="r2", hostname="node-b")
    rows = store.read_any(tmp_path / "fleet")
    assert len(rows) == 40 and set(rows["hostname"]) == {"node-a", "node-b"}
    assert set(rows["gpu_uuid"]) == {"GPU-node-a", "GPU-node-b"}
    (tmp_path / "empty").mkdir()
    with pytest.raises(store.ResultsError, match="no results files"):
        store.read_any(tmp_path / "empty")


def test_report_is_self_contained(tmp_path):
    rows = pd.concat([bandwidth_rows(), blocking_rows(), alloc_and_graphs_rows()], ignore_index=True)
    rows["run_id"], rows["hostname"], rows["gpu_uuid"] = "r1", "node-a", "GPU-1"
    out = report.write(rows, {}, tmp_path / "report.html", source="synthetic")
    text = out.read_text()
    assert text.startswith("<!doctype html>") and text.count("data:image/png;base64,") >= 3
    assert "<h2>bandwidth</h2>" in text and "<h2>blocking</h2>" in text and "Claims" in text
    assert "cudaGetLastError waits for running kernels" in text and "node-a" in text
    assert "http://" not in text.replace("https://docs.nvidia.com", "")  # nothing to fetch but the docs links


def test_latest_runs_keeps_the_newest_run_per_experiment_and_gpu():
    rows = pd.DataFrame([
        {"experiment": "a", "gpu_uuid": "G1", "run_id": "1"}, {"experiment": "a", "gpu_uuid": "G1", "run_id": "2"},
        {"experiment": "a", "gpu_uuid": "G2", "run_id": "1"}, {"experiment": "b", "gpu_uuid": "G1", "run_id": "1"},
    ])
    kept = store.latest_runs(rows)
    assert sorted(map(tuple, kept[["experiment", "gpu_uuid", "run_id"]].values)) == [
        ("a", "G1", "2"), ("a", "G2", "1"), ("b", "G1", "1")]


def test_an_isolated_child_finds_every_experiment_by_name():
    from bench.experiments import registry

    for name, experiment in registry().items():  # serialization's run is defined in blocking's module
        assert sweep.find_experiment(experiment.run.__module__, name) is experiment
    assert sweep.find_experiment("fake_experiments", "fine") is FINE
