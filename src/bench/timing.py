"""All GPU timing: CUDA events on the streams that do the work, a gate, warm-up and adaptive stopping.

Work is handed over as ``enqueue(ops)``, a callable that enqueues ``ops`` repetitions of the operation on its
streams. One *batch* is: [gate] → start event → ``enqueue(ops)`` → one end event per stream → [open the gate].
Each batch gives one sample: its GPU time divided by ``ops``. With the gate (nvbandwidth's technique), the whole
batch waits behind a one-thread kernel until the host has finished enqueuing it, so the GPU time does not depend on
how fast Python enqueues. Pageable copies must be timed without it (``gated=False``): ``cudaMemcpyAsync`` from
pageable memory waits on the host for earlier work in its stream, so behind a closed gate it would never return.

Example (needs a GPU)::

    import cupy
    from cupy.cuda import runtime
    from bench.timing import StopRule, Timer

    src, dst = cupy.ones(1 << 24, cupy.uint8), cupy.empty(1 << 24, cupy.uint8)
    stream = cupy.cuda.Stream(non_blocking=True)

    def enqueue(ops):
        for _ in range(ops):
            runtime.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes, runtime.memcpyDeviceToDevice, stream.ptr)

    timing = Timer(StopRule()).measure(enqueue, [stream])
    print(f"{timing.summary.median_ms:.4f} ms per copy ({timing.stop_reason})")
"""

from __future__ import annotations

import gc
import math
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from cupy.cuda import runtime

# The robust standard error of a median: 1.2533 σ/√n (large-sample, normal data), with σ estimated as 1.4826·MAD.
_MEDIAN_SE_FACTOR = 1.2533 * 1.4826


class MeasurementFailed(RuntimeError):
    """A measurement that produced no trustworthy number; its message says why."""


@dataclass(frozen=True)
class Summary:
    """Statistics of a list of samples, in milliseconds."""

    n: int
    median_ms: float
    min_ms: float
    max_ms: float
    stdrel: float  # sample standard deviation / mean (nvbench's "noise")
    median_relerr: float  # robust standard error of the median / median: how well the median is pinned down

    @classmethod
    def of(cls, samples_ms: Sequence[float]) -> Summary:
        if not samples_ms:
            raise ValueError("no samples")
        n = len(samples_ms)
        median = statistics.median(samples_ms)
        mean = statistics.fmean(samples_ms)
        stdrel = statistics.stdev(samples_ms) / mean if n > 1 and mean > 0 else math.inf
        if n > 1 and median > 0:
            mad = statistics.median(abs(x - median) for x in samples_ms)
            median_relerr = _MEDIAN_SE_FACTOR * mad / math.sqrt(n) / median
        else:
            median_relerr = math.inf
        return cls(n, median, min(samples_ms), max(samples_ms), stdrel, median_relerr)


@dataclass(frozen=True)
class StopRule:
    """When to stop sampling one configuration, and how to size its batches."""

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

    def stop_reason(self, samples_ms: Sequence[float], sampling_s: float) -> str | None:
        """``"converged"``, ``"time_cap"``, ``"max_samples"``, or None to keep sampling."""
        n = len(samples_ms)
        if n >= self.max_samples:
            return "max_samples"
        if n < self.min_samples:
            return None
        if Summary.of(samples_ms).median_relerr <= self.target_relerr:
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
class Timing:
    """Raw GPU samples of one configuration. Every value is milliseconds per operation."""

    samples_ms: list[float]  # one per batch: start event to the last stream's end event, / ops
    stream_samples_ms: list[list[float]]  # per stream, one per batch: start event to that stream's end event, / ops
    ops_per_sample: int
    gated: bool
    stop_reason: str
    enqueue_ms: list[float]  # host time of each batch's enqueue(ops) call, / ops: what enqueuing costs the CPU

    @property
    def summary(self) -> Summary:
        return Summary.of(self.samples_ms)

    def stream_median_ms(self, index: int) -> float:
        return statistics.median(self.stream_samples_ms[index])

    def columns(self) -> dict:
        """The standard timing columns of a result row."""
        summary = self.summary
        return {
            "samples_ms": list(self.samples_ms),
            "n_samples": summary.n,
            "ops_per_sample": self.ops_per_sample,
            "gated": self.gated,
            "median_ms": summary.median_ms,
            "min_ms": summary.min_ms,
            "max_ms": summary.max_ms,
            "stdrel": summary.stdrel,
            "median_relerr": summary.median_relerr,
            "stop_reason": self.stop_reason,
            "host_enqueue_ms": statistics.median(self.enqueue_ms),
        }


