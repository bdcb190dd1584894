"""What the benchmarks share: the GPU clocks pytest-benchmark times with, and how a GPU benchmark runs.

pytest-benchmark takes its statistics from its ``timer`` option: these clocks (:class:`bench.timing.GpuClock`)
make that the GPU time of the benchmarked work on :attr:`GpuClock.stream`, read with CUDA events, so the min,
median and stddev it reports, saves and compares are GPU times, not host wall-clock time.
"""

from __future__ import annotations

import math

from bench.timing import GpuClock, StopRule, host_samples

GATED = GpuClock()  # work waits behind a gate until the host has enqueued all of a round
UNGATED = GpuClock(gated=False)  # for work that waits on the host itself (pageable copies, cudaFree)
ROUNDS = 20
WARMUP_ROUNDS = 2
ROUND_MS = 1.0  # rounds of tiny operations repeat them until they last about this long


def iterations_for(expected_ms: float, most: int = 64) -> int:
    """Operations per round so that a round lasts about ``ROUND_MS`` (event resolution is about 0.5 µs)."""
    return max(1, min(most, math.ceil(ROUND_MS / max(expected_ms, 1e-6))))


def run(benchmark, clock: GpuClock, op, *, iterations: int = 1, rounds: int = ROUNDS) -> float:
    """Benchmark ``op`` (enqueues its work on ``clock.stream``) in pedantic mode; returns the median GPU seconds
    per operation and puts the host's cost of calling ``op`` into extra_info (``host_us``). ``clock`` must be the
    benchmark's timer (``@pytest.mark.benchmark(timer=clock)``), the one seam pytest-benchmark times through."""
    try:
        benchmark.pedantic(op, rounds=rounds, warmup_rounds=WARMUP_ROUNDS, iterations=iterations)
    finally:
        clock.release()
    host = host_samples(op, StopRule(min_samples=10, max_samples=10), metric="host time of one round", unit="us",
                        after=clock.stream.synchronize)
    benchmark.extra_info["host_us"] = host.median
    benchmark.extra_info["timer"] = "GPU time (CUDA events), gated" if clock.gated else "GPU time (CUDA events)"
    return benchmark.stats.stats.median
