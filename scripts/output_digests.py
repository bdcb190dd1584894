"""The SHA-256 of everything the reading commands print and write on the committed results: report, compare (text,
JSON, Markdown), claims (text, JSON, Markdown), plot and sweep --list (CASES), each run as ``python -m bench`` in a
checkout's root, its inputs under that checkout's ``results/``, every file it writes into a directory of its own
outside the checkout. Issue 54's guard rail (moving code changes no output): tests/test_outputs_unchanged.py holds
this checkout's digests to tests/data/outputs_before_refactor.json, recorded at commit 0311a27, before the move.

    python scripts/output_digests.py                          # this checkout's digests, as JSON on stdout
    python scripts/output_digests.py --at 0311a27 --write     # commit 0311a27's, into the JSON

``--at COMMIT`` runs the commands on that commit's tree (``git archive`` into a temporary directory: nothing here
changes) with this script's cases; ``--write`` writes RECORDED instead of printing.

Normalised: only the absolute path of the directory a command writes into, a new temporary one each run, which
report and plot print (``wrote /tmp/.../report.html``): ``<out>`` in stdout and stderr. Nothing else differs from run
to run (the same bytes on every run, with any hash seed, with the report's figures drawn in one process or in
workers, in another checkout's directory), so nothing else is normalised; files are hashed as written. bench's cache
is off, so every figure and report is drawn by the code under test. A figure's bytes depend on the libraries that
draw it, so the JSON records their versions (:func:`environment`).
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "tests" / "data" / "outputs_before_refactor.json"
OUT = "{out}"  # in a case's arguments: the directory it writes into (its own, empty, outside the checkout)
OUT_MARK = "<out>"

# The committed inputs (results/, as committed): every run for the report (its figures: each experiment's, drawn from
# the GPU that measured it last); two H100 runs and two H200 runs of one kind on two machines each for compare (the
# machine-to-machine spread from the rest of results/); the newest runs for claims, and one H200 run alone; for plot,
# the first H200 sweep (8 experiments, overlap's timeline from its side table) and the two-GPU run (peer, hostlinks,
# crossgpu): every figure of the newest run takes plot 12-20 s on 2 cores, these two 8-12 s.
H100_OLD = "results/20261123T231801Z-2805-NVIDIA-H100-80GB-HBM3.parquet"
H100_NEW = "results/20261127T105602Z-482-NVIDIA-H100-80GB-HBM3.parquet"
H200 = "results/20261122T034221Z-NVIDIA-H200.parquet"
H200_NEWEST = "results/20261127T112130Z-481-NVIDIA-H200.parquet"
H200_FIRST = "results/20261121T222607Z-NVIDIA-H200.parquet"
H200_PAIR = "results/20261122T014724Z-NVIDIA-H200.parquet"


@dataclass(frozen=True)
class Case:
    """One command: its name in the JSON and in a failure, and its arguments after ``python -m bench``."""

    name: str
    args: tuple[str, ...]


CASES = (
    Case("sweep --list", ("sweep", "--list")),
    Case("sweep --list --quick", ("sweep", "--list", "--quick")),
    Case("sweep --list --full", ("sweep", "--list", "--full")),
    Case("report results", ("report", "results", "--out", f"{OUT}/report.html")),
    Case("report results --gpu", ("report", "results", "--gpu", "GPU-eff64406", "--out", f"{OUT}/h200.html")),
    Case("compare H100 text", ("compare", H100_OLD, H100_NEW)),
    Case("compare H100 text --all", ("compare", H100_OLD, H100_NEW, "--all")),
    Case("compare H100 json", ("compare", H100_OLD, H100_NEW, "--format", "json")),
    Case("compare H100 markdown", ("compare", H100_OLD, H100_NEW, "--format", "markdown")),
    Case("compare H200 text", ("compare", H200, H200_NEWEST)),
    Case("compare H200 json", ("compare", H200, H200_NEWEST, "--format", "json")),
    Case("compare H200 markdown", ("compare", H200, H200_NEWEST, "--format", "markdown")),
    Case("claims", ("claims",)),
    Case("claims json", ("claims", "--format", "json")),
    Case("claims markdown", ("claims", "--format", "markdown")),
    Case("claims H200 text", ("claims", H200)),
    Case("claims H200 json", ("claims", H200, "--format", "json")),
    Case("claims H200 markdown", ("claims", H200, "--format", "markdown")),
    Case("plot H200 first sweep", ("plot", H200_FIRST, "--out", OUT)),
    Case("plot H200 two GPUs", ("plot", H200_PAIR, "--out", OUT)),
)

# What the bytes of a figure, a report or a printed table depend on besides bench's own code.
LIBRARIES = ("numpy", "pandas", "pyarrow", "matplotlib", "pillow", "rich")


def environment() -> dict[str, str]:
    """The versions the digests depend on: Python's, the drawing and formatting libraries', FreeType's (glyphs) and
    zlib's (PNG compression)."""
    import zlib

    import matplotlib.ft2font
    from PIL import features

    versions = {"python": platform.python_version()}
    versions |= {name: importlib.metadata.version(name) for name in LIBRARIES}
    versions["freetype"] = matplotlib.ft2font.__freetype_version__
    versions["zlib"] = zlib.ZLIB_RUNTIME_VERSION
    versions["pillow zlib"] = str(features.version("zlib"))
    return versions


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def child_environment(root: Path) -> dict[str, str]:
    """The environment of each command: this one's, with ``root``'s bench first on PYTHONPATH, bench's cache off (every
    figure and report drawn, none copied from an earlier run; none kept), and no variable that makes rich take the
    pipe for a terminal."""
    given = os.environ.get("PYTHONPATH")
    child = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root / "src"), given])),
             "BENCH_CACHE_DIR": "off"}
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        child.pop(name, None)
    return child


