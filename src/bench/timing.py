"""All timing: statistics and stopping, GPU intervals (CUDA events, gated or not), host intervals, and host calls
made while the GPU is busy. Experiments describe what to run; this module decides how long, reads the clocks and
computes the statistics.

- :class:`Summary` and :class:`StopRule`: the one statistics type, and when to stop sampling.
- :class:`Samples`: raw samples with their unit and clock; every measured result row carries them the same way
  (:meth:`Samples.columns`).
- :class:`Timer`: GPU time of ``enqueue(ops)`` with CUDA events on the streams that do the work, behind a gate.
- :func:`host_samples`, :func:`host_steps`, :func:`host_interval`: host wall-clock time of calls whose host cost
  is the point.
- :class:`SpinWatch`: a call timed on the host while a spin kernel of known length runs, with what the GPU was
  doing when it returned; two spins around a call, read on the GPU's clock.
- :class:`Context`: what the harness hands an experiment: timers whose stop rules the harness chose.
- :class:`Timeline`, :class:`GpuClock`: events around every operation of one run; the clock pytest-benchmark reads.

Nothing CUDA is imported until a GPU primitive is used, so the statistics serve the analysis commands too.

Example (needs a GPU)::

    from bench.cuda import cupy, runtime
    from bench.timing import Timer

    src, dst = cupy.ones(1 << 24, cupy.uint8), cupy.empty(1 << 24, cupy.uint8)
    stream = cupy.cuda.Stream(non_blocking=True)

    def enqueue(ops):
        for _ in range(ops):
            runtime.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes, runtime.memcpyDeviceToDevice, stream.ptr)

    timing = Timer().measure(enqueue, [stream])
    print(f"{timing.samples.summary.median:.4f} ms per copy ({timing.samples.stop_reason})")
"""

from __future__ import annotations

import dataclasses
import gc
import math
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.cuda import kernels, numba_cuda, on_device, runtime

# The robust standard error of a median: 1.2533 σ/√n (large-sample, normal data), with σ estimated as 1.4826·MAD.
_MEDIAN_SE_FACTOR = 1.2533 * 1.4826
UNITS = {"ms": 1e3, "us": 1e6}  # unit -> per second
CLOCKS = ("gpu", "host")
STOP_REASONS = ("converged", "time_cap", "max_samples", "fixed")


class MeasurementFailed(RuntimeError):
    """A measurement that produced no trustworthy number; its message says why."""


# --- statistics and stopping -----------------------------------------------------------------------------------

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


FEWEST_SAMPLES = 3  # no rule scaled down to fit a time budget asks for fewer


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
        """This rule with its time cap and minimum samples scaled down by ``scale`` (< 1: a sweep keeping to its
        time budget; at least :data:`FEWEST_SAMPLES`)."""
        if scale >= 1:
            return self
        return self.capped(time_cap_s=self.time_cap_s * scale,
                           min_samples=max(FEWEST_SAMPLES, math.ceil(self.min_samples * scale)))

    def stop_reason(self, samples: Sequence[float], sampling_s: float) -> str | None:
        """``"converged"``, ``"time_cap"``, ``"max_samples"``, or None to keep sampling."""
        n = len(samples)
        if n >= self.max_samples:
            return "max_samples"
        if n < self.min_samples:
            return None
        if Summary.of(samples).median_relerr <= self.target_relerr:
            return "converged"
        if sampling_s >= self.time_cap_s:
            return "time_cap"
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


class RuleBoundSampling:
    """Seconds this process has spent in sampling loops whose length the stop rule decided: those that ended at
    the time cap or at the minimum number of samples. A smaller cap or minimum would shorten them; a loop that
    converged later, or any time outside sampling, would not change."""

    seconds = 0.0


