"""The device-wide hold: blocks that take every thread slot of every SM, so no kernel of any stream, any library or
any thread of the process can start until the host releases them (or their watchdog does).

Sized from the device's properties: ``maxThreadsPerMultiProcessor`` slots per SM, in as few blocks as
``maxThreadsPerBlock`` allows (two of 1024 threads on an H100 or H200), that many blocks per SM. A block that cannot
be resident leaves the hold short of full: :meth:`Hold.wait_full` says so rather than measuring under half a hold.
Copies are not held: the copy engines run on (a copy that depends on no held kernel finishes).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from bench.cuda import cupy, kernels, numba_cuda, runtime
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
        import numpy as np

        self.device = runtime.getDevice()
        self.shape = HoldShape.of(runtime.getDeviceProperties(self.device))
        self.state = numba_cuda.mapped_array(kernels.HOLD_STARTED + self.shape.blocks, dtype=np.int32)
        self.state[:] = 0
        self.flag = numba_cuda.to_device(np.zeros(1, dtype=np.int32))
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.generation = 0
        self.launched_s = 0.0  # perf_counter of the newest launch

    def launch(self, timeout_s: float) -> None:
        """Start a hold that ends when :meth:`release` is called, or once :meth:`beat` has not been called for
        ``timeout_s`` (a hold nobody beats lasts ``timeout_s``)."""
        import numpy as np

        self.generation += 1
        self.launched_s = time.perf_counter()
        with numba_cuda.defer_cleanup():
            kernels.hold_kernel[self.shape.blocks, self.shape.threads, kernels.numba_stream(self.stream.ptr)](
                self.state, self.flag, np.int32(self.generation), np.uint64(int(timeout_s * 1e9)))

    def full(self) -> bool:
        """Whether every block of the newest hold runs (or ran)."""
        return bool((self.state[kernels.HOLD_STARTED:] == self.generation).all())

    def wait_full(self, timeout_s: float = FULL_WITHIN_S) -> None:
        """Return once every block of the newest hold runs; raise if they do not all start in ``timeout_s``."""
        deadline = time.perf_counter() + timeout_s
        while not self.full():
            if time.perf_counter() > deadline:
                started = int((self.state[kernels.HOLD_STARTED:] == self.generation).sum())
                self.release()
                raise MeasurementFailed(f"the hold could not fill the GPU: {started} of {self.shape.blocks} blocks "
                                        f"of {self.shape.threads} threads started within {timeout_s:g} s")

    def ended(self) -> bool:
        """Whether the newest hold let its blocks go (released or expired)."""
        return int(self.state[kernels.HOLD_ENDED]) == self.generation

    def expired(self) -> bool:
        """Whether the newest hold's watchdog, not the host, ended it."""
        return int(self.state[kernels.HOLD_EXPIRED]) == self.generation

    def holding(self) -> bool:
        """Whether the newest hold fills the GPU right now."""
        return self.full() and not self.ended()

    def release(self) -> None:
        self.state[kernels.HOLD_RELEASE] = self.generation

    def beat(self) -> None:
        """The host still watches: the hold's watchdog counts from the newest beat."""
        self.state[kernels.HOLD_BEAT] = (int(self.state[kernels.HOLD_BEAT]) + 1) & 0x3FFFFFFF

    def finish(self) -> None:
        """Release the newest hold and wait for its blocks to leave."""
        self.release()
        self.stream.synchronize()

    def call_during(self, hold_ms: float, call: Callable[[], object],
                    arm: Callable[[], None] = lambda: None) -> CallDuringSpin:
        """Hold the GPU for ``hold_ms`` (its watchdog ends it); once it is full, ``arm()`` (untimed), then time
        ``call()`` on the host and see whether the hold still ran when it returned. Waits for the device before
        returning."""
        self.launch(hold_ms / 1e3)
        try:
            self.wait_full()
            arm()
            started = time.perf_counter()
            call()
            returned = time.perf_counter()
            holding = not self.ended()
        finally:
            self.release()  # the hold has done its part (or the call raised): the GPU is free at once
        self.stream.synchronize()
        runtime.deviceSynchronize()
        return CallDuringSpin((returned - started) * 1e3, hold_ms - (started - self.launched_s) * 1e3, holding)


_HOLDS: dict[int, Hold] = {}


def device_hold() -> Hold:
    """This process's hold on the current GPU, made once (compiling its kernel, mapping its memory)."""
    device = runtime.getDevice()
    if device not in _HOLDS:
        _HOLDS[device] = Hold()
    return _HOLDS[device]
