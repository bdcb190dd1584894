"""bench on a real terminal (a pseudo-terminal) and on pipes: Ctrl-C during a report is one line from bench alone
(its figure workers stay silent), SIGTERM leaves the terminal as it found it (the cursor its bar hid shown again),
piped output is plain lines, and a stream that cannot encode '→' gets '->' instead of a traceback."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import sys
import time
from pathlib import Path

import pytest

import synthetic
from commands import bench
from paths import with_path
from test_compare import driver_update

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "results" / "20261127T112130Z-481-NVIDIA-H200.parquet"  # a report of it draws for some seconds
HIDE, SHOW = b"\x1b[?25l", b"\x1b[?25h"
DEADLINE_S = 120  # for a line that must come: a hung command fails the test instead of hanging it


def _environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": with_path(str(ROOT / "src")), "TERM": "xterm-256color", "COLUMNS": "120",
            "LINES": "40"}


def _read_until(fd: int, wanted: bytes, seen: bytearray) -> bool:
    """Read the terminal into ``seen`` until ``wanted`` shows (True) or it closes (False)."""
    end = time.monotonic() + DEADLINE_S
    while wanted not in seen and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 1)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the other side closed
                return False
            if not chunk:
                return False
            seen += chunk
    return wanted in seen


def on_terminal(args: list[str], cwd: Path, interrupt) -> tuple[int, bytes]:
    """``python -m bench ARGS`` on a pseudo-terminal; once its progress bar draws figures, ``interrupt(pid, fd)``;
    (its exit status, all it wrote to the terminal)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: bench, its stdin, stdout and stderr the terminal
        os.chdir(cwd)
        os.execve(sys.executable, [sys.executable, "-m", "bench", *args], _environment())
    seen = bytearray()
    try:
        assert _read_until(fd, b"drawing the report's figures", seen), bytes(seen)
        interrupt(pid, fd)
        _read_until(fd, b"\0never", seen)  # to the end
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), bytes(seen)


def _lines(seen: bytes) -> list[str]:
    """What a reader sees line by line, the bar's redrawing aside."""
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen.decode("utf-8", "replace")).replace("\r\n", "\n")
    return [line.split("\r")[-1] for line in text.split("\n") if line.split("\r")[-1].strip()]


@pytest.fixture
def report_args(tmp_path) -> list[str]:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("the report draws its figures in worker processes only where there are two CPUs or more")
    return ["report", str(RUN), "--out", str(tmp_path / "r.html")]


def test_ctrl_c_during_a_report_is_one_line_from_bench_alone(tmp_path, report_args):
    """What the user sees. Whether a worker would have spoken depends on when ^C finds it (one drawing hands its
    error back in silence; one waiting for a figure printed its traceback): the next test holds that it never may."""
    status, seen = on_terminal(report_args, tmp_path, lambda pid, fd: os.write(fd, b"\x03"))  # ^C: every process
    assert status == 130, seen
    words = [line for line in _lines(seen) if not line.startswith(("reading the results", "laying out",
                                                                     "drawing the report's figures"))]
    assert words[-1:] == ["bench: interrupted"] and b"Traceback" not in seen and b"KeyboardInterrupt" not in seen, seen
    assert not (tmp_path / "r.html").exists()


def test_the_figure_workers_leave_interrupts_to_bench():
    from bench.report.figures import Painter

    with Painter() as painter:
        if painter.pool is None:
            pytest.skip("one CPU: the report draws in its own process")
        assert painter.pool.submit(signal.getsignal, signal.SIGINT).result() == signal.SIG_IGN


def test_sigterm_during_a_report_restores_the_cursor(tmp_path, report_args):
    status, seen = on_terminal(report_args, tmp_path, lambda pid, fd: os.kill(pid, signal.SIGTERM))
    assert status == 128 + signal.SIGTERM, seen
    assert HIDE in seen and seen.rfind(SHOW) > seen.rfind(HIDE), seen  # the bar hid the cursor; it is back
    assert _lines(seen)[-1] == "bench: ended by SIGTERM" and b"Traceback" not in seen, seen
    assert not (tmp_path / "r.html").exists()


# --- pipes --------------------------------------------------------------------------------------------------------

@pytest.fixture
def two_runs(tmp_path) -> Path:
    old, new = driver_update()
    synthetic.write(tmp_path / "old.parquet", old)
    synthetic.write(tmp_path / "new.parquet", new)
    return tmp_path


def test_piped_output_is_plain_lines(two_runs):
    long = two_runs / ("a-long-directory-name-" * 6)
    long.mkdir()
    done = bench("compare", "old.parquet", "new.parquet", "--all", cwd=two_runs, COLUMNS="80")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines and not [line for line in lines if line != line.rstrip() or "\x1b" in line]
    assert max(map(len, lines)) > 80  # a table as wide as its cells, never wrapped at 80 columns
    listed = bench("sweep", "--list", cwd=two_runs, COLUMNS="80")
    assert not [line for line in listed.stdout.splitlines() if line != line.rstrip()]
    out = long / "report.html"
    with_figures = bench("report", "old.parquet", "--out", out, cwd=two_runs, without_cuda=True, COLUMNS="80")
    assert with_figures.returncode == 0 and with_figures.stdout == f"wrote {out}\n", with_figures.stderr


def test_a_stream_that_cannot_encode_gets_plain_spellings(two_runs):
    done = bench("compare", "old.parquet", "new.parquet", "--all", cwd=two_runs, PYTHONIOENCODING="ascii")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "->" in done.stdout and "→" not in done.stdout
    assert bench("compare", "old.parquet", "new.parquet", cwd=two_runs).stdout.count("→") > 0
