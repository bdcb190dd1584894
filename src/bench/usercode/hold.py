"""The device-wide hold: blocks that take every thread slot of every SM, so no kernel of any stream, any library or
any thread of the process can start until the host releases them (or their watchdog does).

Sized from the device's properties: ``maxThreadsPerMultiProcessor`` slots per SM, in as few blocks as
``maxThreadsPerBlock`` allows (two of 1024 threads on an H100 or H200), that many blocks per SM. A block that cannot
be resident leaves the hold short of full: :meth:`Hold.wait_full` says so rather than measuring under half a hold.
Copies are not held: the copy engines run on (a copy that depends on no held kernel finishes).
"""

from __future__ import annotations

import ctypes
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from bench.platform.cuda import on_device, runtime
from bench.timing import kernels
from bench.measure.memory import OwnedStream
from bench.timing import MeasurementFailed
from bench.timing.spin import CallDuringSpin

FULL_WITHIN_S = 2.0  # a hold whose blocks are not all running by then cannot fill this GPU


@dataclass(frozen=True)
class HoldShape:
    """How many blocks of how many threads fill every SM of a device."""

    blocks: int
    threads: int
    sms: int

    @classmethod
    def of(cls, properties: Mapping[str, int]) -> HoldShape:
        """The shape for a device given its properties (``cudaGetDeviceProperties`` as a mapping)."""
        slots, largest = properties["maxThreadsPerMultiProcessor"], properties["maxThreadsPerBlock"]
        per_sm = math.ceil(slots / largest)
        if slots % per_sm or (slots // per_sm) % 32:
            raise MeasurementFailed(f"cannot fill an SM of {slots} thread slots with blocks of at most {largest}")
        sms = properties["multiProcessorCount"]
        return cls(sms * per_sm, slots // per_sm, sms)


class Hold:
    """The hold on the current GPU, launched as often as needed on a non-blocking stream of its own.

    Each launch is a new *generation*: the state it shares with the host (host-mapped) is tagged with it, so nothing
    needs resetting between launches. Not thread-safe: one thread launches and releases (another may read)."""

    def __init__(self) -> None:
        self.device = runtime.getDevice()
        self.shape = HoldShape.of(runtime.getDeviceProperties(self.device))
        self.state = kernels.Mapped(kernels.HOLD_STARTED + self.shape.blocks, "int32")
        self.flag = runtime.malloc(4)  # device memory: what block 0 tells the others (kept as long as the process)
        runtime.memset(self.flag, 0, 4)
        self.stream = OwnedStream(blocking=False)
        self.generation = 0
        self.launched_s = 0.0  # perf_counter of the newest launch
        self.released = True  # the newest launch was released (or there was none)

    def launch(self, timeout_s: float) -> None:
        """Start a hold that ends when :meth:`release` is called, or once :meth:`beat` has not been called for
        ``timeout_s`` (a hold nobody beats lasts ``timeout_s``)."""
        self.generation += 1
        self.launched_s = time.perf_counter()
        self.released = False
        kernels.launch("bench_hold", self.shape.blocks, self.shape.threads, self.stream.ptr,
                       ctypes.c_void_p(self.state.ptr), ctypes.c_void_p(self.flag), ctypes.c_int32(self.generation),
                       ctypes.c_uint64(int(timeout_s * 1e9)))

    def full(self) -> bool:
        """Whether every block of the newest hold runs (or ran)."""
        return bool((self.state.array[kernels.HOLD_STARTED:] == self.generation).all())

    def wait_full(self, timeout_s: float = FULL_WITHIN_S) -> None:
        """Return once every block of the newest hold runs; raise if they do not all start in ``timeout_s``."""
        deadline = time.perf_counter() + timeout_s
        while not self.full():
            if time.perf_counter() > deadline:
                started = int((self.state.array[kernels.HOLD_STARTED:] == self.generation).sum())
                self.release()
                raise MeasurementFailed(f"the hold could not fill the GPU: {started} of {self.shape.blocks} blocks "
                                        f"of {self.shape.threads} threads started within {timeout_s:g} s")

    def ended(self) -> bool:
        """Whether the newest hold let its blocks go (released or expired)."""
        return int(self.state.array[kernels.HOLD_ENDED]) == self.generation

    def expired(self) -> bool:
        """Whether the newest hold's watchdog, not the host, ended it."""
        return int(self.state.array[kernels.HOLD_EXPIRED]) == self.generation

    def holding(self) -> bool:
        """Whether the newest hold fills the GPU right now."""
        return self.full() and not self.ended()

    def live(self) -> bool:
        """Whether the newest hold holds, or will once its blocks start: launched, neither released nor ended."""
        return not self.released and not self.ended()

    def release(self) -> None:
        self.released = True
        self.state.array[kernels.HOLD_RELEASE] = self.generation

    def beat(self) -> None:
        """The host still watches: the hold's watchdog counts from the newest beat."""
        self.state.array[kernels.HOLD_BEAT] = (int(self.state.array[kernels.HOLD_BEAT]) + 1) & 0x3FFFFFFF

    def finish(self) -> None:
        """Release the newest hold and wait for its blocks to leave."""
        self.release()
        runtime.streamSynchronize(self.stream.ptr)

    def call_during(self, hold_ms: float, call: Callable[[], object],
                    arm: Callable[[], None] = lambda: None) -> CallDuringSpin:
        """:meth:`Holds.call_during` on this GPU alone."""
        return Holds([self]).call_during(hold_ms, call, arm)


_HOLDS: dict[int, Hold] = {}


def device_hold() -> Hold:
    """This process's hold on the current GPU, made once (compiling its kernel, mapping its memory)."""
    device = runtime.getDevice()
    if device not in _HOLDS:
        _HOLDS[device] = Hold()
    return _HOLDS[device]


def holds_on(devices: Sequence[int]) -> Holds:
    """The holds on ``devices`` (each made once per process, see :func:`device_hold`)."""
    holds = []
    for device in dict.fromkeys(devices):
        with on_device(device):
            holds.append(device_hold())
    return Holds(holds)


def in_use() -> Holds:
    """The holds a region gets: on the current GPU and on every GPU the process has used (a region waits for any of
    them: a ``.item()`` of a product on GPU 1 while GPU 0 is current)."""
    return holds_on([runtime.getDevice(), *devices_in_use()])


def synchronize(devices: Sequence[int]) -> None:
    """Wait for everything queued on each of ``devices``."""
    for device in devices:
        with on_device(device):
            runtime.deviceSynchronize()


def devices_in_use() -> list[int]:
    """The GPUs this process has used: those whose primary context is active (the driver's
    ``cuDevicePrimaryCtxGetState``; CuPy, numba-cuda, PyTorch and JAX all work in primary contexts)."""
    import ctypes

    driver = ctypes.CDLL("libcuda.so.1")
    count = ctypes.c_int()
    if driver.cuDeviceGetCount(ctypes.byref(count)):
        return []
    used = []
    for ordinal in range(count.value):
        device, flags, active = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()
        if not driver.cuDeviceGet(ctypes.byref(device), ordinal) and not driver.cuDevicePrimaryCtxGetState(
                device, ctypes.byref(flags), ctypes.byref(active)) and active.value:
            used.append(ordinal)
    return used


class Holds:
    """The hold on each of several GPUs, launched, released and watched as one: a region that works on several
    GPUs waits for any of them. Each GPU's hold is launched with its GPU current."""

    def __init__(self, holds: Sequence[Hold]) -> None:
        self.holds = list(holds)

    @property
    def devices(self) -> list[int]:
        return [hold.device for hold in self.holds]

    @property
    def launched_s(self) -> float:
        return min(hold.launched_s for hold in self.holds)

    def describe(self) -> str:
        """'264 blocks × 1024 threads on 132 SMs' (of each GPU, with its ordinal where there are several)."""
        shapes = [f"{hold.shape.blocks} blocks × {hold.shape.threads} threads on {hold.shape.sms} SMs"
                  for hold in self.holds]
        if len(shapes) == 1:
            return shapes[0]
        return "; ".join(f"GPU {hold.device}: {shape}" for hold, shape in zip(self.holds, shapes))

    def launch(self, timeout_s: float) -> None:
        """Launch a hold on each GPU that has none holding (or about to)."""
        for hold in self.holds:
            if not hold.live():
                with on_device(hold.device):
                    hold.launch(timeout_s)

    def full(self) -> bool:
        return all(hold.full() for hold in self.holds)

    def ended(self) -> bool:
        """Whether any GPU's newest hold let its blocks go."""
        return any(hold.ended() for hold in self.holds)

    def expired(self) -> bool:
        return any(hold.expired() for hold in self.holds)

    def beat(self) -> None:
        for hold in self.holds:
            hold.beat()

    def release(self) -> None:
        for hold in self.holds:
            hold.release()

    def wait_full(self, timeout_s: float = FULL_WITHIN_S) -> None:
        for hold in self.holds:
            hold.wait_full(timeout_s)

    def finish(self) -> None:
        """Release every hold and wait for their blocks to leave."""
        self.release()
        for hold in self.holds:
            runtime.streamSynchronize(hold.stream.ptr)

    def call_during(self, hold_ms: float, call: Callable[[], object],
                    arm: Callable[[], None] = lambda: None) -> CallDuringSpin:
        """Hold the GPUs for ``hold_ms`` (the watchdogs end it); once full, ``arm()`` (untimed), then time ``call()``
        on the host and see whether every hold still ran when it returned. Waits for the devices before
        returning."""
        self.launch(hold_ms / 1e3)
        try:
            self.wait_full()
            arm()
            launched = self.launched_s  # the call may hold again (probe, after an allow_waits scope)
            started = time.perf_counter()
            call()
            returned = time.perf_counter()
            holding = not self.ended()
        finally:
            self.release()  # the hold has done its part (or the call raised): the GPU is free at once
        self.finish()
        synchronize(self.devices)
        return CallDuringSpin((returned - started) * 1e3, hold_ms - (started - launched) * 1e3, holding)
