"""Bad input: one line on stderr, exit 2, no traceback, nothing written."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")


def bench(*args, cwd):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def assert_usage_error(result, cwd, fragment):
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bench: error: "), result.stderr
    assert fragment in lines[0] and "Traceback" not in result.stderr
    assert not (Path(cwd) / "results").exists() and not (Path(cwd) / "plots").exists()


@pytest.mark.parametrize("args,fragment", [
    (["sweep", "--experiments", "nope"], "unknown experiment 'nope'"),
    (["sweep", "--sizes", "0"], "'0' is not a positive size"),
    (["sweep", "--sizes=-4K"], "'-4K' is not a positive size"),
    (["sweep", "--sizes", "-4K"], "expected one argument"),
    (["sweep", "--sizes", "lots"], "'lots' is not a size"),
    (["sweep", "--device", "x"], "invalid int value"),
    (["sweep", "--axis", "streams"], "expected NAME=V1,V2"),
    (["sweep", "--axis", "colour=red"], "unknown axis 'colour'"),
    (["sweep", "--axis", "host_memory=floppy"], "'floppy' is not a value of host_memory"),
    (["sweep", "--axis", "streams=0"], "must be positive"),
    (["sweep", "--axis", "streams=many"], "is not a number"),
    (["sweep", "--frobnicate"], "unrecognized arguments"),
    (["teleport"], "invalid choice"),
    ([], "required"),
    (["plot"], "no results files"),
    (["plot", "missing.parquet"], "cannot read results file"),
    (["compare", "missing.parquet", "other.parquet"], "cannot read results file"),
    (["compare", "only-one.parquet"], "required: new"),
    (["compare", "a.parquet", "b.parquet", "--fail-above", "-5"], "zero or positive"),
    (["compare", "a.parquet", "b.parquet", "--fail-above", "lots"], "invalid float value"),
    (["report", "missing.parquet"], "cannot read results file"),
    (["report"], "no results files"),
    (["sweep", "--resume", "missing.parquet"], "cannot read results file"),
    (["claims", "missing.parquet"], "cannot read results file"),
])
def test_usage_errors(tmp_path, args, fragment):
    assert_usage_error(bench(*args, cwd=tmp_path), tmp_path, fragment)


@pytest.mark.parametrize("command", [["plot"], ["report"], ["compare", "{}", "{}"], ["compare", "good.parquet", "{}"],
                                     ["claims"], ["sweep", "--resume"]])
def test_foreign_newer_and_non_parquet_files(tmp_path, command):
    from bench import store
    from synthetic import bandwidth_rows

    pq.write_table(pa.table({"a": [1]}), tmp_path / "foreign.parquet")
    newer = pa.table({"a": [1]}).replace_schema_metadata({b"bench": json.dumps({"schema_version": 99})})
    pq.write_table(newer, tmp_path / "newer.parquet")
    (tmp_path / "notes.parquet").write_text("not parquet")
    store.write(tmp_path / "good.parquet", bandwidth_rows().head(3).to_dict("records"), {"run_id": "x"})
    for name, fragment in (("foreign", "not a bench results file"), ("newer", "schema version 99"),
                           ("notes", "cannot read results file")):
        args = [word.format(f"{name}.parquet") for word in command]
        if "{}" not in " ".join(command):
            args.append(f"{name}.parquet")
        assert_usage_error(bench(*args, cwd=tmp_path), tmp_path, fragment)


def test_compare_without_common_configurations(tmp_path):
    from bench import store
    from synthetic import bandwidth_rows

    rows = bandwidth_rows()
    store.write(tmp_path / "a.parquet", rows.head(3).to_dict("records"), {"run_id": "a"})
    store.write(tmp_path / "b.parquet", rows.tail(3).to_dict("records"), {"run_id": "b"})
    assert_usage_error(bench("compare", "a.parquet", "b.parquet", cwd=tmp_path), tmp_path, "no timed configuration")


def test_report_writes_one_file_and_refuses_an_unwritable_place(tmp_path):
    from bench import store
    from synthetic import bandwidth_rows

    store.write(tmp_path / "results" / "r.parquet", bandwidth_rows().to_dict("records"), {"run_id": "x"})
    result = bench("report", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert [p.name for p in (tmp_path / "plots").iterdir()] == ["report.html"]
    target = "/proc/bench-report/report.html" if os.geteuid() == 0 else str(tmp_path / "results" / "x" / "r.html")
    if os.geteuid() != 0:
        (tmp_path / "results").chmod(0o500)
    result = bench("report", "--out", target, cwd=tmp_path)
    assert result.returncode == 2 and "cannot write to" in result.stderr


def test_sweep_without_gpu(tmp_path, no_gpu):
    assert_usage_error(bench("sweep", cwd=tmp_path), tmp_path, "no CUDA GPU visible")
    assert_usage_error(bench("env", cwd=tmp_path), tmp_path, "no CUDA GPU visible")


def test_unwritable_output_directory(tmp_path):
    if os.geteuid() == 0:
        target = Path("/proc/bench-results")  # not writable even for root
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        target = locked / "results"
    assert_usage_error(bench("sweep", "--out", str(target), cwd=tmp_path), tmp_path, "cannot write to")


def test_plot_writes_figures(tmp_path):
    from bench import store
    from synthetic import bandwidth_rows

    store.write(tmp_path / "results" / "20261121T000000Z-Test-GPU.parquet",
                bandwidth_rows().to_dict("records"), {"run_id": "x"})
    result = bench("plot", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == ["bandwidth.png", "bandwidth.svg"]


def test_claims_from_a_results_file_needs_no_gpu(tmp_path):
    import pandas as pd

    from bench import store
    from synthetic import alloc_and_graphs_rows, blocking_rows

    rows = pd.concat([blocking_rows(), alloc_and_graphs_rows()], ignore_index=True)
    store.write(tmp_path / "r.parquet", rows.to_dict("records"), {"run_id": "synthetic"})
    result = bench("claims", "r.parquet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "cudaGetLastError waits for running kernels: FALSE" in result.stdout
    assert "NOT MEASURED" not in result.stdout and not (tmp_path / "results").exists()


def test_claims_with_missing_experiments_and_no_gpu(tmp_path, no_gpu):
    result = bench("claims", cwd=tmp_path)
    assert_usage_error(result, tmp_path, "GPU")


def test_memory_checks_device_then_host():
    from bench import sweep
    from bench.cli import memory_problem

    plans = sweep.plan(["bandwidth"], sizes=[1 << 30])  # two 1 GiB buffers on each side, random-fill scratch
    assert memory_problem(plans, "GPU", device_free=8 << 30, host_available=8 << 30) is None
    assert "needs 2.2 GiB of device memory; GPU has 1 GiB free" in memory_problem(plans, "GPU", 1 << 30, 8 << 30)
    assert "needs 2 GiB of host memory; 1 GiB is available" in memory_problem(plans, "GPU", 8 << 30, 1 << 30)
