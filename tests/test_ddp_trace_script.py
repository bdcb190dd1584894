"""scripts/ddp_trace.py without a GPU or torch: importing it loads neither; the readings' report; rank 0's part
(the ranks' saved traces merged, written with their timelines and the readings) on synthetic rank traces."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import synthetic
from bench.trace import save
from bench.usercode.trace.load import load
from paths import SCRIPTS, script_module, with_path
from test_trace_multigpu import GPU0, GPU0_CALLS, GPU1, GPU1_CALLS, traced

SRC = str(Path(__file__).resolve().parents[1] / "src")


@pytest.fixture(scope="module")
def script():
    with script_module("ddp_trace") as module:
        yield module


def test_importing_the_script_loads_no_gpu_library_and_changes_no_environment():
    code = ("import os, sys\nsys.path.insert(0, sys.argv[1])\nbefore, loaded = dict(os.environ), set(sys.modules)\n"
            "import ddp_trace\nprint(sorted(m for m in set(sys.modules) - loaded\n"
            "             if m.split('.')[0] in ('torch', 'cupti', 'cupy', 'cuda', 'bench')))\n"
            "print(dict(os.environ) == before)")
    result = subprocess.run([sys.executable, "-c", code, str(SCRIPTS)], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": with_path(SRC)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["[]", "True"]


def test_the_report_sets_the_readings_side_by_side(script):
    ddp = script.Readings(0, "ddp", step_ms=[10.0, 12.0, 11.0], host_ms=[11.0, 13.0, 12.0], traced_host_ms=20.0,
                          bench={"makespan_ms": 11.5, "comm_ms": 4.0, "comm_hidden": 0.75, "comm_hidden_ms": 3.0,
                                 "comm_exposed_ms": 1.0, "comm_idle_ms": 0.5})
    exposed = script.Readings(0, "exposed", step_ms=[14.0, 15.0, 16.5], collective_ms=[3.9, 4.1, 4.0],
                              bench={"makespan_ms": 15.2, "comm_ms": 4.2, "comm_hidden": 0.0, "comm_hidden_ms": 0.0,
                                     "comm_exposed_ms": 4.2, "comm_idle_ms": 4.2})
    assert script.report([exposed, ddp], 2.5) == [
        "rank 0:",
        "  ddp: events step 11.000 ms (median of 3); bench makespan 11.500 ms, communication 4.000 ms, hidden 75.0%, "
        "exposed 1.000 ms, compute idle during it 0.500 ms; host 12.000 ms untraced, 20.000 ms traced",
        "  exposed: events step 15.000 ms (median of 3); bench makespan 15.200 ms, communication 4.200 ms, hidden "
        "0.0%, exposed 4.200 ms, compute idle during it 4.200 ms; host — untraced, — traced",
        "  exposed all-reduce: events 4.000 ms, bench communication 4.200 ms",
        "  overlap DDP won: events (exposed step − ddp step) 4.000 ms; bench communication hidden in ddp 3.000 ms",
        "CUPTI clocks of the ranks right after a barrier: spread 2.5 µs"]


def test_a_ranks_readings_are_its_gpus_figures(script):
    found = script.gpu_readings(traced(GPU1, GPU1_CALLS, rank=1))
    assert (found["device"], found["rank"], found["comm_hidden"], found["kernels"]) == (1, 1, 0.5, 2)
    with pytest.raises(ValueError):  # a rank drives one GPU
        script.gpu_readings(traced(GPU0 + GPU1, []))


def test_rank_zero_merges_the_ranks_traces_and_writes_them(script, tmp_path, capsys):
    stamp = "20261201T000000Z"
    for variant in script.VARIANTS:
        for rank, (records, calls) in enumerate(((GPU0, GPU0_CALLS), (GPU1, GPU1_CALLS))):
            save([(f"ddp_trace.py:{variant}", traced(records, calls, rank=rank))],
                 synthetic.environment(gpu_index=rank), script.trace_path(tmp_path, stamp, rank, variant))
    readings = [script.Readings(rank, variant, step_ms=[1.0]) for rank in (0, 1) for variant in script.VARIANTS]
    script.write_merged(tmp_path, stamp, readings, 1.5, 2)
    for variant in script.VARIANTS:
        merged = load(script.merged_path(tmp_path, stamp, variant, ".parquet"))
        assert list(merged.gpus) == [0, 1] and merged.comm_hidden == pytest.approx(0.11 / 0.26)
        assert json.loads(script.merged_path(tmp_path, stamp, variant, ".json").read_text())["traceEvents"]
        assert "on 2 GPUs" in script.merged_path(tmp_path, stamp, variant, ".txt").read_text()
    written = json.loads((tmp_path / f"{stamp}-ddp-readings.json").read_text())
    assert written["clock_spread_us"] == 1.5 and len(written["readings"]) == 4
    assert written["report"][-1] == "CUPTI clocks of the ranks right after a barrier: spread 1.5 µs"
    assert capsys.readouterr().out.count("2 ranks merged") == 2


def test_its_arguments_need_no_torch(script, tmp_path):
    args = script.arguments([str(tmp_path), "--runs", "7"])
    assert (args.out, args.runs) == (tmp_path, 7)
    result = subprocess.run([sys.executable, str(SCRIPTS / "ddp_trace.py"), "--help"], capture_output=True,
                            text=True, timeout=120, env={**os.environ, "PYTHONPATH": with_path(SRC)})
    assert result.returncode == 0 and "--runs" in result.stdout, result.stderr
