"""How a GPU's pinned copy rate moves over time, and how long a bound measurement must sample to reproduce itself.

    python scripts/copy_rate_drift.py OUT.json [--seconds S] [--mib M]

For S seconds, one copy of M MiB at a time, timed alone behind the gate with CUDA events (``Timer.run_once``), in
turn: both directions at once (one stream each), host to device alone, device to host alone. Every sample keeps its
host time stamp. Then, for windows of several lengths cut one after another from the samples, the copies' bound each
window gives (the fastest sample of each direction at once, the larger of the two: the overlap experiment's and
bench trace's rule) and how far those estimates spread from window to window: the sampling time that makes a
bound reproducible on this machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

WINDOWS_S = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0)


def window_bounds(samples: list[dict], window_s: float) -> list[float]:
    """The bound (max of each direction's fastest duplex sample) of each whole window of ``window_s`` seconds."""
    duplex = [sample for sample in samples if sample["kind"] == "duplex"]
    if not duplex:
        return []
    start, bounds = duplex[0]["t_s"], []
    while True:
        inside = [sample for sample in duplex if start <= sample["t_s"] < start + window_s]
        if not inside or start + window_s > duplex[-1]["t_s"]:
            return bounds
        bounds.append(max(min(sample["h2d_ms"] for sample in inside), min(sample["d2h_ms"] for sample in inside)))
        start += window_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--mib", type=int, default=256)
    arguments = parser.parse_args()
    if arguments.seconds <= 0 or arguments.mib < 1:
        parser.error("--seconds must be positive and --mib at least 1")
    from bench.env import gpu_environment
    from bench.measure.copies import CopyBuffers, mismatch
    from bench.timing import Timer

    environment = gpu_environment(0)
    nbytes = arguments.mib << 20
    timer = Timer()
    samples: list[dict] = []
    with CopyBuffers("pinned", nbytes) as buffers:
        h2d, d2h = buffers.copies("BIDIR")
        for copy in (h2d, d2h):
            problem = mismatch([copy], nbytes)
            if problem:
                raise SystemExit(f"copy not verified: {problem}")
        began = time.perf_counter()
        while time.perf_counter() - began < arguments.seconds:
            stamp = time.perf_counter() - began
            up, down = timer.run_once(lambda ops: (h2d.enqueue(nbytes), d2h.enqueue(nbytes)), [h2d.stream, d2h.stream])
            samples.append({"t_s": stamp, "kind": "duplex", "h2d_ms": up, "d2h_ms": down})
            (alone,) = timer.run_once(lambda ops: h2d.enqueue(nbytes), [h2d.stream])
            samples.append({"t_s": time.perf_counter() - began, "kind": "H2D", "h2d_ms": alone})
            (alone,) = timer.run_once(lambda ops: d2h.enqueue(nbytes), [d2h.stream])
            samples.append({"t_s": time.perf_counter() - began, "kind": "D2H", "d2h_ms": alone})
    windows = {}
    for window_s in WINDOWS_S:
        bounds = window_bounds(samples, window_s)
        if len(bounds) >= 2:
            windows[str(window_s)] = {"count": len(bounds), "min_ms": min(bounds), "median_ms": statistics.median(bounds),
                                      "max_ms": max(bounds), "spread": max(bounds) / min(bounds) - 1}
    print(f"{environment.gpu_name} {environment.gpu_uuid}: {len(samples)} samples of {arguments.mib} MiB "
          f"over {arguments.seconds:.0f} s")
    for window_s, entry in windows.items():
        print(f"window {float(window_s):5.2f} s: {entry['count']:4d} windows, bound {entry['min_ms']:.4f}–"
              f"{entry['max_ms']:.4f} ms (median {entry['median_ms']:.4f}), spread {entry['spread']:+.2%}")
    print("second  duplex-bound-fastest  duplex-bound-median  H2D-alone-median  D2H-alone-median")
    for second in range(int(arguments.seconds)):
        inside = [sample for sample in samples if second <= sample["t_s"] < second + 1]
        duplex = [max(s["h2d_ms"], s["d2h_ms"]) for s in inside if s["kind"] == "duplex"]
        up = [s["h2d_ms"] for s in inside if s["kind"] == "H2D"]
        down = [s["d2h_ms"] for s in inside if s["kind"] == "D2H"]
        if duplex and up and down:
            print(f"{second:6d}  {min(duplex):20.4f}  {statistics.median(duplex):19.4f}  {statistics.median(up):16.4f}"
                  f"  {statistics.median(down):16.4f}")
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    arguments.out.write_text(json.dumps({"gpu": environment.as_dict(), "mib": arguments.mib, "samples": samples,
                                         "windows": windows}, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
