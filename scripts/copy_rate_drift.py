"""How reproducible is the copies' bound? The fastest duplex copy of a GPU over consecutive blocks of samples.

    python scripts/copy_rate_drift.py OUT.json [--seconds S] [--mib M]

For S seconds, M MiB copied both ways at once (one stream each, behind the gate, timed with CUDA events by
``Timer.run_once``), one sample after another, each with its host time stamp. The copies' bound of a block of n
consecutive samples is the overlap experiment's and bench trace's rule: the fastest sample of each direction, the
larger of the two. For several n, how far the blocks' bounds spread: how many samples a bound needs on this machine
to reproduce itself (:data:`bench.measure.pipeline.BOUND_RULE`). Prints that and, second by second, the fastest
and the median sample.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

BLOCKS = (10, 30, 100, 300, 1000)  # samples per block


def block_bounds(up: list[float], down: list[float], size: int) -> list[float]:
    """The bound of each whole block of ``size`` consecutive samples."""
    return [max(min(up[start:start + size]), min(down[start:start + size]))
            for start in range(0, len(up) - size + 1, size)]


def spread(bounds: list[float]) -> dict:
    low, high = np.percentile(bounds, [25, 75])
    middle = statistics.median(bounds)
    return {"blocks": len(bounds), "min_ms": min(bounds), "median_ms": middle, "max_ms": max(bounds),
            "spread": max(bounds) / min(bounds) - 1, "iqr": float((high - low) / middle)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--mib", type=int, default=256)
    arguments = parser.parse_args()
    if arguments.seconds <= 0 or arguments.mib < 1:
        parser.error("--seconds must be positive and --mib at least 1")
    from bench.platform.env import gpu_environment
    from bench.measure.copies import CopyBuffers, mismatch
    from bench.timing import Timer

    environment = gpu_environment(0)
    nbytes = arguments.mib << 20
    timer = Timer()
    stamps, up, down = [], [], []
    with CopyBuffers("pinned", nbytes) as buffers:
        h2d, d2h = buffers.copies("BIDIR")
        for copy in (h2d, d2h):
            problem = mismatch([copy], nbytes)
            if problem:
                raise SystemExit(f"copy not verified: {problem}")
        began = time.perf_counter()
        while time.perf_counter() - began < arguments.seconds:
            stamps.append(time.perf_counter() - began)
            up_ms, down_ms = timer.run_once(lambda ops: (h2d.enqueue(nbytes), d2h.enqueue(nbytes)),
                                            [h2d.stream, d2h.stream])
            up.append(up_ms)
            down.append(down_ms)
    blocks = {str(size): spread(block_bounds(up, down, size)) for size in BLOCKS if len(up) >= 2 * size}
    gpu = environment.device
    print(f"{gpu.gpu_name} {gpu.gpu_uuid}: {len(up)} samples of {arguments.mib} MiB both ways "
          f"over {arguments.seconds:.0f} s")
    print("samples per bound  blocks  fastest ms  median ms  slowest ms  spread  IQR")
    for size, entry in blocks.items():
        print(f"{size:>17}  {entry['blocks']:6d}  {entry['min_ms']:10.4f}  {entry['median_ms']:9.4f}  "
              f"{entry['max_ms']:10.4f}  {entry['spread']:+6.2%}  {entry['iqr']:.2%}")
    print("second  samples  bound-fastest  slower-direction-median  H2D-median  D2H-median")
    seconds = np.floor(stamps)
    for second in np.unique(seconds):
        inside = np.flatnonzero(seconds == second)
        slower = [max(up[i], down[i]) for i in inside]
        print(f"{int(second):6d}  {len(inside):7d}  {max(min(up[i] for i in inside), min(down[i] for i in inside)):13.4f}"
              f"  {statistics.median(slower):23.4f}  {statistics.median(up[i] for i in inside):10.4f}"
              f"  {statistics.median(down[i] for i in inside):10.4f}")
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    arguments.out.write_text(json.dumps({"gpu": environment.as_dict(), "mib": arguments.mib, "seconds": arguments.seconds,
                                         "t_s": stamps, "h2d_ms": up, "d2h_ms": down, "blocks": blocks}, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
