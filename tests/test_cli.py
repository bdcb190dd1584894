"""``python -m bench sweep`` and ``env`` from the command line: a mistake is one line on stderr, exit 2, no traceback,
nothing written; plan mistakes are reported before the GPU is looked for. (plot, claims, compare and report:
tests/test_analysis_cli.py.)"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import cli, runner, store
from bench import plan as planning
from fake_experiments import FINE, FakeGpu

SRC = str(Path(__file__).resolve().parents[1] / "src")


def bench(*args, cwd):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def assert_usage_error(status, stderr, fragment, cwd, before=()):
    assert status == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bench: error: "), stderr
    assert fragment in lines[0] and "Traceback" not in stderr, lines[0]
    assert sorted(path.name for path in Path(cwd).iterdir()) == sorted(before)  # nothing written


@pytest.fixture
def main(tmp_path, monkeypatch, capsys):
    """``bench`` in this process, in an empty directory: (exit status, stdout, stderr)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")  # rich wraps its lines at the terminal's width

    def call(*args):
        status = cli.main(list(args))
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    return call


@pytest.mark.parametrize("args, fragment", [
    (["sweep", "--experiments", "nope"], "unknown experiment 'nope'"),
    (["sweep", "--experiments", "bandwidth,bandwidth"], "experiment 'bandwidth' is named twice"),
    (["sweep", "--quick", "--full"], "argument --full: not allowed with argument --quick"),
    (["sweep", "--budget", "0"], "'0' is not a positive finite number"),
    (["sweep", "--budget", "nan"], "'nan' is not a positive finite number"),
    (["sweep", "--budget", "inf"], "'inf' is not a positive finite number"),
    (["sweep", "--budget=-1"], "'-1' is not a positive finite number"),
    (["sweep", "--budget", "soon"], "'soon' is not a number"),
    (["sweep", "--budget", "5"], "--budget 5: these"),
    (["sweep", "--sizes", "0"], "'0' is not a positive size"),
    (["sweep", "--sizes=-4K"], "'-4K' is not a positive size"),
    (["sweep", "--sizes", "-4K"], "expected one argument"),
    (["sweep", "--sizes", "lots"], "'lots' is not a size"),
    (["sweep", "--sizes", "1M:4K"], "the range's start is above its end"),
    (["sweep", "--device", "x"], "invalid int value"),
    (["sweep", "--axis", "streams"], "expected NAME=V1,V2"),
    (["sweep", "--axis", "streams="], "expected NAME=V1,V2"),
    (["sweep", "--axis", "=1"], "expected NAME=V1,V2"),
    (["sweep", "--axis", "colour=red"], "unknown axis 'colour'"),
    (["sweep", "--axis", "host_memory=floppy"], "'floppy' is not a value of host_memory"),
    (["sweep", "--axis", "streams=0"], "must be a positive finite number"),
    (["sweep", "--axis", "compute_ratio=nan"], "compute_ratio='nan' must be a positive finite number"),
    (["sweep", "--axis", "compute_ratio=-inf"], "must be a positive finite number"),
    (["sweep", "--axis", "streams=many"], "is not a number"),
    (["sweep", "--experiments", "launch", "--axis", "streams=1"], "unknown axis 'streams'; the selected "
                                                                  "experiments have path"),
    (["sweep", "--resume", "missing.parquet"], "cannot read results file missing.parquet"),
    (["sweep", "--frobnicate"], "unrecognized arguments"),
    (["sweep", "--devices", "first"], "'first' is not 'all' or GPU ordinals like 0,1"),
    (["sweep", "--devices=0,-1"], "GPU ordinals are 0 or more"),
    (["sweep", "--devices", "0,1", "--device", "1"], "--device and --devices: choose one"),
    (["sweep", "--experiments", "peer"], "peer needs 2 GPUs; this sweep has 1"),
    (["sweep", "--experiments", "launch", "--concurrent"], "--concurrent runs several GPUs at once"),
    (["teleport"], "invalid choice"),
    ([], "required"),
])
def test_sweep_usage_errors(main, tmp_path, args, fragment):
    status, out, err = main(*args)
    assert_usage_error(status, err, fragment, tmp_path)
    assert "no CUDA GPU" not in err  # argument and plan errors come before the GPU is looked for


def test_an_existing_out_file_is_refused_before_the_gpu(main, tmp_path):
    (tmp_path / "r.parquet").write_bytes(b"results")
    status, out, err = main("sweep", "--out", "r.parquet")
    assert_usage_error(status, err, "--out: r.parquet already exists; bench never overwrites results", tmp_path,
                       ["r.parquet"])
    assert (tmp_path / "r.parquet").read_bytes() == b"results"


def test_an_unwritable_out_is_refused(main, tmp_path):
    (tmp_path / "file").write_text("")
    status, out, err = main("sweep", "--out", "file/results")
    assert_usage_error(status, err, "is a file, not a directory", tmp_path, ["file"])


def test_sweep_and_env_without_a_gpu(main, tmp_path, no_gpu):
    for args in (["sweep"], ["sweep", "--quick", "--experiments", "launch"], ["sweep", "--budget", "100"], ["env"]):
        status, out, err = main(*args)
        assert_usage_error(status, err, "no CUDA GPU visible", tmp_path)


def test_usage_errors_from_a_real_process(tmp_path, no_gpu):
    result = bench("sweep", "--axis", "compute_ratio=nan", cwd=tmp_path)
    assert_usage_error(result.returncode, result.stderr, "must be a positive finite number", tmp_path)
    result = bench("sweep", "--quick", cwd=tmp_path)
    assert_usage_error(result.returncode, result.stderr, "no CUDA GPU visible", tmp_path)


# --- a whole sweep through the command line, on a fake GPU -------------------------------------------------------


@pytest.fixture
def fake_suite(monkeypatch):
    """The command line's sweep with one fake experiment and a fake GPU."""
    monkeypatch.setattr(planning, "registry", lambda: {"fine": FINE})
    monkeypatch.setattr(runner, "Gpu", FakeGpu)


def test_a_sweep_from_the_command_line(main, tmp_path, fake_suite):
    status, out, err = main("sweep", "--quick", "--axis", "n=1,3")
    assert status == 0, err
    (path,) = (tmp_path / "results").iterdir()
    assert path.name.endswith("-Fake-GPU.parquet")
    rows = store.read(path)
    assert list(rows["n"]) == [1, 3] and (rows["status"] == "ok").all() and list(rows["n_samples"]) == [3, 3]
    metadata = store.read_metadata(path)
    assert metadata["mode"] == "quick" and metadata["complete"] is True and metadata["command"].startswith(
        "python -m bench")
    assert metadata["stop_rules"]["fine"]["default"]["time_cap_s"] == planning.QUICK_CAPS["time_cap_s"]
    words = " ".join(out.split())
    assert "2 configurations written to" in words and "fine on Fake GPU" in words
    status, out, err = main("sweep", "--out", str(path))
    assert_usage_error(status, err, "already exists", tmp_path, ["results"])


def test_a_sweep_with_a_budget_and_an_out_file(main, tmp_path, fake_suite):
    status, out, err = main("sweep", "--budget", "100", "--out", "run.parquet")
    assert status == 0, err
    assert len(store.read(tmp_path / "run.parquet")) == len(FINE.axes["n"])
    assert store.read_metadata(tmp_path / "run.parquet")["budget_s"] == 100
