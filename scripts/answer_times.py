"""How long ``bench syncs``, ``bench trace`` and ``bench probe`` take to answer from the command line, against T0: a
bare ``python -c`` that imports the target's module and makes its library's first CUDA call, run on the same machine
just before each tool runs (``--t0 round``: once before each round of the tools).

    python scripts/answer_times.py [--runs 5] [--out results/_answers] [--tools syncs,trace,probe] [--targets ...]
                                   [--t0 each|round] [--bench-src DIR]

Targets: the README's examples (PyTorch: ``docs/examples/train_step.py:step`` under every tool,
``docs/examples/input_pipeline.py:step`` under ``trace``) and one region per library (``docs/examples/cupy_step.py:
step``, ``docs/examples/jax_step.py:step``, every tool). Each round runs each tool once on a target, each just after
a T0 (the tools' order turning round by round); ``--runs`` rounds per target, after each tool ran once on it
unrecorded (``--warmup``: the first call on a machine fills bench's caches, CuPy's and numba's kernel caches; the
JSON keeps those times). Each tool runs with ``-v``: its phases are kept with its row. A region's own time
(``region_ms``) is the median of five warm calls in a process of its own. ``--bench-src`` runs the tools from another
bench source tree (an older commit's ``src``) for a before-and-after on one machine.

Writes ``<out>/<run_id>-<gpu>.parquet`` (through bench's store, table ``answers``: columns ``tool``, ``target``,
``library``, ``region_ms``, ``t0_s``, ``wall_s``, ``round``, ``status``, ``phases``, ``bench_src`` and the GPU's
environment, ``gpu_name``, ``gpu_uuid`` and ``git_commit`` among it) and a ``.json`` beside it (the rows, the
environment, each target's T0 and tools' medians); prints a table. Needs a GPU. ``--from-json RUN.json`` measures
nothing: it writes the parquet of an earlier run from its JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ("syncs", "trace", "probe")
FIRST_CALL = {  # a library's first CUDA call, and the wait for it
    "torch": "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()",
    "cupy": "import cupy; cupy.zeros(1); cupy.cuda.runtime.deviceSynchronize()",
    "jax": "import jax.numpy as jnp; jnp.zeros(1).block_until_ready()",
}
SYNCHRONIZE = {"torch": "torch.cuda.synchronize()", "cupy": "cupy.cuda.runtime.deviceSynchronize()",
               "jax": "jax.effects_barrier()"}
LOAD = """
import importlib.util, sys
path, name = sys.argv[1].rsplit(':', 1)
sys.path[:0] = ['', str(__import__('pathlib').Path(path).resolve().parent)]
spec = importlib.util.spec_from_file_location('__target__', path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
"""
REGION = LOAD + """
import time, statistics, {library}
{synchronize_import}
function = getattr(module, name)
function(); {synchronize}
times = []
for _ in range(5):
    began = time.perf_counter(); function(); {synchronize}; times.append((time.perf_counter() - began) * 1e3)
print(statistics.median(times))
"""
TABLE = "answers"  # the bench metadata's table name: not a sweep's results file
PHASE = re.compile(r"^bench:\s+([0-9.]+) s\s+\S+ (.+)$")


@dataclass(frozen=True)
class Target:
    """A region the tools answer on: MODULE-or-FILE:FUNCTION, the library whose first CUDA call T0 makes, and the
    tools timed on it."""

    target: str
    library: str
    tools: tuple[str, ...] = TOOLS


TARGETS = (Target("docs/examples/train_step.py:step", "torch"),  # the README's syncs and probe; PyTorch's region
           Target("docs/examples/input_pipeline.py:step", "torch", ("trace",)),  # the README's trace
           Target("docs/examples/cupy_step.py:step", "cupy"),
           Target("docs/examples/jax_step.py:step", "jax"))


def timed(command: list[str], env: dict) -> tuple[float, int, str]:
    """Wall seconds, exit status and stderr of ``command``."""
    began = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return time.perf_counter() - began, done.returncode, done.stderr


def t0(target: Target, env: dict) -> float:
    seconds, status, errors = timed([sys.executable, "-c", LOAD + FIRST_CALL[target.library], target.target], env)
    if status:
        raise SystemExit(f"T0 of {target.target} failed ({status}): {errors.strip()[-400:]}")
    return seconds


def region_ms(target: Target, env: dict) -> float:
    library = {"torch": "torch", "cupy": "cupy", "jax": "jax"}[target.library]
    code = REGION.format(library=library, synchronize_import="", synchronize=SYNCHRONIZE[target.library])
    done = subprocess.run([sys.executable, "-c", code, target.target], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    if done.returncode:
        raise SystemExit(f"the region {target.target} failed: {done.stderr.strip()[-400:]}")
    return float(done.stdout.split()[-1])


def phases(stderr: str) -> dict[str, float]:
    """What ``-v`` printed: phase -> seconds."""
    return {match[2]: float(match[1]) for line in stderr.splitlines() if (match := PHASE.match(line))}


def columns() -> tuple:
    """The typed columns of an answers file: one row per tool run, then the GPU's environment."""
    from bench.results.schema import INT, FLOAT, TEXT, column, environment_columns

    return (column("tool", TEXT, "the bench command timed: syncs, trace or probe"),
            column("target", TEXT, "the region it answered on: FILE:FUNCTION"),
            column("library", TEXT, "the library whose first CUDA call T0 makes"),
            column("region_ms", FLOAT, "the region's own time: median of five warm calls"),
            column("t0_s", FLOAT, "T0: a bare python -c importing the module and making the first CUDA call"),
            column("wall_s", FLOAT, "the tool's command, wall-clock seconds"),
            column("round", INT, "the round: its T0 ran just before its tools"),
            column("status", INT, "the command's exit status"),
            column("phases", TEXT, "what -v printed: phase to seconds, as JSON"),
            column("bench_src", TEXT, "the bench source tree the tools ran from"),
            *environment_columns())


def write_parquet(path: Path, rows: list[dict], environment: dict, new: bool) -> Path:
    """The rows, each with the environment, through bench's store (typed, its metadata naming the table)."""
    from bench.results import store

    return store.write_declared(path, [{**environment, **row} for row in rows], columns(), TABLE, new)


def summarized(rows: list[dict]) -> dict:
    """Per target and tool: the median T0 and wall time, the median and worst time beyond T0."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["target"], row["tool"]), []).append(row)
    return {f"{target} {tool}": {"t0_s": statistics.median(row["t0_s"] for row in group),
                                 "wall_s": statistics.median(row["wall_s"] for row in group),
                                 "beyond_t0_s": statistics.median(row["wall_s"] - row["t0_s"] for row in group),
                                 "worst_beyond_t0_s": max(row["wall_s"] - row["t0_s"] for row in group)}
            for (target, tool), group in groups.items()}


def from_json(path: Path) -> Path:
    """The parquet of a run written from its JSON (the rows and the environment it keeps), beside it, replacing
    the one there: for runs written before the parquet carried bench's metadata."""
    kept = json.loads(path.read_text())
    return write_parquet(path.with_suffix(".parquet"), kept["rows"], kept["gpu"], new=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="rounds per target (default 5)")
    parser.add_argument("--t0", choices=("each", "round"), default="each",
                        help="each: T0 runs just before each tool's run (default); round: once per round, before its "
                             "first tool (fewer runs: the runs committed on 2026-12-07 were made so)")
    parser.add_argument("--from-json", type=Path, metavar="JSON",
                        help="measure nothing: write the parquet of an earlier run from its JSON, replacing it")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "_answers")
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--targets", help="comma-separated targets (default: all four)")
    parser.add_argument("--bench-src", type=Path, help="run the tools from this bench source tree (default: src/)")
    parser.add_argument("--warmup", type=int, default=len(TOOLS),
                        help="how many of the tools run once per target before the rounds, unrecorded in the table "
                             "(the JSON keeps their times): a first call on a machine fills the caches (default: all)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    if args.from_json:
        print(f"wrote {from_json(args.from_json)}")
        return 0
    chosen = args.tools.split(",")
    targets = [t for t in TARGETS if not args.targets or t.target in args.targets.split(",")]
    from bench.platform.env import gpu_environment

    environment = gpu_environment(0)
    env = dict(os.environ)
    tool_env = dict(env, PYTHONPATH=os.pathsep.join(filter(None, [str((args.bench_src or ROOT / "src").resolve()),
                                                                   env.get("PYTHONPATH", "")])))
    rows, warmup = [], []
    for target in targets:
        region = region_ms(target, env)
        tools = [tool for tool in chosen if tool in target.tools]
        for tool in tools[:args.warmup]:  # the first call on this machine fills the caches the next ones read
            wall, status, _ = timed([sys.executable, "-m", "bench", tool, target.target], tool_env)
            warmup.append({"tool": tool, "target": target.target, "wall_s": wall, "status": status})
            print(f"{target.target:<40} {tool:<6} warm-up: {wall:6.2f} s", flush=True)
        for number in range(args.runs):
            zero = t0(target, env)
            order = tools[number % len(tools):] + tools[:number % len(tools)]
            for index, tool in enumerate(order):
                if args.t0 == "each" and index:  # T0 just before each tool, not only before the round's first
                    zero = t0(target, env)
                wall, status, errors = timed([sys.executable, "-m", "bench", tool, "-v", target.target], tool_env)
                rows.append({"tool": tool, "target": target.target, "library": target.library, "region_ms": region,
                             "t0_s": zero, "wall_s": wall, "gpu_name": environment.device.gpu_name,
                             "gpu_uuid": environment.device.gpu_uuid, "git_commit": environment.host.git_commit,
                             "round": number, "status": status, "phases": json.dumps(phases(errors)),
                             "bench_src": str(args.bench_src or "src")})
                print(f"{target.target:<40} {tool:<6} round {number}: T0 {zero:6.2f} s, {wall:6.2f} s "
                      f"({wall - zero:+.2f} s){'' if not status else f' exit {status}: ' + errors.strip()[-200:]}",
                      flush=True)
    run_id = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    stem = f"{run_id}-{environment.device.gpu_name.replace(' ', '-')}"
    args.out.mkdir(parents=True, exist_ok=True)
    summary = summarized(rows)
    (args.out / f"{stem}.json").write_text(json.dumps({"gpu": environment.as_dict(), "runs": args.runs,
                                                        "t0": args.t0,
                                                        "summary": summary, "warmup": warmup, "rows": rows},
                                                       indent=2))
    write_parquet(args.out / f"{stem}.parquet", rows, environment.as_dict(), new=True)
    for name, numbers in summary.items():
        print(f"{name:<48} T0 {numbers['t0_s']:6.2f} s  tool {numbers['wall_s']:6.2f} s  "
              f"beyond T0 {numbers['beyond_t0_s']:+.2f} s (worst {numbers['worst_beyond_t0_s']:+.2f} s)")
    print(f"wrote {args.out / stem}.json and its parquet")
    return 0


if __name__ == "__main__":
    sys.exit(main())