def run_case(case: Case, root: Path, out: Path) -> dict:
    """Run ``case`` in ``root`` writing into ``out`` (made here, empty): its exit status, the digests of its stdout
    and stderr (``out``'s path as ``<out>``) and of every file it wrote, by path under ``out``."""
    out.mkdir(parents=True)
    args = [arg.replace(OUT, str(out)) for arg in case.args]
    done = subprocess.run([sys.executable, "-m", "bench", *args], cwd=root, env=child_environment(root),
                          capture_output=True, stdin=subprocess.DEVNULL, timeout=600)
    mark = OUT_MARK.encode()
    files = {path.relative_to(out).as_posix(): sha256(path.read_bytes())
             for path in sorted(out.rglob("*")) if path.is_file()}
    return {"exit": done.returncode, "stdout": sha256(done.stdout.replace(os.fsencode(out), mark)),
            "stderr": sha256(done.stderr.replace(os.fsencode(out), mark)), "files": files}


def digests(root: Path = ROOT, out: Path | None = None, cases: Sequence[Case] = CASES,
            jobs: int = 2) -> dict[str, dict]:
    """Every case's digests (:func:`run_case`), by name, run in checkout ``root``, ``jobs`` commands at a time, each
    writing into its own directory under ``out`` (a temporary directory, removed after, where None)."""
    if out is None:
        with tempfile.TemporaryDirectory(prefix="bench-digests-") as temporary:
            return digests(root, Path(temporary), cases, jobs)
    with ThreadPoolExecutor(jobs) as pool:
        done = pool.map(lambda numbered: run_case(numbered[1], root, out / f"case{numbered[0]:02d}"), enumerate(cases))
        return {case.name: result for case, result in zip(cases, done)}


def differences(recorded: dict[str, dict], now: dict[str, dict]) -> list[str]:
    """One line per output that differs: the command, and stdout, stderr, the exit status or the file."""
    lines = []
    for name in sorted(recorded.keys() | now.keys()):
        if name not in now or name not in recorded:
            lines.append(f"{name}: {'not run now' if name not in now else 'not recorded'}")
            continue
        before, after = recorded[name], now[name]
        for part in ("exit", "stdout", "stderr"):
            if before[part] != after[part]:
                lines.append(f"{name}: {part} differs" + (f" ({before[part]} then, {after[part]} now)"
                                                          if part == "exit" else ""))
        for path in sorted(before["files"].keys() | after["files"].keys()):
            if path not in after["files"]:
                lines.append(f"{name}: {path} not written now")
            elif path not in before["files"]:
                lines.append(f"{name}: {path} written now, not then")
            elif before["files"][path] != after["files"][path]:
                lines.append(f"{name}: {path} differs")
    return lines


def commit_tree(commit: str, into: Path, repository: Path = ROOT) -> Path:
    """The tree of ``commit`` (of ``repository``'s git) written under ``into``: ``into``."""
    archive = subprocess.run(["git", "-C", str(repository), "archive", "--format=tar", commit],
                             capture_output=True, check=True).stdout
    with tempfile.TemporaryFile() as file:
        file.write(archive)
        file.seek(0)
        with tarfile.open(fileobj=file) as tar:
            if hasattr(tarfile, "data_filter"):  # Python 3.10.12, 3.11.4 and later
                tar.extractall(into, filter="data")
            else:
                tar.extractall(into)
    return into


def resolved(commit: str, repository: Path = ROOT) -> str:
    return subprocess.run(["git", "-C", str(repository), "rev-parse", "--verify", f"{commit}^{{commit}}"],
                          capture_output=True, text=True, check=True).stdout.strip()


def record(commit: str | None) -> dict:
    """The JSON: where the commands ran, under which versions, and their digests."""
    if commit is None:
        return {"commit": None, "environment": environment(), "commands": digests()}
    with tempfile.TemporaryDirectory(prefix="bench-digests-") as temporary:
        tree = commit_tree(commit, Path(temporary) / "tree")
        return {"commit": resolved(commit), "environment": environment(),
                "commands": digests(tree, Path(temporary) / "out")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--at", metavar="COMMIT",
                        help="run the commands on this commit's tree (default: this checkout)")
    parser.add_argument("--write", action="store_true", help=f"write the JSON to {RECORDED.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    text = json.dumps(record(args.at), indent=1, sort_keys=True) + "\n"
    if args.write:
        RECORDED.parent.mkdir(exist_ok=True)
        RECORDED.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
