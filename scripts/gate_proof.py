"""The gate's proof on a GPU (issue 52 §4): the training loop of docs/examples/train_loop.py gated against its own
baselines after each of four edits, with ``bench syncs``, ``bench trace`` and ``pytest --bench-baseline``.

    python scripts/gate_proof.py OUT_DIR          # e.g. results/_gates/<run_id>-<gpu>

In a scratch project (a copy of the loop, a test of it, a pyproject.toml), it saves the syncs baseline, the trace
baseline and the pytest baselines of the loop as it is, then applies each edit to the copy and gates it:

1. ``moved``: code and blank lines added above the loop: every gate passes;
2. ``item``: a ``.item()`` added inside the step: the syncs and pytest gates fail, naming that line (``--format
   github`` too);
3. ``unlogged``: the logging removed: the gates pass and report its waits gone;
4. ``pageable``: the input batches moved from pinned to pageable memory: the trace gate fails, naming the copy's line.

Writes, under OUT_DIR: the syncs and pytest baselines (the trace baseline's size and digest: its rows are many), and
per edit the edited loop, each command's output (``<edit>/<gate>.txt``,
its command, exit status, stdout and stderr), and ``proof.json``: each gate's exit status against the one expected,
and the environment. Prints a table. Needs a GPU, PyTorch and CUPTI.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOOP = ROOT / "docs" / "examples" / "train_loop.py"
TARGET = "loop.py:train"
TEST = '''from loop import train


def test_train(assert_async):
    train()  # warm up: cuBLAS, the allocator, autograd
    with assert_async():
        train()
'''
STEP_END = "        optimizer.step()\n"
LOGGING = "        if step % LOG_EVERY == 0:\n            losses.append(loss.item())\n"


def moved(source: str) -> str:
    """Code and blank lines added above the loop."""
    return source.replace("\n\ndef train(", "\n\nEDITED = 'lines added above the loop'\n\n\n"
                                           "def unused(value: int) -> int:\n    return value + 1\n\n\ndef train(", 1)


def item(source: str) -> str:
    """A ``.item()`` added inside the step, after the optimizer's step."""
    return source.replace(STEP_END, STEP_END + "        largest = max(parameter.abs().max() for parameter in "
                                               "model.parameters()).item()\n", 1)


def unlogged(source: str) -> str:
    """The logging of the loss removed."""
    return source.replace(LOGGING, "", 1)


def pageable(source: str) -> str:
    """The input batches moved from pinned to pageable memory."""
    return source.replace("inputs = torch.randn(BATCHES, 2048, 1024).pin_memory()",
                          "inputs = torch.randn(BATCHES, 2048, 1024)", 1)


@dataclass(frozen=True)
class Edit:
    """An edit of the loop's source (``apply``), and the exit status each gate must give after it."""

    name: str
    apply: Callable[[str], str]
    expected: dict[str, int]  # gate -> exit status

    @property
    def what(self) -> str:
        return self.apply.__doc__.strip().rstrip(".")


EDITS = (Edit("moved", moved, {"syncs": 0, "trace": 0, "pytest": 0}),
         Edit("item", item, {"syncs": 1, "github": 1, "pytest": 1}),
         Edit("unlogged", unlogged, {"syncs": 0, "pytest": 0}),
         Edit("pageable", pageable, {"trace": 1, "trace-github": 1}))
# bench's plugin named, the installed ones not loaded (PYTEST_DISABLE_PLUGIN_AUTOLOAD): bench may run from src/,
# where no entry point announces it, or be installed, where it would load twice
PLUGIN = ("-p", "bench.pytest_plugin", "-p", "no:cacheprovider")
GATES = {"syncs": ["-m", "bench", "syncs", "--baseline", "syncs-baseline.json", TARGET],
         "github": ["-m", "bench", "syncs", "--baseline", "syncs-baseline.json", "--format", "github", TARGET],
         "trace": ["-m", "bench", "trace", "--baseline", "trace-baseline.parquet", TARGET],
         "trace-github": ["-m", "bench", "trace", "--baseline", "trace-baseline.parquet", "--format", "github",
                          TARGET],
         "pytest": ["-m", "pytest", *PLUGIN, "--bench-baseline", "baselines", "test_loop.py"]}
BASELINES = {"syncs": ["-m", "bench", "syncs", "--save-baseline", "syncs-baseline.json", TARGET],
             "trace": ["-m", "bench", "trace", "--save", "trace-baseline.parquet", TARGET],
             "pytest": ["-m", "pytest", *PLUGIN, "--bench-baseline", "baselines", "--bench-update-baseline",
                        "test_loop.py"]}


def scratch(directory: Path) -> None:
    """The scratch project: the loop, its test, a pyproject.toml."""
    (directory / "pyproject.toml").write_text("[project]\nname = 'gate-proof'\nversion = '0'\n")
    shutil.copyfile(LOOP, directory / "loop.py")
    (directory / "test_loop.py").write_text(TEST)


def run(arguments: list[str], cwd: Path, out: Path) -> int:
    """``python ARGUMENTS`` in ``cwd``; its command, status, stdout and stderr written to ``out``."""
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run([sys.executable, *arguments], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(f"$ python {' '.join(arguments)}\nexit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n"
                   f"{done.stderr}")
    return done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the directory the proof goes to (results/_gates/<run>-<gpu>)")
    args = parser.parse_args()
    if args.out.exists():
        raise SystemExit(f"{args.out} exists: the proof goes to a new directory")
    sys.path.insert(0, str(ROOT / "src"))
    from bench.platform.env import gpu_environment

    environment = gpu_environment(0)
    args.out.mkdir(parents=True)
    proof: dict = {"environment": environment.as_dict(), "baselines": {}, "edits": {}}
    with tempfile.TemporaryDirectory(prefix="gate-proof-") as temporary:
        directory = Path(temporary)
        scratch(directory)
        original = (directory / "loop.py").read_text()
        for gate, arguments in BASELINES.items():
            proof["baselines"][gate] = run(arguments, directory, args.out / "baseline" / f"{gate}.txt")
        for name in ("syncs-baseline.json", "baselines"):
            source = directory / name
            if source.is_dir():
                shutil.copytree(source, args.out / "baseline" / name)
            elif source.exists():
                shutil.copyfile(source, args.out / "baseline" / name)
        traced = directory / "trace-baseline.parquet"  # a row per record of 50 steps: its digest, not its bytes
        if traced.exists():
            proof["trace_baseline"] = {"bytes": traced.stat().st_size,
                                       "sha256": hashlib.sha256(traced.read_bytes()).hexdigest()}
        for edit in EDITS:
            edited = edit.apply(original)
            if edited == original:
                raise SystemExit(f"the edit {edit.name} changed nothing: docs/examples/train_loop.py changed")
            (directory / "loop.py").write_text(edited)
            (args.out / edit.name).mkdir(parents=True)
            (args.out / edit.name / "loop.py").write_text(edited)
            got = {gate: run(GATES[gate], directory, args.out / edit.name / f"{gate}.txt") for gate in edit.expected}
            proof["edits"][edit.name] = {"what": edit.what, "expected": edit.expected, "got": got,
                                         "holds": got == edit.expected}
    (args.out / "proof.json").write_text(json.dumps(proof, indent=2) + "\n")
    for name, found in proof["edits"].items():
        print(f"{name:<9} {'holds' if found['holds'] else 'FAILS'}: expected {found['expected']}, got {found['got']}")
    print(f"baselines: {proof['baselines']}; wrote {args.out}")
    return 0 if all(found["holds"] for found in proof["edits"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
