"""Compare bench's pinned H2D/D2H medians with the C++ reference (scripts/reference_bandwidth.cu).

Usage: python scripts/compare_reference.py RESULTS.parquet REFERENCE.csv [--tolerance 0.03] [--gpu INDEX]
Prints one line per direction × size and exits 1 if any differs by more than the tolerance. A file of several GPUs
needs --gpu: the index (``gpu_index``) of the GPU the C++ loop ran on.
"""

import argparse
import sys

import pandas as pd


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results")
    parser.add_argument("reference")
    parser.add_argument("--tolerance", type=float, default=0.03)
    parser.add_argument("--gpu", type=int, help="the gpu_index of the rows to compare")
    args = parser.parse_args()
    rows = pd.read_parquet(args.results)
    if args.gpu is not None:
        rows = rows[rows["gpu_index"] == args.gpu]
    elif rows["gpu_uuid"].nunique() > 1:
        parser.error("the results hold several GPUs: name the one the C++ loop ran on with --gpu")
    ours = rows[(rows["experiment"] == "bandwidth") & (rows["host_memory"] == "pinned") & (rows["status"] == "ok")]
    ours = ours.set_index(["direction", "bytes"])["gbps"]
    reference = pd.read_csv(args.reference).set_index(["direction", "bytes"])["gbps"]
    worst = 0.0
    print(f"{'direction':<9} {'bytes':>12} {'bench GB/s':>11} {'C++ GB/s':>9} {'diff':>7}")
    for key, cpp in reference.items():
        if key not in ours.index:
            continue
        diff = ours[key] / cpp - 1
        worst = max(worst, abs(diff))
        print(f"{key[0]:<9} {key[1]:>12} {ours[key]:>11.2f} {cpp:>9.2f} {diff:>+7.2%}")
    verdict = "within" if worst <= args.tolerance else "OUTSIDE"
    print(f"largest difference {worst:.2%}: {verdict} ±{args.tolerance:.0%}")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
