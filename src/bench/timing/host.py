"""Host wall-clock time: intervals and samples of calls whose host cost is the point, the sampling loop every
clock shares (:func:`sample_until`, and :class:`RuleBoundSampling`, what the sweep's pacing reads), the harness's
:class:`Stopwatch` and :func:`process_age_s`.

It imports the standard library and :mod:`bench.timing.stats` only: no CUDA.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.timing.stats import UNITS, Samples, StopRule
from bench.platform.vocabulary import Clock, StopReason, Unit


class RuleBoundSampling:
    """Seconds this process has spent in sampling loops whose length the stop rule decided: those that ended at
    the time cap or at the minimum number of samples. A smaller cap or minimum would shorten them; a loop that
    converged later, or any time outside sampling, would not change."""

    seconds = 0.0


def sample_until(rule: StopRule, sample: Callable[[], float]) -> tuple[list[float], str]:
    """Call ``sample()`` until the rule says stop; the samples and why it stopped."""
    samples: list[float] = []
    started = time.perf_counter()
    while True:
        samples.append(sample())
        sampling_s = time.perf_counter() - started
        reason = rule.stop_reason(samples, sampling_s)
        if reason:
            if reason == StopReason.TIME_CAP or len(samples) == rule.min_samples:
                RuleBoundSampling.seconds += sampling_s
            return samples, reason


# --- host intervals ------------------------------------------------------------------------------------------

def _elapsed(call: Callable[[], object]) -> tuple[float, object]:
    """Seconds ``call()`` took on the host, and what it returned."""
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def host_interval(call: Callable[[], object], unit: str = "ms") -> tuple[float, object]:
    """One host wall-clock interval around ``call()``, in ``unit``, and what the call returned."""
    seconds, result = _elapsed(call)
    return seconds * UNITS[unit], result


def host_samples(call: Callable[[], None], rule: StopRule, *, metric: str, unit: str = Unit.US, per_sample: int = 1,
                 warmup: int = 2, after: Callable[[], None] | None = None) -> Samples:
    """Host wall-clock time of ``call()`` until the stop rule is met: work whose host cost is the point (launch
    overhead, allocation). Each sample is one call divided by ``per_sample`` (the operations it makes); ``after``
    runs untimed after each call, e.g. to synchronize before the next."""

    def sample() -> float:
        seconds, _ = _elapsed(call)
        if after is not None:
            after()
        return seconds * UNITS[unit] / per_sample

    for _ in range(warmup):
        sample()
    values, reason = sample_until(rule, sample)
    return Samples(values, unit, Clock.HOST, metric, reason, per_sample)


def host_steps(steps: Sequence[tuple[str, Callable[[], None]]], rule: StopRule, *, unit: str = Unit.US,
               warmup: int = 1) -> tuple[dict[str, list[float]], str]:
    """Host time of each of several calls made in turn (allocate, free, synchronize), round after round until the
    stop rule is met on the rounds' totals. Returns each step's samples, and ``"total"``: the sum per round."""
    per_step: dict[str, list[float]] = {name: [] for name, _ in steps}

    def one_round() -> float:
        total = 0.0
        for name, call in steps:
            seconds, _ = _elapsed(call)
            per_step[name].append(seconds * UNITS[unit])
            total += seconds * UNITS[unit]
        return total

    for _ in range(warmup):
        one_round()
    for values in per_step.values():
        values.clear()
    totals, reason = sample_until(rule, one_round)
    return {**per_step, "total": totals}, reason


class Stopwatch:
    """Seconds since it was made (or ``already_s`` before): how long the harness spent on a configuration, an
    experiment or the whole command."""

    def __init__(self, already_s: float = 0.0) -> None:
        self._started = time.perf_counter() - already_s

    def seconds(self) -> float:
        return time.perf_counter() - self._started


def process_age_s() -> float:
    """Seconds since this process started (its interpreter's start and imports included); 0 where Linux's /proc
    cannot tell."""
    try:
        after_name = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started_ticks = int(after_name[19])  # field 22, starttime, in clock ticks after boot
        uptime_s = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime_s - started_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0
