"""``python -m bench`` as a user runs it: a child process, its output captured, its standard input closed; and what a
refusal looks like to that user (one ``bench: error:`` line, exit status 2, nothing on stdout, no traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from paths import WITHOUT_CUDA, with_path

ROOT = Path(__file__).resolve().parents[1]


def bench(*args, cwd: Path, without_cuda: bool = False, timeout: float = 120,
          **env: str) -> subprocess.CompletedProcess:
    """``python -m bench ARGS`` in ``cwd`` (``without_cuda``: the CUDA libraries hidden and figures painted blank, as
    tests/clone_site does), with ``env`` set besides."""
    first = f"{WITHOUT_CUDA}{os.pathsep}{ROOT / 'src'}" if without_cuda else str(ROOT / "src")
    lookups = {"BENCH_TEST_LOOKUPS": os.devnull} if without_cuda else {}
    environment = {**os.environ, "PYTHONPATH": with_path(first), **lookups, **env}
    return subprocess.run([sys.executable, "-m", "bench", *map(str, args)], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def assert_refused(done: subprocess.CompletedProcess, fragment: str) -> None:
    lines = done.stderr.splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("bench: error: "), done.stderr
    assert fragment in lines[0] and "Traceback" not in done.stderr and done.stdout == "", lines[0]
