"""Host calls while the GPU is busy: spin kernels of known length the host can watch (:class:`SpinWatch`), calls
timed during or between spins, the offset between the host's and the GPU's clocks (:class:`ClockPair`), and the host
waiting for a kernel's end (:func:`host_wait`, :func:`wait_samples`).

It imports :mod:`bench.platform.cuda` (lazy stand-ins), :mod:`bench.timing.stats` and :mod:`bench.timing.host`.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.platform.cuda import on_device, runtime
from bench.timing import kernels
from bench.timing.host import sample_until
from bench.timing.stats import MeasurementFailed, Samples, StopRule
from bench.platform.vocabulary import Clock, Unit


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
        self._mapped = kernels.Mapped(2 * slots, "uint64")
        self.stamps = self._mapped.array

    def launch(self, stream, slot: int, ms: float) -> None:
        """Start a one-thread kernel that busy-waits ``ms`` on ``stream`` (anything with a CUDA handle in ``ptr``)."""
        self.stamps[2 * slot: 2 * slot + 2] = 0
        kernels.launch("bench_spin", 1, 1, stream.ptr, ctypes.c_uint64(int(ms * 1e6)),
                       ctypes.c_void_p(self._mapped.ptr), ctypes.c_int32(slot))

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
        mapped = kernels.Mapped(1, "uint64")
        stamps = mapped.array
        kernels.launch("bench_clock", 1, 1, stream.ptr, ctypes.c_void_p(mapped.ptr), ctypes.c_uint64(50_000_000))
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

    values, reason = sample_until(rule, sample)
    return Samples(values, Unit.US, Clock.HOST, "host return after the kernel's end", reason), waits
