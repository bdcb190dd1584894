"""Statistics and stopping: :class:`Summary` (the one statistics type), :class:`StopRule` (when to stop sampling),
:class:`Samples` (raw samples with their unit and clock, and the sample columns of a result row), and the units,
clocks and stop reasons that the schema shares.

Pure Python: it imports the standard library only (never :mod:`bench.platform.cuda`, CuPy or numba), so the analysis
commands, the planner and the schema use it without any CUDA library installed.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from bench.platform.vocabulary import Clock, StopReason, Unit, values

# The robust standard error of a median: 1.2533 σ/√n (large-sample, normal data), with σ estimated as 1.4826·MAD.
_MEDIAN_SE_FACTOR = 1.2533 * 1.4826
UNITS = {Unit.MS: 1e3, Unit.US: 1e6}  # unit -> per second
CLOCKS = values(Clock)
STOP_REASONS = values(StopReason)


class MeasurementFailed(RuntimeError):
    """A measurement that produced no trustworthy number; its message says why."""


@dataclass(frozen=True)
class Summary:
    """Statistics of a list of samples, in the samples' unit."""

    n: int
    median: float
    min: float
    max: float
    stdrel: float  # sample standard deviation / mean (nvbench's "noise")
    median_relerr: float  # robust standard error of the median / median: how well the median is pinned down

    @classmethod
    def of(cls, samples: Sequence[float]) -> Summary:
        if not len(samples):
            raise ValueError("no samples")
        values = [float(value) for value in samples]
        n = len(values)
        median = statistics.median(values)
        mean = statistics.fmean(values)
        stdrel = statistics.stdev(values) / mean if n > 1 and mean > 0 else math.inf
        if n > 1 and median > 0:
            mad = statistics.median(abs(x - median) for x in values)
            median_relerr = _MEDIAN_SE_FACTOR * mad / math.sqrt(n) / median
        else:
            median_relerr = math.inf
        return cls(n, median, min(values), max(values), stdrel, median_relerr)


def median(samples: Sequence[float]) -> float:
    """The median of float ``samples`` (not empty) as numpy's ``median`` makes it, NaN where one is NaN, at a
    fraction of its cost per call: analysis takes the medians of thousands of short lists."""
    if any(math.isnan(value) for value in samples):
        return math.nan
    return float(statistics.median(samples))


MEDIAN_LEVEL = 0.95  # the confidence of a median's interval (median_interval)


def median_interval(samples: Sequence[float], level: float = MEDIAN_LEVEL) -> tuple[float, float] | None:
    """The distribution-free interval of the median of ``samples`` at ``level`` confidence: the order statistics
    x(k) and x(n+1-k) with the largest k for which P(Binomial(n, 1/2) < k) <= (1 - level) / 2, so that it covers the
    true median with probability >= ``level`` whatever the samples' distribution. None when no interval reaches
    ``level`` (at 95%: five samples or fewer; six give [min, max] at 96.9%, ten [x(2), x(9)] at 97.9%)."""
    values = sorted(float(value) for value in samples)
    k = _interval_rank(len(values), level)
    return (values[k - 1], values[len(values) - k]) if k else None


