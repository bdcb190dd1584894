"""Compare bench's zerocopy, latency, roundtrip and launch medians with the C++ reference (scripts/reference_paths.cu).

Usage: python scripts/compare_paths.py RESULTS.parquet REFERENCE.csv [--tolerance 0.05] [--roundtrip-tolerance 0.25]
Prints one line per matched configuration (bench, C++, relative difference) and each experiment's largest difference.
Checked: zerocopy from 1 MiB up and every latency size within --tolerance, every roundtrip size within
--roundtrip-tolerance (host timing noise). Information only: zerocopy below 1 MiB and launch (Python launch paths cost
more than C++ by design). Exits 1 if a checked line is outside its tolerance; an experiment missing from the results
is reported, not failed.
"""

import argparse
import sys
from dataclasses import dataclass

import pandas as pd

MIB = 1 << 20


@dataclass(frozen=True)
class Pairing:
    """How one bench experiment's rows meet the reference's tests."""

    experiment: str
    column: str  # the bench column whose value names the reference test
    tests: dict[str, str]  # that value -> reference test
    value: str  # the bench column holding the figure
    by_bytes: bool = True  # matched on bytes too (launch rows have no size: the reference says 0)


PAIRINGS = (
    Pairing("zerocopy", "direction", {"H2D": "sm_h2d", "D2H": "sm_d2h"}, "gbps"),
    Pairing("latency", "memory", {"host-mapped": "chase_host", "device": "chase_device"}, "ns_per_access"),
    Pairing("roundtrip", "direction", {"H2D": "roundtrip_h2d", "D2H": "roundtrip_d2h"}, "median"),
    Pairing("launch", "path", {"precompiled": "launch_kernel", "cupy-raw": "launch_kernel",
                               "cuda-core": "launch_kernel", "graph": "graph_replay"}, "median", by_bytes=False),
)


def allowed(experiment: str, size: int, args: argparse.Namespace) -> float | None:
    """The tolerance a line is checked against, or None where it is information only."""
    if experiment == "zerocopy":
        return args.tolerance if size >= MIB else None
    if experiment == "latency":
        return args.tolerance
    if experiment == "roundtrip":
        return args.roundtrip_tolerance
    return None


def compare(pairing: Pairing, ours: pd.DataFrame, reference: dict[tuple[str, int], tuple[float, str]],
            args: argparse.Namespace) -> bool:
    """Print the experiment's lines and its largest difference; False if a checked line is outside."""
    rows = ours[ours["experiment"] == pairing.experiment]
    if rows.empty:
        print(f"{pairing.experiment:<10} not in results")
        return True
    keys = [pairing.column, "bytes"] if pairing.by_bytes else [pairing.column]
    figures = rows.groupby(keys)[pairing.value].agg(["median", "size"])  # rows differing in other axes: their median
    checked: list[tuple[float, str]] = []
    info: list[tuple[float, str]] = []
    inside = True
    for key, value, count in figures.itertuples(name=None):
        name, size = (key[0], int(key[1])) if pairing.by_bytes else (key, 0)
        test = pairing.tests.get(name)
        if test is None or (test, size) not in reference:
            continue
        cpp, unit = reference[(test, size)]
        diff = value / cpp - 1
        label = f"{name} {size}" if pairing.by_bytes else f"{name} ({test})"
        label += f" ×{count}" if count > 1 else ""
        tolerance = allowed(pairing.experiment, size, args)
        if tolerance is None:
            verdict = "info"
            info.append((diff, label))
        else:
            verdict = f"{'ok' if abs(diff) <= tolerance else 'OUTSIDE'} ±{tolerance:.0%}"
            checked.append((diff, label))
            inside &= abs(diff) <= tolerance
        print(f"{pairing.experiment:<10} {label:<28} {value:>11.4g} {cpp:>11.4g} {unit:<4} {diff:>+8.2%}  {verdict}")
    if not checked and not info:
        print(f"{pairing.experiment:<10} no configuration matches the reference")
    else:
        diff, label = max(checked or info, key=lambda line: abs(line[0]))
        if checked:
            summary = f"largest checked difference {diff:+.2%} ({label}): {'within' if inside else 'OUTSIDE'}"
        else:
            summary = f"largest difference {diff:+.2%} ({label}): information only"
        print(f"{pairing.experiment:<10} {summary}")
    return inside


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results")
    parser.add_argument("reference")
    parser.add_argument("--tolerance", type=float, default=0.05, help="zerocopy (>= 1 MiB) and latency")
    parser.add_argument("--roundtrip-tolerance", type=float, default=0.25, help="roundtrip (host-timed)")
    args = parser.parse_args()
    rows = pd.read_parquet(args.results)
    ours = rows[rows["status"] == "ok"]
    reference = {(row.test, int(row.bytes)): (float(row.median), str(row.unit))
                 for row in pd.read_csv(args.reference).itertuples(index=False)}
    print(f"{'experiment':<10} {'configuration':<28} {'bench':>11} {'C++':>11} {'unit':<4} {'diff':>8}  check")
    results = [compare(pairing, ours, reference, args) for pairing in PAIRINGS]
    print("all checked lines within their tolerance" if all(results) else "some checked lines are OUTSIDE")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