def _sample_until(rule: StopRule, sample: Callable[[], float]) -> tuple[list[float], str]:
    """Call ``sample()`` until the rule says stop; the samples and why it stopped."""
    samples: list[float] = []
    started = time.perf_counter()
    while True:
        samples.append(sample())
        sampling_s = time.perf_counter() - started
        reason = rule.stop_reason(samples, sampling_s)
        if reason:
            if reason == "time_cap" or len(samples) == rule.min_samples:
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


def host_samples(call: Callable[[], None], rule: StopRule, *, metric: str, unit: str = "us", per_sample: int = 1,
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
    values, reason = _sample_until(rule, sample)
    return Samples(values, unit, "host", metric, reason, per_sample)


def host_steps(steps: Sequence[tuple[str, Callable[[], None]]], rule: StopRule, *, unit: str = "us",
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
    totals, reason = _sample_until(rule, one_round)
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


# --- GPU intervals: gate, events, batches -------------------------------------------------------------------------

class Gate:
    """A one-thread kernel that holds a stream until the host opens it, with a watchdog.

    The latch lives in host-mapped pinned memory: ``latch[0]`` is the host's release flag, ``latch[1]`` the
    kernel's outcome. If the host does not open the gate within ``timeout_s`` the kernel gives up, and
    :meth:`check` raises: the batch it held was not measured behind a closed gate.
    """

    def __init__(self, timeout_s: float) -> None:
        import numpy as np

        self._latch = numba_cuda.mapped_array(2, dtype=np.int32)
        self._timeout_ns = np.uint64(int(timeout_s * 1e9))
        self.timeout_s = timeout_s
        self._held: ExitStack | None = None

    def close(self, stream) -> None:
        """Launch the gate on a stream (anything with a CUDA handle in ``ptr``); work enqueued behind it waits
        until :meth:`open`.

        Until then, Python's garbage collector and numba's deferred deallocations are held back: a finalizer that
        frees CUDA memory (cudaFree, cudaFreeHost) waits for the device, which waits behind the gate for the host.
        """
        self._latch[0] = 0
        self._latch[1] = kernels.GATE_PENDING
        kernels.launch_single_thread(kernels.gate_kernel, stream, self._latch, self._timeout_ns)
        self._hold()

    def open(self) -> None:
        self._latch[0] = 1
        self._release()

    def _hold(self) -> None:
        if self._held is None:
            self._held = ExitStack()
            self._held.enter_context(numba_cuda.defer_cleanup())
            if gc.isenabled():
                gc.disable()
                self._held.callback(gc.enable)

    def _release(self) -> None:
        if self._held is not None:
            held, self._held = self._held, None
            held.close()

    def expired(self) -> bool:
        """Whether the watchdog, not the host, ended the gate (so far)."""
        return int(self._latch[1]) == kernels.GATE_EXPIRED

    def check(self) -> None:
        """After the gated work finished: raise unless the gate was opened by the host."""
        outcome = int(self._latch[1])
        if outcome == kernels.GATE_EXPIRED:
            raise MeasurementFailed(
                f"gate watchdog expired after {self.timeout_s:g} s: the host did not finish enqueuing in time"
            )
        if outcome != kernels.GATE_RELEASED:
            raise MeasurementFailed(f"gate kernel did not run (outcome {outcome})")


class _Events:
    """A start event per GPU and an end event per stream, destroyed on exit. ``devices``: each stream's GPU (None:
    the current one); an event belongs to the GPU its stream runs on."""

    def __init__(self, devices: Sequence[int | None]) -> None:
        self.devices = list(devices)
        self.starts: dict[int | None, int] = {}
        self.ends: list[int] = []
        for device in self.devices:
            with on_device(device):
                if device not in self.starts:
                    self.starts[device] = runtime.eventCreate()
                self.ends.append(runtime.eventCreate())

    def start_of(self, index: int) -> int:
        return self.starts[self.devices[index]]

    def __enter__(self) -> _Events:
        return self

    def __exit__(self, *exc) -> None:
        for device, start in self.starts.items():
            with on_device(device):
                runtime.eventDestroy(start)
        for device, end in zip(self.devices, self.ends):
            with on_device(device):
                runtime.eventDestroy(end)


@dataclass(frozen=True)
class GpuTiming:
    """GPU samples of one measurement (ms per operation), with each stream's own and the host's times."""

    samples: Samples  # one per batch: start event to the last stream's end event, / ops
    stream_ms: list[list[float]]  # per stream, one per batch: start event to that stream's end event, / ops
    enqueue_ms: list[float]  # host time of each batch's enqueue(ops) call, / ops: what enqueuing costs the CPU
    wall_ms: list[float]  # host time from the start of enqueue(ops) until the batch finished, / ops

    @property
    def median_ms(self) -> float:
        return self.samples.median

    @property
    def fastest_ms(self) -> float:
        return min(self.samples.values)

    def stream_median_ms(self, index: int) -> float:
        return statistics.median(self.stream_ms[index])

    def stream_fastest_ms(self, index: int) -> float:
        return min(self.stream_ms[index])

    @property
    def enqueue_median_ms(self) -> float:
        return statistics.median(self.enqueue_ms)


class Timer:
    """Times ``enqueue(ops)`` with CUDA events until the :class:`StopRule` is met.

    One *batch* is: [gate] → start event → ``enqueue(ops)`` → one end event per stream → [open the gate]. Each batch
    gives one sample: its GPU time divided by ``ops``. With the gate (nvbandwidth's technique), the whole batch waits
    behind a one-thread kernel until the host has finished enqueuing it, so the GPU time does not depend on how fast
    Python enqueues. Work that waits on the host itself (a pageable copy, cudaFree) must be timed without it
    (``gated=False``): behind a closed gate it would never return.
    """

    def __init__(self, rule: StopRule | None = None) -> None:
        self.rule = rule or StopRule()
        self._gates: dict[int | None, Gate] = {}

    def gate_on(self, device: int | None) -> Gate:
        """The gate for streams of ``device`` (None: the current GPU), made there on first use."""
        if device not in self._gates:
            with on_device(device):
                self._gates[device] = Gate(self.rule.gate_timeout_s)
        return self._gates[device]

    def measure(self, enqueue: Callable[[int], None], streams: Sequence, *, metric: str, gated: bool = True,
                ops_per_batch: int | None = None, devices: Sequence[int] | None = None) -> GpuTiming:
        """Warm up, size the batch, then sample until the stop rule says so.

        ``streams`` are CuPy streams (or anything with ``ptr``); the first one carries the gate and the start
        event, the others wait on the start event. ``ops_per_batch`` fixes the batch size (work that is long, or
        must run exactly once per sample); by default two single-operation batches size it. Raises
        :class:`MeasurementFailed` if a gate's watchdog expired.

        ``devices`` (each stream's GPU) spreads the work over several GPUs: each GPU's first stream carries that
        GPU's gate and start event, all gates open together, and a stream's time runs from its own GPU's start
        event (events of two GPUs cannot be compared): a sample is the slowest stream's time.
        ``enqueue`` makes each GPU current for its own work (:func:`bench.cuda.on_device`).
        """
        if not streams:
            raise ValueError("need at least one stream")
        rule = self.rule
        with _Events(devices or [None] * len(streams)) as events:
            self._batch(events, enqueue, streams, 1, gated)  # first touch, compilation, lazy loading
            if ops_per_batch is None:
                ops = rule.ops_per_batch(max(self._batch(events, enqueue, streams, 1, gated)[0]))
            else:
                ops = ops_per_batch
            for _ in range(rule.warmup_batches):
                self._batch(events, enqueue, streams, ops, gated)
            return self._sampled(lambda: self._batch(events, enqueue, streams, ops, gated), len(streams), ops,
                                 metric, gated)

    def each(self, prepare: Callable[[], None], enqueue: Callable[[int], None], streams: Sequence, *, metric: str,
             gated: bool = True) -> GpuTiming:
        """Like :meth:`measure`, for work that must start from a fresh state every time (managed pages back on the
        host, a cold cache): ``prepare()`` runs untimed before every sample, and every sample is one operation."""
        with _Events([None] * len(streams)) as events:
            def batch() -> tuple[list[float], float, float]:
                prepare()
                return self._batch(events, enqueue, streams, 1, gated)

            for _ in range(self.rule.warmup_batches):
                batch()
            return self._sampled(batch, len(streams), 1, metric, gated)

    def _sampled(self, batch: Callable[[], tuple[list[float], float, float]], streams: int, ops: int, metric: str,
                 gated: bool) -> GpuTiming:
        """``batch()`` (one batch of ``ops`` operations: see :meth:`_batch`) until the stop rule is met; its times
        per operation."""
        per_stream: list[list[float]] = [[] for _ in range(streams)]
        enqueue_ms: list[float] = []
        wall_ms: list[float] = []

        def sample() -> float:
            stream_ms, host_ms, batch_wall_ms = batch()
            enqueue_ms.append(host_ms / ops)
            wall_ms.append(batch_wall_ms / ops)
            for column, ms in zip(per_stream, stream_ms):
                column.append(ms / ops)
            return max(stream_ms) / ops

        values, reason = _sample_until(self.rule, sample)
        return GpuTiming(Samples(values, "ms", "gpu", metric, reason, ops, gated), per_stream, enqueue_ms, wall_ms)

    def run_once(self, enqueue: Callable[[int], None], streams: Sequence, *, gated: bool = True) -> list[float]:
        """One batch of one operation, outside the stop rule: a verification run, or one that records its own
        :class:`Timeline`. Returns each stream's GPU time (ms)."""
        with _Events([None] * len(streams)) as events:
            return self._batch(events, enqueue, streams, 1, gated)[0]

    def _batch(self, events: _Events, enqueue, streams, ops: int, gated: bool) -> tuple[list[float], float, float]:
        """Run one batch; return each stream's GPU time from the start event to its end event (ms), the host time
        the enqueue call took (ms) and the host time until the batch finished (ms)."""
        firsts = {}  # each GPU's first stream
        for index, device in enumerate(events.devices):
            firsts.setdefault(device, index)
        closed = []
        try:
            for device, index in firsts.items():
                with on_device(device):
                    if gated:
                        self.gate_on(device).close(streams[index])
                        closed.append(device)
                    runtime.eventRecord(events.starts[device], streams[index].ptr)
            for index, stream in enumerate(streams):
                if firsts[events.devices[index]] != index:
                    with on_device(events.devices[index]):
                        runtime.streamWaitEvent(stream.ptr, events.start_of(index), 0)
            started = time.perf_counter()
            enqueue(ops)
            host_ms = (time.perf_counter() - started) * 1e3
            # End events go in before the gate opens: recorded later, they would time the host, not the GPU.
            for stream, end, device in zip(streams, events.ends, events.devices):
                with on_device(device):
                    runtime.eventRecord(end, stream.ptr)
        finally:
            for device in reversed(closed):  # the first gate's hold (the garbage collector off) outlasts every latch
                self.gate_on(device).open()
        for end in events.ends:
            runtime.eventSynchronize(end)
        wall_ms = (time.perf_counter() - started) * 1e3
        for device in closed:
            self.gate_on(device).check()
        return [runtime.eventElapsedTime(events.start_of(index), end) for index, end in enumerate(events.ends)], \
            host_ms, wall_ms


class Timeline:
    """Events before and after every operation of one run, read back relative to a reference event.

    Inside the work's ``enqueue``: call :meth:`start` on the first stream before anything else, then wrap each
    operation in ``with timeline.op(stream, labels): ...``. After the run has finished, :meth:`read` gives one dict
    per operation: its labels, ``start_ms`` and ``end_ms``. Events are pooled and reused.
    """

    def __init__(self) -> None:
        self._pool: list[int] = []
        self._used = 0
        self._reference = 0
        self._ops: list[tuple[dict, int, int]] = []

    def _event(self) -> int:
        if self._used == len(self._pool):
            self._pool.append(runtime.eventCreate())
        self._used += 1
        return self._pool[self._used - 1]

    def start(self, stream) -> None:
        self._used, self._ops = 0, []
        self._reference = self._event()
        runtime.eventRecord(self._reference, stream.ptr)

    @contextmanager
    def op(self, stream, labels: dict):
        before, after = self._event(), self._event()
        runtime.eventRecord(before, stream.ptr)
        yield
        runtime.eventRecord(after, stream.ptr)
        self._ops.append((labels, before, after))

    def read(self) -> list[dict]:
        return [
            {**labels, "start_ms": runtime.eventElapsedTime(self._reference, before),
             "end_ms": runtime.eventElapsedTime(self._reference, after)}
            for labels, before, after in self._ops
        ]

    def close(self) -> None:
        for event in self._pool:
            runtime.eventDestroy(event)
        self._pool, self._used = [], 0


def concurrency(intervals: Sequence[tuple[float, float]]) -> float:
    """Share of the makespan (0 to the last end) during which two or more intervals overlap."""
    if not intervals:
        return float("nan")
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    makespan = max(end for _, end in intervals)
    active, previous, overlapped = 0, 0.0, 0.0
    for moment, change in edges:
        if active >= 2:
            overlapped += moment - previous
        active += change
        previous = moment
    return overlapped / makespan if makespan > 0 else float("nan")


def peak_concurrency(intervals: Sequence[tuple[float, float]]) -> int:
    """The most intervals running at one moment (an interval that ends as another starts does not count twice)."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    active = peak = 0
    for _, change in edges:
        active += change
        peak = max(peak, active)
    return peak


# --- host calls while the GPU is busy -----------------------------------------------------------------------------

@dataclass(frozen=True)
class CallDuringSpin:
    """One call timed on the host while a spin kernel ran."""

    host_ms: float  # how long the call held the host
    spin_left_ms: float  # how much of the spin was left when the call was made
    spin_running: bool  # whether the spin was still running when the call returned


@dataclass(frozen=True)
class SpinPair:
    """Two spins of ``spin_ms`` on two streams, the second launched after a call; intervals on the GPU's clock."""

    first: tuple[float, float]  # (start, end) ms after the first spin's start
    second: tuple[float, float]
    host_ms: float  # how long the call held the host
    host_waited: bool  # the first spin had ended when the call returned

    @property
    def overlap_ms(self) -> float:
        return max(0.0, min(self.first[1], self.second[1]) - max(self.first[0], self.second[0]))

    @property
    def makespan_ms(self) -> float:
        return max(self.first[1], self.second[1]) - min(self.first[0], self.second[0])


class SpinWatch:
    """Spin kernels of known duration whose start and end the host can watch (host-mapped global-timer stamps),
    and calls timed on the host while they run."""

    def __init__(self, slots: int = 2) -> None:
        import numpy as np

        self._uint64 = np.uint64
        self.stamps = numba_cuda.mapped_array(2 * slots, dtype=np.uint64)
        self.stamps[:] = 0

    def launch(self, stream, slot: int, ms: float) -> None:
        """Start a one-thread kernel that busy-waits ``ms`` on ``stream`` (anything with a CUDA handle in ``ptr``)."""
        self.stamps[2 * slot: 2 * slot + 2] = 0
        kernels.launch_single_thread(kernels.spin_kernel, stream, self._uint64(int(ms * 1e6)), self.stamps, slot)

    def wait_started(self, slot: int, timeout_s: float = 5.0) -> float:
        """Block until the spin in ``slot`` runs; return the host time (``time.perf_counter``) it was seen."""
        deadline = time.perf_counter() + timeout_s
        while self.stamps[2 * slot] == 0:
            if time.perf_counter() > deadline:
                raise MeasurementFailed(f"spin kernel did not start within {timeout_s:g} s")
        return time.perf_counter()

    def running(self, slot: int) -> bool:
        return bool(self.stamps[2 * slot] != 0 and self.stamps[2 * slot + 1] == 0)

    def interval_ms(self, slot: int, origin_ns: int) -> tuple[float, float]:
        """Start and end of the finished spin in ``slot``, in ms after ``origin_ns`` (a global-timer stamp)."""
        start, end = (int(self.stamps[2 * slot + offset]) for offset in (0, 1))
        return (start - origin_ns) / 1e6, (end - origin_ns) / 1e6

    def depth_first(self, streams: Sequence, per_stream: int, spin_ms: float) -> list[tuple[float, float]]:
        """``per_stream`` spins on each stream in turn (all of the first stream's, then the second's, ...), then
        wait for them; each spin's (start, end) in ms after the earliest start. Needs ``len(streams) * per_stream``
        slots."""
        slots = [(stream, slot) for slot, stream in enumerate(s for s in streams for _ in range(per_stream))]
        for stream, slot in slots:
            self.launch(stream, slot, spin_ms)
        runtime.deviceSynchronize()
        origin = min(int(self.stamps[2 * slot]) for _, slot in slots)
        return [self.interval_ms(slot, origin) for _, slot in slots]

    def call_during_spin(self, stream, spin_ms: float, call: Callable[[], object],
                         arm: Callable[[], None] = lambda: None, *, spin_device: int | None = None,
                         call_device: int | None = None) -> CallDuringSpin:
        """Launch a spin of ``spin_ms`` on ``stream``; once it runs, ``arm()`` (untimed), then time ``call()`` on the
        host and see whether the spin still runs. Waits for the device(s) before returning. ``spin_device`` and
        ``call_device``: the GPU the spin runs on and the one current for the call (None: the current GPU); this
        watch must belong to the spin's GPU."""
        with on_device(spin_device):
            self.launch(stream, 0, spin_ms)
            seen = self.wait_started(0)
        with on_device(call_device):
            arm()
            started = time.perf_counter()
            call()
            returned = time.perf_counter()
        running = self.running(0)
        for device in dict.fromkeys((spin_device, call_device)):
            with on_device(device):
                runtime.deviceSynchronize()
        return CallDuringSpin((returned - started) * 1e3, spin_ms - (started - seen) * 1e3, running)

    def call_between_spins(self, first, second, spin_ms: float, call: Callable[[], object],
                           arm: Callable[[], None] = lambda: None) -> SpinPair:
        """A spin on ``first``; once it runs, ``arm()``, the timed ``call()``, then a spin on ``second``. Both spins'
        intervals come from the GPU's global timer."""
        self.launch(first, 0, spin_ms)
        self.wait_started(0)
        arm()
        started = time.perf_counter()
        call()
        host_ms = (time.perf_counter() - started) * 1e3
        waited = not self.running(0)
        self.launch(second, 1, spin_ms)
        runtime.deviceSynchronize()
        origin = int(self.stamps[0])
        return SpinPair(self.interval_ms(0, origin), self.interval_ms(1, origin), host_ms, waited)


# --- the host waiting for the GPU -------------------------------------------------------------------------------

class Event:
    """A CUDA event that is part of what an experiment measures (a round trip, a wait), not a timer: no timing
    data; ``blocking_sync`` makes the host sleep in :meth:`synchronize` instead of polling."""

    def __init__(self, blocking_sync: bool = False) -> None:
        flags = runtime.eventDisableTiming | (runtime.eventBlockingSync if blocking_sync else 0)
        self.handle = runtime.eventCreateWithFlags(flags)

    def record(self, stream) -> None:
        runtime.eventRecord(self.handle, stream.ptr)

    def synchronize(self) -> None:
        runtime.eventSynchronize(self.handle)

    def __enter__(self) -> Event:
        return self

    def __exit__(self, *exc) -> None:
        runtime.eventDestroy(self.handle)


@dataclass(frozen=True)
class HostWait:
    """One wait of the host for a kernel's end."""

    wake_us: float  # from the kernel's last global-timer stamp to the wait's return, on the host's clock
    cpu_ms: float  # process CPU time (every thread) spent during the wait
    wall_ms: float  # host time the wait took


class ClockPair:
    """The offset between the host's clock (``time.perf_counter_ns``) and the GPU's global timer, so a GPU stamp
    can be placed on the host's time line.

    A one-thread kernel writes the global timer to host-mapped memory over and over while the host reads it; each
    read gives ``host_after - stamp``, which is the offset plus the write's trip to host memory plus the read. The
    smallest of many reads is kept: the offset is over-estimated by at most the GPU-to-host write latency (under a
    microsecond on PCIe), so times measured from GPU stamps come out short by at most that much.
    """

    def __init__(self, stream, reads: int = 20000) -> None:
        import numpy as np

        stamps = numba_cuda.mapped_array(1, dtype=np.uint64)
        stamps[0] = 0
        kernels.launch_single_thread(kernels.clock_publisher_kernel, stream, stamps, np.uint64(50_000_000))
        deadline = time.perf_counter() + 5.0
        while stamps[0] == 0:
            if time.perf_counter() > deadline:
                raise MeasurementFailed("the clock kernel did not start within 5 s")
        best = None
        for _ in range(reads):
            stamp = int(stamps[0])
            gap = time.perf_counter_ns() - stamp
            best = gap if best is None or gap < best else best
        runtime.streamSynchronize(stream.ptr)
        self.offset_ns = best

    def host_ns(self, gpu_ns: int) -> int:
        return gpu_ns + self.offset_ns


def host_wait(watch: SpinWatch, stream, spin_ms: float, clock: ClockPair, wait: Callable[[], None],
              after_launch: Callable[[], None] = lambda: None) -> HostWait:
    """Launch a spin of ``spin_ms`` on ``stream``, ``after_launch()`` (record an event), then time ``wait()``: how
    long after the kernel's end the host got back (on the GPU's clock mapped to the host's) and the CPU it burnt."""
    watch.launch(stream, 0, spin_ms)
    after_launch()
    cpu_started, started = time.process_time_ns(), time.perf_counter_ns()
    wait()
    returned, cpu_returned = time.perf_counter_ns(), time.process_time_ns()
    runtime.deviceSynchronize()
    ended = int(watch.stamps[1])
    return HostWait((returned - clock.host_ns(ended)) / 1e3, (cpu_returned - cpu_started) / 1e6,
                    (returned - started) / 1e6)


def wait_samples(once: Callable[[], HostWait], rule: StopRule, *, warmup: int = 2) -> tuple[Samples, list[HostWait]]:
    """``once()`` until the stop rule is met on the wake-up times; the wake-ups as samples (µs) and every wait."""
    for _ in range(warmup):
        once()
    waits: list[HostWait] = []

    def sample() -> float:
        waits.append(once())
        return waits[-1].wake_us

    values, reason = _sample_until(rule, sample)
    return Samples(values, "us", "host", "host return after the kernel's end", reason), waits


# --- what the harness hands an experiment ---------------------------------------------------------------------

class Context:
    """The timing an experiment gets from the harness: a :class:`Timer` per purpose (``"default"``, or a purpose
    the experiment declared, such as overlap's ``"stage"``), with the stop rules the harness chose for this sweep."""

    def __init__(self, rules: Mapping[str, StopRule] | None = None) -> None:
        self.planned = dict(rules or {"default": StopRule()})
        self.planned.setdefault("default", StopRule())
        self.rules = dict(self.planned)
        self.scale = 1.0
        self._timers: dict[str, Timer] = {}

    def rescale(self, scale: float) -> None:
        """Measure from now on under the planned rules scaled by ``scale`` (:meth:`StopRule.scaled`), timers
        already handed out included: the sweep keeps an experiment to its budget on a slower GPU."""
        self.scale = min(1.0, scale)
        self.rules = {purpose: rule.scaled(self.scale) for purpose, rule in self.planned.items()}
        for purpose, timer in self._timers.items():
            timer.rule = self.rule(purpose)

    def rule(self, purpose: str = "default") -> StopRule:
        return self.rules.get(purpose, self.rules["default"])

    def timer(self, purpose: str = "default") -> Timer:
        if purpose not in self._timers:
            self._timers[purpose] = Timer(self.rule(purpose))
        return self._timers[purpose]

    def host(self, call: Callable[[], None], *, metric: str, purpose: str = "default", **options) -> Samples:
        """:func:`host_samples` under this context's rule for ``purpose``."""
        return host_samples(call, self.rule(purpose), metric=metric, **options)

    def host_steps(self, steps: Sequence[tuple[str, Callable[[], None]]], *, purpose: str = "default",
                   **options) -> tuple[dict[str, list[float]], str]:
        return host_steps(steps, self.rule(purpose), **options)


# --- the clock pytest-benchmark reads --------------------------------------------------------------------------

class GpuClock:
    """A clock that reads GPU time on one stream: the timer pytest-benchmark calls around the code it measures.

    pytest-benchmark's one timing seam is its ``timer`` option, a callable returning seconds; it takes
    ``end - start`` around each round. Each call of this clock records an event on :attr:`stream`, waits for it,
    and returns the running total of GPU time between consecutive calls, so ``end - start`` is the GPU time of the
    work enqueued on the stream between them, as CUDA events measure it. With ``gated`` (the default), every call
    also closes a :class:`Gate` and records its start event behind it, and the next call opens the gate only after
    recording its end event: the work between two calls waits until the host has enqueued all of it, so how fast
    Python enqueues is not in the time (as in :meth:`Timer.measure`). Pageable copies need ``gated=False``.

    Use it in pedantic mode and call :meth:`release` when done, which opens a gate left closed by the last call::

        clock = GpuClock()

        @pytest.mark.benchmark(timer=clock)
        def test_copy(benchmark):
            ...  # enqueue work on clock.stream in copy()
            try:
                benchmark.pedantic(copy, rounds=20, warmup_rounds=2, iterations=8)
            finally:
                clock.release()
    """

    def __init__(self, *, gated: bool = True, gate_timeout_s: float = 5.0) -> None:
        self.gated, self._gate_timeout_s = gated, gate_timeout_s
        self._stream = self._gate = None
        self._events: tuple[int, int] | None = None
        self._running = False
        self._seconds = 0.0

    def __repr__(self) -> str:
        return f"GpuClock(gated={self.gated})"

    @property
    def stream(self):
        """The CuPy stream whose GPU time this clock reads (created on first use)."""
        if self._stream is None:
            from bench.cuda import cupy

            self._stream = cupy.cuda.Stream(non_blocking=True)
            self._events = (runtime.eventCreate(), runtime.eventCreate())
            self._gate = Gate(self._gate_timeout_s) if self.gated else None
        return self._stream

    def __call__(self) -> float:
        stream = self.stream
        start, end = self._events
        runtime.eventRecord(end, stream.ptr)
        if self._running and self._gate is not None:
            self._gate.open()
        runtime.eventSynchronize(end)
        if self._running:
            if self._gate is not None:
                self._gate.check()
            self._seconds += runtime.eventElapsedTime(start, end) / 1e3
        if self._gate is not None:
            self._gate.close(stream)
        runtime.eventRecord(start, stream.ptr)
        self._running = True
        return self._seconds

    def release(self) -> None:
        """Open the gate the last call closed and wait for the stream; the next call starts afresh."""
        if self._running:
            if self._gate is not None:
                self._gate.open()
            self._stream.synchronize()
            self._running = False