def untimed_columns(gated: bool) -> dict:
    """The timing columns of a row that was not timed (its measurement failed or its data did not verify)."""
    nan = math.nan
    return {
        "samples_ms": [], "n_samples": 0, "ops_per_sample": 0, "gated": gated, "median_ms": nan,
        "min_ms": nan, "max_ms": nan, "stdrel": nan, "median_relerr": nan, "stop_reason": "",
        "host_enqueue_ms": nan,
    }


class Gate:
    """A one-thread kernel that holds a stream until the host opens it, with a watchdog.

    The latch lives in host-mapped pinned memory: ``latch[0]`` is the host's release flag, ``latch[1]`` the
    kernel's outcome. If the host does not open the gate within ``timeout_s`` the kernel gives up, and
    :meth:`check` raises: the batch it held was not measured behind a closed gate.
    """

    def __init__(self, timeout_s: float) -> None:
        import numpy as np
        from numba import cuda
        from numba.cuda.core.errors import NumbaPerformanceWarning

        from bench.kernels import GATE_PENDING, gate_kernel

        self._cuda, self._kernel, self._pending = cuda, gate_kernel, GATE_PENDING
        self._quiet = NumbaPerformanceWarning
        self._latch = cuda.mapped_array(2, dtype=np.int32)
        self._timeout_ns = np.uint64(int(timeout_s * 1e9))
        self.timeout_s = timeout_s
        self._held: ExitStack | None = None

    def close(self, stream) -> None:
        """Launch the gate on a CuPy stream; work enqueued behind it waits until :meth:`open`.

        Until then, Python's garbage collector and numba's deferred deallocations are held back: a finalizer that
        frees CUDA memory (cudaFree, cudaFreeHost) waits for the device, which waits behind the gate for the host.
        """
        self._latch[0] = 0
        self._latch[1] = self._pending
        with warnings.catch_warnings():  # one thread on purpose: numba's low-occupancy warning does not apply
            warnings.simplefilter("ignore", self._quiet)
            self._kernel[1, 1, self._cuda.external_stream(stream.ptr)](self._latch, self._timeout_ns)
        self._hold()

    def open(self) -> None:
        self._latch[0] = 1
        self._release()

    def _hold(self) -> None:
        if self._held is None:
            self._held = ExitStack()
            self._held.enter_context(self._cuda.defer_cleanup())
            if gc.isenabled():
                gc.disable()
                self._held.callback(gc.enable)

    def _release(self) -> None:
        if self._held is not None:
            held, self._held = self._held, None
            held.close()

    def check(self) -> None:
        """After the gated work finished: raise unless the gate was opened by the host."""
        from bench.kernels import GATE_EXPIRED, GATE_RELEASED

        outcome = int(self._latch[1])
        if outcome == GATE_EXPIRED:
            raise MeasurementFailed(
                f"gate watchdog expired after {self.timeout_s:g} s: the host did not finish enqueuing in time"
            )
        if outcome != GATE_RELEASED:
            raise MeasurementFailed(f"gate kernel did not run (outcome {outcome})")


class _Events:
    """A start event and one end event per stream, destroyed on exit."""

    def __init__(self, streams: int) -> None:
        self.start = runtime.eventCreate()
        self.ends = [runtime.eventCreate() for _ in range(streams)]

    def __enter__(self) -> _Events:
        return self

    def __exit__(self, *exc) -> None:
        for event in [self.start, *self.ends]:
            runtime.eventDestroy(event)


