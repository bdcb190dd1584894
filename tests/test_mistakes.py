"""Mistakes a user makes on the command line that bench once took silently or answered with a traceback: each is one
line on stderr, exit status 2, and nothing written. Run as a user runs bench: in a subprocess, without a GPU (the
CUDA libraries hidden, as after ``pip install -e .``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import synthetic
from paths import WITHOUT_CUDA, with_path

ROOT = Path(__file__).resolve().parents[1]
LONG = "n" * 300  # a name over the 255 bytes a file system takes


def bench(*args, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": with_path(f"{WITHOUT_CUDA}{os.pathsep}{ROOT / 'src'}"),
           "BENCH_TEST_LOOKUPS": os.devnull}
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


@pytest.fixture
def here(tmp_path) -> Path:
    synthetic.write(tmp_path / "r.parquet", synthetic.launch_records())
    return tmp_path


def assert_one_line(done: subprocess.CompletedProcess, fragment: str, here: Path) -> None:
    lines = done.stderr.splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("bench: error: "), done.stderr
    assert fragment in lines[0] and "Traceback" not in done.stderr and done.stdout == "", lines[0]
    assert sorted(path.name for path in here.iterdir()) == ["r.parquet"]  # nothing written


@pytest.mark.parametrize("args", [
    ["report", f"{LONG}.parquet"], ["report", "r.parquet", "--out", f"{LONG}.html"], ["plot", f"{LONG}.parquet"],
    ["plot", "r.parquet", "--out", LONG], ["claims", f"{LONG}.parquet"], ["compare", f"{LONG}.parquet", "r.parquet"],
    ["compare", "r.parquet", "r.parquet", "--spread-from", LONG], ["sweep", "--list", "--out", f"{LONG}.parquet"],
    ["sweep", "--list", "--resume", f"{LONG}.parquet"], ["trace", "--merge", f"{LONG}.parquet"],
    ["syncs", "--save", f"{LONG}.parquet", "x.py"]], ids=lambda args: " ".join(args)[:40])
def test_a_name_too_long_is_one_line(here, args):
    assert_one_line(bench(*args, cwd=here), "file name too long: 30", here)


def test_a_target_too_long_is_one_line(here):
    assert_one_line(bench("syncs", f"{LONG}.py", cwd=here), "File name too long", here)


@pytest.mark.parametrize("args, fragment", [
    (["report", "--gpu", ""], "--gpu: an empty name chooses no GPU"),
    (["plot", "--gpu", " "], "--gpu: an empty name chooses no GPU"),
    (["claims", "--out", "X"], "--out: claims writes only what --measure measures"),
    (["sweep", "--list", "--experiments", ""], "--experiments '': name experiments"),
    (["sweep", "--list", "--experiments", "launch,"], "--experiments 'launch,': name experiments"),
    (["sweep", "--list", "--sizes", "99999999999999999999G"], "is over 1 TiB"),
    (["sweep", "--list", "--devices", "9"], "--devices 9: no GPU is visible here"),
    (["sweep", "--list", "--device", "3"], "--device 3: no GPU is visible here"),
    (["env", "--device", "7"], "--device 7: no GPU is visible here"),
    ([], "name a command: sweep,plot,claims"),
    (["report", "--out", ""], "an empty path names no file"),
])
def test_what_was_taken_silently_is_one_line(here, args, fragment):
    assert_one_line(bench(*args, cwd=here), fragment, here)


def test_what_needs_no_gpu_still_works_without_one(here):
    listed = bench("sweep", "--list", "--devices", "all", "--experiments", "launch", cwd=here)
    assert listed.returncode == 0 and "launch" in listed.stdout, listed.stderr
    shown = bench("env", cwd=here)
    assert shown.returncode == 0 and "none: " in shown.stdout, shown.stderr
