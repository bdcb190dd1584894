"""The DRAM-latency diagnosis: bench's pointer chase and the C++ one (scripts/reference_paths.cu), each on its own chain
and on the other's, alternately, twice (run by scripts/gpu_check.sh "chase-swap").

Usage (on a GPU): python scripts/chase_swap.py REFERENCE_BINARY [--bytes 268435456]

bench's side is the latency experiment's method (``kernels.Chase`` timed by ``bench.timing.Timer`` behind the gate,
one launch of ``STEPS`` dependent loads per sample, walking on from launch to launch); the C++ side is its own
loop (21 event-timed launches). If the harnesses agree on the same chain, the difference is the chain; if each
keeps its figure on either chain, it is the harness.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from bench.platform.cuda import cupy, runtime
from bench.measure import kernels
from bench.measure.chase import STEPS, chain_end, pointer_chain, timed_chase
from bench.measure.memory import DeviceBuffer
from bench.timing import StopRule, Timer


def cpp_ns(binary: str, nbytes: int, **env: str) -> float:
    """The C++ chase's ns per load at ``nbytes`` (device memory), with extra environment (CHAIN_IN_/CHAIN_OUT_)."""
    printed = subprocess.run([binary], env={**os.environ, "ONLY_CHASE": "1", **env}, capture_output=True, text=True,
                             check=True).stdout
    for line in printed.splitlines():
        test, size, median, *_ = line.split(",")
        if test == "chase_device" and size == str(nbytes):
            return float(median)
    raise RuntimeError(f"no chase_device row for {nbytes} bytes in:\n{printed}")


def bench_ns(words: np.ndarray) -> tuple[float, int]:
    """bench's chase on ``words``: median ns per load and the number of samples."""
    stream = cupy.cuda.Stream(non_blocking=True)
    out = cupy.zeros(1, dtype=cupy.uint64)
    with DeviceBuffer("malloc", words.nbytes) as memory:
        runtime.memcpy(memory.ptr, words.ctypes.data, words.nbytes, runtime.memcpyHostToDevice)
        row = timed_chase({}, kernels.Chase(), stream, memory.ptr, out, chain_end(words, STEPS), Timer(StopRule()))
    if "ns_per_access" not in row:
        raise RuntimeError(row["error"])
    return row["ns_per_access"], row["n_samples"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary")
    parser.add_argument("--bytes", type=int, default=256 << 20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:  # two chains of --bytes each
        ours, theirs = Path(folder) / "bench-chain.bin", Path(folder) / "cpp-chain.bin"
        pointer_chain(args.bytes).tofile(ours)
        key = str(args.bytes)
        print(f"{'round':<6} {'harness':<8} {'chain':<8} {'ns per load':>12}")
        for round_ in (1, 2):
            own = cpp_ns(args.binary, args.bytes, **{f"CHAIN_OUT_{key}": str(theirs)})
            print(f"{round_:<6} {'C++':<8} {'C++':<8} {own:>12.1f}")
            print(f"{round_:<6} {'C++':<8} {'bench':<8} "
                  f"{cpp_ns(args.binary, args.bytes, **{f'CHAIN_IN_{key}': str(ours)}):>12.1f}")
            for chain, path in (("bench", ours), ("C++", theirs)):
                ns, samples = bench_ns(np.fromfile(path, dtype=np.uint64))
                print(f"{round_:<6} {'bench':<8} {chain:<8} {ns:>12.1f}   ({samples} samples)")


if __name__ == "__main__":
    main()