class Timer:
    """Times ``enqueue(ops)`` with CUDA events until the :class:`StopRule` is met."""

    def __init__(self, rule: StopRule | None = None) -> None:
        self.rule = rule or StopRule()
        self._gate: Gate | None = None

    @property
    def gate(self) -> Gate:
        if self._gate is None:
            self._gate = Gate(self.rule.gate_timeout_s)
        return self._gate

    def measure(
        self,
        enqueue: Callable[[int], None],
        streams: Sequence,
        *,
        gated: bool = True,
        ops_per_batch: int | None = None,
    ) -> Timing:
        """Warm up, size the batch, then sample until the stop rule says so.

        ``streams`` are CuPy streams; the first one carries the gate and the start event, the others wait on the
        start event. ``ops_per_batch`` fixes the batch size (work that is long, or must run exactly once per
        sample); by default two single-operation batches size it. Raises :class:`MeasurementFailed` if a gate's
        watchdog expired.
        """
        if not streams:
            raise ValueError("need at least one stream")
        rule = self.rule
        with _Events(len(streams)) as events:
            self._batch(events, enqueue, streams, 1, gated)  # first touch, compilation, lazy loading
            if ops_per_batch is None:
                ops = rule.ops_per_batch(max(self._batch(events, enqueue, streams, 1, gated)[0]))
            else:
                ops = ops_per_batch
            for _ in range(rule.warmup_batches):
                self._batch(events, enqueue, streams, ops, gated)
            samples: list[float] = []
            enqueue_ms: list[float] = []
            per_stream: list[list[float]] = [[] for _ in streams]
            started = time.perf_counter()
            while True:
                batch_ms, host_ms = self._batch(events, enqueue, streams, ops, gated)
                samples.append(max(batch_ms) / ops)
                enqueue_ms.append(host_ms / ops)
                for column, ms in zip(per_stream, batch_ms):
                    column.append(ms / ops)
                reason = rule.stop_reason(samples, time.perf_counter() - started)
                if reason:
                    return Timing(samples, per_stream, ops, gated, reason, enqueue_ms)

    def run_once(self, enqueue: Callable[[int], None], streams: Sequence, *, gated: bool = True) -> list[float]:
        """One batch of one operation, unmeasured by the stop rule: for a verification run, or one that records
        its own :class:`Timeline`. Returns each stream's GPU time (ms)."""
        with _Events(len(streams)) as events:
            return self._batch(events, enqueue, streams, 1, gated)[0]

    def _batch(self, events: _Events, enqueue, streams, ops: int, gated: bool) -> tuple[list[float], float]:
        """Run one batch; return each stream's GPU time from the start event to its end event (ms), and the host
        time the enqueue call took (ms)."""
        first = streams[0]
        if gated:
            self.gate.close(first)
        try:
            runtime.eventRecord(events.start, first.ptr)
            for stream in streams[1:]:
                runtime.streamWaitEvent(stream.ptr, events.start, 0)
            enqueue_started = time.perf_counter()
            enqueue(ops)
            host_ms = (time.perf_counter() - enqueue_started) * 1e3
            # End events go in before the gate opens: recorded later, they would time the host, not the GPU.
            for stream, end in zip(streams, events.ends):
                runtime.eventRecord(end, stream.ptr)
        finally:
            if gated:
                self.gate.open()
        for end in events.ends:
            runtime.eventSynchronize(end)
        if gated:
            self.gate.check()
        return [runtime.eventElapsedTime(events.start, end) for end in events.ends], host_ms


class Timeline:
    """Events before and after every operation of one run, read back relative to a reference event.

    Inside the work's ``enqueue``: call :meth:`start` on the first stream before anything else, then wrap each
    operation in ``with timeline.op(stream, stream_index, chunk, kind): ...``. After the run has finished,
    :meth:`read` gives one dict per operation with ``start_ms`` and ``end_ms``. Events are pooled and reused.
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
    def op(self, stream, stream_index: int, chunk: int, kind: str):
        before, after = self._event(), self._event()
        runtime.eventRecord(before, stream.ptr)
        yield
        runtime.eventRecord(after, stream.ptr)
        self._ops.append(({"stream": stream_index, "chunk": chunk, "op": kind}, before, after))

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


def host_samples_ms(
    call: Callable[[], None], *, repeats: int, warmup: int = 1, after: Callable[[], None] | None = None
) -> list[float]:
    """Host wall-clock time of each ``call()`` (ms), for work whose host cost is the point (launch overhead,
    blocking). ``after`` runs untimed after each call, e.g. to synchronize before the next."""
    samples = []
    for index in range(warmup + repeats):
        started = time.perf_counter()
        call()
        elapsed = (time.perf_counter() - started) * 1e3
        if after is not None:
            after()
        if index >= warmup:
            samples.append(elapsed)
    return samples


class Spinner:
    """Spin kernels of known duration whose start and end the host can watch (host-mapped global-timer stamps).

    ``launch(stream, slot, ms)`` starts a one-thread kernel that busy-waits ``ms`` on the GPU's global timer;
    :meth:`wait_started` returns once it is running, :meth:`running` says whether it still is, and
    :meth:`interval_ms` gives its start and end (ms, on the GPU's clock) after it finished.
    """

    def __init__(self, slots: int = 2) -> None:
        import numpy as np
        from numba import cuda

        from bench.kernels import numba_stream, spin_kernel

        self._kernel, self._numba_stream, self._uint64 = spin_kernel, numba_stream, np.uint64
        self.stamps = cuda.mapped_array(2 * slots, dtype=np.uint64)
        self.stamps[:] = 0

    def launch(self, stream, slot: int, ms: float) -> None:
        """Start a spin of ``ms`` on ``stream`` (anything with a CUDA handle in ``ptr``)."""
        import warnings

        from numba.cuda.core.errors import NumbaPerformanceWarning

        self.stamps[2 * slot: 2 * slot + 2] = 0
        with warnings.catch_warnings():  # one thread on purpose
            warnings.simplefilter("ignore", NumbaPerformanceWarning)
            self._kernel[1, 1, self._numba_stream(stream.ptr)](self._uint64(int(ms * 1e6)), self.stamps, slot)

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
            import cupy

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
