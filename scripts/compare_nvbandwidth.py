"""Compare bench's figures with NVIDIA's nvbandwidth on the same GPU (run by scripts/gpu_check.sh "nvbandwidth").

Usage: python scripts/compare_nvbandwidth.py RESULTS.parquet NVBANDWIDTH.json [--bytes 268435456] [--tolerance 0.05]

nvbandwidth runs with ``-b 256`` (a 256 MiB buffer) on GPU 0; each of its tests is paired with bench's figure at the
same size and the same meaning:
- ``*_memcpy_ce``: bench's pinned cudaMemcpyAsync (``bandwidth``); the bidirectional tests report the measured
  direction while the other direction runs, which is bench's BIDIR ``h2d_gbps`` / ``d2h_gbps``;
- ``device_local_copy``: bench's D2D copy (bytes counted once by both);
- ``*_memcpy_sm``: bench's SM copies (``zerocopy``);
- ``host_device_latency_sm``: bench's host-mapped pointer chase (``latency``, 1 MiB). The methods differ (nvbandwidth
  chases a 2 MiB buffer in 128-byte steps, in order, and its time includes one kernel launch per SM; bench chases a
  random cycle of 256-byte slots), so that line is information, not a check.
Prints one line per pair and exits 1 if a checked pair differs by more than the tolerance.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

BANDWIDTH = {  # nvbandwidth test -> (bench experiment, selection, bench column)
    "host_to_device_memcpy_ce": ("bandwidth", {"host_memory": "pinned", "direction": "H2D"}, "gbps"),
    "device_to_host_memcpy_ce": ("bandwidth", {"host_memory": "pinned", "direction": "D2H"}, "gbps"),
    "host_to_device_bidirectional_memcpy_ce": ("bandwidth", {"host_memory": "pinned", "direction": "BIDIR"},
                                               "h2d_gbps"),
    "device_to_host_bidirectional_memcpy_ce": ("bandwidth", {"host_memory": "pinned", "direction": "BIDIR"},
                                               "d2h_gbps"),
    "device_local_copy": ("bandwidth", {"host_memory": "device", "direction": "D2D"}, "gbps"),
    "host_to_device_memcpy_sm": ("zerocopy", {"direction": "H2D"}, "gbps"),
    "device_to_host_memcpy_sm": ("zerocopy", {"direction": "D2H"}, "gbps"),
}
LATENCY = ("host_device_latency_sm", "latency", {"memory": "host-mapped"}, "ns_per_access", 1 << 20)


def testcases(path: str) -> list[dict]:
    """nvbandwidth's test cases from its JSON output (whatever it printed before the JSON passed over)."""
    text = Path(path).read_text()
    return json.loads(text[text.index("{"):])["nvbandwidth"]["testcases"]


def arguments(description: str) -> argparse.Namespace:
    """RESULTS.parquet NVBANDWIDTH.json [--bytes N] [--tolerance F], as both comparisons take them."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("results")
    parser.add_argument("nvbandwidth")
    parser.add_argument("--bytes", type=int, default=256 << 20)
    parser.add_argument("--tolerance", type=float, default=0.05)
    return parser.parse_args()


def verdict(diff: float, tolerance: float, checked: bool) -> str:
    """A pair's last column: within the tolerance, outside it, or information only."""
    if not checked:
        return "info (method differs)"
    return f"ok ±{tolerance:.0%}" if abs(diff) <= tolerance else f"OUTSIDE ±{tolerance:.0%}"


def nvbandwidth_values(path: str) -> dict[str, float]:
    """Test name -> GPU 0's figure (the first number in its matrix)."""
    values = {}
    for test in testcases(path):
        numbers = [float(cell) for row in test.get("bandwidth_matrix", []) for cell in row if cell != "N/A"]
        if numbers:
            values[test["name"]] = numbers[0]
    return values


def bench_value(rows: pd.DataFrame, experiment: str, selection: dict, column: str, nbytes: int) -> float | None:
    mask = (rows["experiment"] == experiment) & (rows["status"] == "ok") & (rows["bytes"] == nbytes)
    for key, value in selection.items():
        mask &= rows[key] == value
    found = rows.loc[mask, column]
    return float(found.median()) if len(found) else None


def main() -> int:
    args = arguments(__doc__.splitlines()[0])
    rows = pd.read_parquet(args.results)
    theirs = nvbandwidth_values(args.nvbandwidth)
    print(f"{'nvbandwidth test':<40} {'bench':>9} {'nvbandwidth':>11} {'unit':<5} {'diff':>8}  check")
    worst, failed, compared = 0.0, False, 0
    pairs = [(test, *BANDWIDTH[test], args.bytes, "GB/s", True) for test in BANDWIDTH]
    pairs.append((LATENCY[0], *LATENCY[1:4], LATENCY[4], "ns", False))
    for test, experiment, selection, column, nbytes, unit, checked in pairs:
        ours = bench_value(rows, experiment, selection, column, nbytes)
        if test not in theirs or ours is None:
            print(f"{test:<40} {'—' if ours is None else f'{ours:.2f}':>9} {theirs.get(test, '—')!s:>11} {unit:<5}"
                  f" {'':>8}  missing")
            continue
        diff = ours / theirs[test] - 1
        within = abs(diff) <= args.tolerance
        if checked:
            worst = max(worst, abs(diff))
            failed |= not within
            compared += 1
        print(f"{test:<40} {ours:>9.2f} {theirs[test]:>11.2f} {unit:<5} {diff:>+8.2%}  "
              f"{verdict(diff, args.tolerance, checked)}")
    if not compared:
        print("nothing compared: these results hold none of the copies nvbandwidth measured")
        return 1
    print(f"largest checked difference {worst:.2%}: {'OUTSIDE' if failed else 'within'} ±{args.tolerance:.0%}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
