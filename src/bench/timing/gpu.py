"""GPU intervals: the gate that holds a stream until the host has enqueued a batch, CUDA events around batches
(:class:`Timer`, :class:`GpuTiming`), an :class:`Event` that is part of what is measured, and :class:`Context`, the
timers and host sampling the harness hands an experiment.

It imports :mod:`bench.platform.cuda` (lazy stand-ins: CuPy and numba-cuda load on first use), :mod:`bench.timing.stats`
and :mod:`bench.timing.host`.
"""

from __future__ import annotations

import ctypes
import gc
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass

from bench.platform.cuda import on_device, runtime
from bench.timing import kernels
from bench.timing.host import host_samples, host_steps, sample_until
from bench.timing.stats import MeasurementFailed, Samples, StopRule
from bench.platform.vocabulary import Clock, Unit


class Gate:
    """A one-thread kernel that holds a stream until the host opens it, with a watchdog.

    The latch lives in host-mapped pinned memory: ``latch[0]`` is the host's release flag, ``latch[1]`` the
    kernel's outcome. If the host does not open the gate within ``timeout_s`` the kernel gives up, and
    :meth:`check` raises: the batch it held was not measured behind a closed gate.
    """

    def __init__(self, timeout_s: float) -> None:
        self._mapped = kernels.Mapped(2, "int32")
        self._latch = self._mapped.array
        self._timeout_ns = int(timeout_s * 1e9)
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
        kernels.launch("bench_gate", 1, 1, stream.ptr, ctypes.c_void_p(self._mapped.ptr),
                       ctypes.c_uint64(self._timeout_ns))
        self._hold()

    def open(self) -> None:
        self._latch[0] = 1
        self._release()

    def _hold(self) -> None:
        if self._held is None:
            self._held = ExitStack()
            if "numba.cuda" in sys.modules:  # numba frees its memory later, not while the gate holds
                self._held.enter_context(sys.modules["numba.cuda"].defer_cleanup())
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
        ``enqueue`` makes each GPU current for its own work (:func:`bench.platform.cuda.on_device`).
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

        values, reason = sample_until(self.rule, sample)
        return GpuTiming(Samples(values, Unit.MS, Clock.GPU, metric, reason, ops, gated), per_stream, enqueue_ms, wall_ms)

    def run_once(self, enqueue: Callable[[int], None], streams: Sequence, *, gated: bool = True) -> list[float]:
        """One batch of one operation, outside the stop rule: a verification run, or one that records its own
        :class:`bench.timing.Timeline`. Returns each stream's GPU time (ms)."""
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