@functools.lru_cache(maxsize=None)
def _interval_rank(n: int, level: float) -> int:
    tail, log_mass, below, k = (1 - level) / 2, -n * math.log(2), 0.0, 0  # log P(Binomial(n, 1/2) = 0)
    for j in range(n // 2):
        below += math.exp(log_mass)  # P(Binomial(n, 1/2) <= j)
        if below > tail:
            break
        k = j + 1
        log_mass += math.log((n - j) / (j + 1))
    return k


@dataclass(frozen=True)
class Floor:
    """An experiment's accuracy floor: a row meets it with ``min_samples`` samples or more, or with fewer where the
    95% interval of their median lies within ``interval`` (relative) of it. A sweep never scales a rule's minimum
    samples below it (:meth:`StopRule.scaled`)."""

    min_samples: int = 10
    interval: float = 0.01

    def __post_init__(self) -> None:
        if self.min_samples < 1 or not 0 < self.interval < 1:
            raise ValueError("need min_samples >= 1 and 0 < interval < 1")

    def met(self, samples: Sequence[float]) -> bool:
        if len(samples) >= self.min_samples:
            return True
        if not len(samples):
            return False
        median = statistics.median(samples)
        interval = median_interval(samples)
        return (interval is not None and median > 0
                and max(median - interval[0], interval[1] - median) <= self.interval * median)

    def __str__(self) -> str:
        return f"{self.min_samples} samples, or a 95% interval of the median within {self.interval:.0%}"


@dataclass(frozen=True)
class StopRule:
    """When to stop sampling one measurement, and how to size its batches."""

    min_samples: int = 10
    max_samples: int = 1000
    target_relerr: float = 0.005  # stop once the median is known to ±0.5% (one standard error)...
    time_cap_s: float = 0.3  # ...or once this much time was spent sampling (after min_samples)
    warmup_batches: int = 1  # discarded batches at full batch size, after the two single-op sizing batches
    batch_ms: float = 1.0  # aim each batch at this much GPU time, so event resolution (~0.5 µs) is negligible
    max_ops_per_batch: int = 64  # bound the queue behind a closed gate well below the stream's queue depth
    gate_timeout_s: float = 5.0

    def __post_init__(self) -> None:
        if not 1 <= self.min_samples <= self.max_samples:
            raise ValueError("need 1 <= min_samples <= max_samples")
        if self.target_relerr <= 0 or self.time_cap_s <= 0 or self.batch_ms <= 0 or self.gate_timeout_s <= 0:
            raise ValueError("target_relerr, time_cap_s, batch_ms and gate_timeout_s must be positive")
        if self.max_ops_per_batch < 1 or self.warmup_batches < 0:
            raise ValueError("need max_ops_per_batch >= 1 and warmup_batches >= 0")

    def replace(self, **changes) -> StopRule:
        return dataclasses.replace(self, **changes)

    def capped(self, time_cap_s: float, min_samples: int) -> StopRule:
        """This rule, spending at most ``time_cap_s`` and needing at most ``min_samples`` (a quick or budgeted
        sweep)."""
        return self.replace(time_cap_s=min(self.time_cap_s, time_cap_s),
                            min_samples=min(self.min_samples, min_samples))

    def scaled(self, scale: float) -> StopRule:
        """This rule with its time cap scaled down by ``scale`` (< 1: a sweep keeping to its time budget). Its
        minimum samples stay: they are the experiment's accuracy floor (:class:`Floor`), which no budget buys off."""
        if scale >= 1:
            return self
        return self.replace(time_cap_s=self.time_cap_s * scale)

    def stop_reason(self, samples: Sequence[float], sampling_s: float) -> str | None:
        """``"converged"``, ``"time_cap"``, ``"max_samples"``, or None to keep sampling."""
        n = len(samples)
        if n >= self.max_samples:
            return StopReason.MAX_SAMPLES
        if n < self.min_samples:
            return None
        if Summary.of(samples).median_relerr <= self.target_relerr:
            return StopReason.CONVERGED
        if sampling_s >= self.time_cap_s:
            return StopReason.TIME_CAP
        return None

    def ops_per_batch(self, single_op_ms: float) -> int:
        """How many operations a batch needs to last about ``batch_ms``."""
        if single_op_ms <= 0:
            return self.max_ops_per_batch
        return max(1, min(self.max_ops_per_batch, math.ceil(self.batch_ms / single_op_ms)))


@dataclass(frozen=True)
class Samples:
    """Raw samples of one measurement: what one sample is (``metric``), its unit and the clock that read it."""

    values: list[float]
    unit: str  # one of UNITS
    clock: str  # one of CLOCKS
    metric: str  # e.g. "GPU time per copy"
    stop_reason: str  # one of STOP_REASONS
    ops_per_sample: int = 1
    gated: bool | None = None  # GPU samples: whether the work waited behind the gate

    @property
    def summary(self) -> Summary:
        return Summary.of(self.values)

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    def columns(self) -> dict:
        """The sample columns of a result row (the same for every experiment)."""
        summary = self.summary
        return {"samples": list(self.values), "unit": self.unit, "clock": self.clock, "metric": self.metric,
                "n_samples": summary.n, "ops_per_sample": self.ops_per_sample, "gated": self.gated,
                "median": summary.median, "min": summary.min, "max": summary.max, "stdrel": summary.stdrel,
                "median_relerr": summary.median_relerr, "stop_reason": self.stop_reason}

    @staticmethod
    def missing(unit: str, clock: str, metric: str, gated: bool | None = None) -> dict:
        """The sample columns of a row that was not measured (it failed, or its data did not verify)."""
        nan = math.nan
        return {"samples": [], "unit": unit, "clock": clock, "metric": metric, "n_samples": 0, "ops_per_sample": 0,
                "gated": gated, "median": nan, "min": nan, "max": nan, "stdrel": nan, "median_relerr": nan,
                "stop_reason": None}
