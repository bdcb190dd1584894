"""Runs are never lost, on a real GPU: two sweeps started in the same second keep two files, and a full disk ends
a sweep with one line and no half-written file. Skipped (with the reason) where no GPU is visible."""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[1]
SWEEP = [sys.executable, "-m", "bench", "sweep", "--experiments", "alloc", "--quick"]


def _environment() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}


def test_two_sweeps_started_at_once_keep_both_runs(tmp_path):
    sweeps = [subprocess.Popen([*SWEEP, "--out", str(tmp_path)], env=_environment(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True) for _ in range(2)]
    errors = [sweep.communicate(timeout=240)[1] for sweep in sweeps]
    assert [sweep.returncode for sweep in sweeps] == [0, 0], errors
    files = sorted(tmp_path.glob("*.parquet"))
    assert len(files) == 2, [path.name for path in files]
    runs = [pd.read_parquet(path) for path in files]
    assert len({tuple(sorted(set(rows["run_id"]))) for rows in runs}) == 2  # two runs, each with an id of its own
    assert len(runs[0]) == len(runs[1]) > 0 and all((rows["status"] == "ok").all() for rows in runs)


@pytest.fixture
def full_disk(tmp_path):
    """A 64 KiB tmpfs (root only)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], capture_output=True,
                             text=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a 64 KiB tmpfs here: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def test_a_full_disk_ends_a_sweep_with_one_line_and_no_half_file(full_disk):
    done = subprocess.run([*SWEEP, "--out", str(full_disk)], env=_environment(), capture_output=True, text=True,
                          timeout=240)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("bench: error:") and str(full_disk) in lines[0], done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    for path in full_disk.rglob("*"):  # whatever is left is whole: bench reads it
        assert not path.name.endswith(".tmp"), path
        if path.suffix == ".parquet":
            assert len(pd.read_parquet(path))
