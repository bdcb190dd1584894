"""``bench trace`` against ``bench trace --from`` of the PyTorch profiler's trace of the same step, on one GPU
(issue 53 §3): each figure both give, from bench's own CUPTI session and from the profiler's, side by side.

    python scripts/profiler_agree.py OUT_DIR [--runs 5] [--targets docs/examples/input_pipeline.py:step,...]

Per target, in a process of its own each: ``bench.trace`` (its run of median makespan), and ``torch.profiler``
(CPU and CUDA activities, ``with_stack=True``) over ``--runs`` single steps after a warm-up, each exported as Chrome
JSON and read by bench; the profiler's run of median makespan is compared. Writes OUT_DIR/agree.json (every figure of
both, and whether shares agree within 1 point and times within 2%), the profiler's trace of the first target's median
run gzipped (``<name>.pt.trace.json.gz``) with bench's reading of it (``.txt``), and prints a table.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGETS = "docs/examples/input_pipeline.py:step,docs/examples/input_pipeline.py:pageable_step"
SHARES = ("hidden",)  # compared in points
TIMES = ("makespan_ms", "copy_ms", "hidden_ms", "duplex_ms", "busy_compute_ms", "busy_H2D_ms", "busy_D2H_ms")
SHARE_POINTS, TIME_SHARE = 1.0, 0.02


def _function(target: str):
    import importlib.util

    file, name = target.rsplit(":", 1)
    spec = importlib.util.spec_from_file_location("target_module", ROOT / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def _figures(result) -> dict:
    summary = result.summary()
    found = {name: summary.get(name) for name in (*SHARES, *TIMES)}
    found["pageable_copies"] = summary.get("pageable_copies")
    found["kernels"] = sum(str(a.op) == "kernel" for a in result.records.activities)
    found["copies"] = sum(str(a.op) in ("H2D", "D2H") for a in result.records.activities)
    return found


def child_bench(target: str, runs: int) -> dict:
    import bench

    result = bench.trace(_function(target), runs=runs)
    return {"figures": _figures(result), "makespans_ms": result.runs.makespans_ms}


def child_profiler(target: str, runs: int, keep: Path) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from bench.usercode.trace.profiler import described_trace

    function = _function(target)
    function()
    torch.cuda.synchronize()
    found = []
    with tempfile.TemporaryDirectory() as scratch:
        for run in range(runs):
            path = Path(scratch) / f"run{run}.json"
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], with_stack=True) as profiler:
                function()
                torch.cuda.synchronize()
            profiler.export_chrome_trace(str(path))
            found.append((described_trace(path, 0, references=False)[0].makespan_ms, path))
        found.sort(key=lambda item: item[0])
        path = found[(len(found) - 1) // 2][1]
        result, notes = described_trace(path, 0)  # the median run, with this GPU's pinned references
        with path.open("rb") as source, gzip.open(keep, "wb") as packed:
            shutil.copyfileobj(source, packed)
    return {"figures": _figures(result), "makespans_ms": [item[0] for item in found], "notes": notes,
            "text": str(result)}


def agreement(mine: dict, theirs: dict) -> dict:
    """Each figure's difference: points for shares, a share of bench's for times."""
    rows = {}
    for name in (*SHARES, *TIMES):
        a, b = mine.get(name), theirs.get(name)
        if a is None or b is None:
            rows[name] = {"bench": a, "profiler": b, "agrees": a == b}
            continue
        if name in SHARES:
            off = abs(a - b) * 100
            rows[name] = {"bench": a, "profiler": b, "points": off, "agrees": off <= SHARE_POINTS}
        else:
            off = abs(a - b) / a if a else abs(b)
            rows[name] = {"bench": a, "profiler": b, "share": off, "agrees": off <= TIME_SHARE or abs(a - b) < 1e-3}
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--targets", default=TARGETS)
    parser.add_argument("--child", nargs=3, metavar=("WHO", "TARGET", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    if args.child:
        who, target, out = args.child
        found = (child_bench(target, args.runs) if who == "bench"
                 else child_profiler(target, args.runs, Path(out).with_suffix(".pt.trace.json.gz")))
        Path(out).write_text(json.dumps(found))
        return 0
    if args.out.exists():
        raise SystemExit(f"{args.out} exists: a run writes a new directory")
    args.out.mkdir(parents=True)
    from bench.platform.env import gpu_environment

    report = {"gpu": gpu_environment(0).as_dict(), "runs": args.runs, "targets": {}}
    for index, target in enumerate(args.targets.split(",")):
        name = target.rsplit("/", 1)[-1].replace(":", "-").removesuffix(".py")
        sides = {}
        for who in ("bench", "profiler"):
            out = args.out / f"{name}.{who}.part"
            subprocess.run([sys.executable, __file__, str(args.out), "--runs", str(args.runs), "--child", who, target,
                            str(out)], check=True, timeout=280)
            sides[who] = json.loads(out.read_text())
            out.unlink()
        kept = (args.out / f"{name}.profiler.pt.trace.json.gz")
        if index == 0:
            (args.out / f"{name}.profiler.txt").write_text(
                sides["profiler"]["text"] + "".join(f"\nnote: {note}" for note in sides["profiler"]["notes"]) + "\n")
        else:
            kept.unlink(missing_ok=True)
        rows = agreement(sides["bench"]["figures"], sides["profiler"]["figures"])
        report["targets"][target] = {"bench": sides["bench"], "profiler": {k: v for k, v in sides["profiler"].items()
                                                                           if k != "text"}, "agreement": rows}
        for figure, row in rows.items():
            off = (f"{row['points']:.2f} pts" if "points" in row else
                   f"{row['share']:.2%}" if "share" in row else "-")
            print(f"{name:<28} {figure:<16} bench {row['bench']!s:<22} profiler {row['profiler']!s:<22} {off:<9} "
                  f"{'agrees' if row['agrees'] else 'DIFFERS'}", flush=True)
        print(f"{name:<28} makespans bench {statistics.median(sides['bench']['makespans_ms']):.3f} ms, profiler "
              f"{statistics.median(sides['profiler']['makespans_ms']):.3f} ms", flush=True)
    (args.out / "agree.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
