"""Copies and their verification: buffers of random bytes that never hold the poison byte, ``cudaMemcpyAsync``
copies between them, and the check every copy experiment makes once before timing (poison the destination, copy
once, compare byte for byte), then the timing of verified copies.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np

from bench.platform.cuda import cupy, runtime
from bench.measure.memory import BufferSet, DeviceBuffer, host_buffer
from bench.timing import MeasurementFailed
from bench.platform.vocabulary import Status

POISON = 0xA5  # what a destination holds before a copy: no source byte ever does
FILL_CHUNK = 64 << 20  # fill_random draws this many bytes at a time (its temporaries: a few times this on the device)


def fill_random(device_bytes, seed: int) -> None:
    """Random bytes that are never POISON, so an unwritten destination byte can never pass for a copied one."""
    generator = cupy.random.RandomState(seed)
    for offset in range(0, device_bytes.size, FILL_CHUNK):
        count = min(FILL_CHUNK, device_bytes.size - offset)
        chunk = generator.randint(0, 255, size=count, dtype=cupy.int32).astype(cupy.uint8)  # 0..254
        chunk += chunk >= POISON  # 0..255 without POISON
        device_bytes[offset : offset + count] = chunk
    runtime.deviceSynchronize()


@functools.cache
def _pattern_kernel():
    # A hash of each byte's index, 0..254, then the values from POISON up moved one up: never POISON.
    return cupy.ElementwiseKernel(
        "uint32 seed", "uint8 out",
        "unsigned int h = (unsigned int)i * 2654435761u + seed; h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;"
        f"unsigned int b = (h >> 8) % 255u; out = (unsigned char)(b + (b >= {POISON}u));",
        "bench_hostmemory_pattern")


def fill_pattern(device_bytes, seed: int = 0) -> None:
    """Pseudo-random bytes that are never POISON, so an unwritten destination byte can never pass for a copied one:
    one pass on the device (:func:`fill_random` draws them with cuRAND, whose set-up takes half a second)."""
    _pattern_kernel()(np.uint32(seed), device_bytes)
    runtime.deviceSynchronize()


@dataclass(frozen=True)
class Copy:
    """One cudaMemcpyAsync, and where its result can be checked: ``dst`` must equal ``expected`` afterwards."""

    stream: object  # a CuPy stream
    dst_ptr: int
    src_ptr: int
    kind: int
    dst: object  # numpy or CuPy uint8 view of the destination
    expected: object  # the same kind of view of memory holding the source's bytes

    def enqueue(self, nbytes: int) -> None:
        runtime.memcpyAsync(self.dst_ptr, self.src_ptr, nbytes, self.kind, self.stream.ptr)


class CopyBuffers(BufferSet):
    """Source and destination buffers of the largest size needed, shared by a host memory kind's configurations:
    a device source of pseudo-random bytes (``fill``: never POISON), a device destination and, unless ``host_memory`` is
    ``device``, a host source holding the device source's bytes and a host destination (``host_buffers=1``: one
    host buffer is both). The copy into the host source is also a first pass over its fresh pages, so no timed copy
    is the first DMA to them."""

    def __init__(self, host_memory: str, nbytes: int, seed: int = 0, *, streams: int = 2, host_buffers: int = 2,
                 fill: Callable = fill_pattern) -> None:
        super().__init__(streams=streams)
        with self.freed_on_failure():
            self.device_src = self.take(DeviceBuffer("malloc", nbytes))
            self.device_dst = self.take(DeviceBuffer("malloc", nbytes))
            self.host_src = self.host_dst = None
            fill(self.device_src.array, seed)
            if host_memory != "device":
                self.host_src = self.take(host_buffer(host_memory, nbytes))
                self.host_dst = self.take(host_buffer(host_memory, nbytes)) if host_buffers > 1 else self.host_src
                runtime.memcpy(self.host_src.ptr, self.device_src.ptr, nbytes, runtime.memcpyDeviceToHost)

    def copies(self, direction: str) -> list[Copy]:
        """H2D (host source → device destination), D2H (device source → host destination), BIDIR (both, on two
        streams) or D2D (device source → device destination)."""
        first, second = self.streams[0], self.streams[-1]
        h2d = Copy(first, self.device_dst.ptr, self.host_src.ptr, runtime.memcpyHostToDevice,
                   self.device_dst.array, self.device_src.array) if self.host_src else None
        if direction == "H2D":
            return [h2d]
        if direction == "D2H":
            return [Copy(first, self.host_dst.ptr, self.device_src.ptr, runtime.memcpyDeviceToHost,
                         self.host_dst.array, self.host_src.array)]
        if direction == "BIDIR":
            return [h2d, Copy(second, self.host_dst.ptr, self.device_src.ptr, runtime.memcpyDeviceToHost,
                              self.host_dst.array, self.host_src.array)]
        return [Copy(first, self.device_dst.ptr, self.device_src.ptr, runtime.memcpyDeviceToDevice,
                     self.device_dst.array, self.device_src.array)]


def mismatch(copies: Sequence, nbytes: int) -> str | None:
    """Poison, copy once, compare (``copies``: anything with ``stream``, ``dst``, ``expected`` and
    ``enqueue(nbytes)``). None when every destination byte equals the source; else what went wrong."""
    for copy in copies:
        with copy.stream:
            copy.dst[:nbytes].fill(POISON)
    for copy in copies:
        copy.enqueue(nbytes)
    for copy in copies:
        copy.stream.synchronize()
    for copy in copies:
        with copy.stream:
            differ = differing(copy.dst[:nbytes], copy.expected[:nbytes])
            if differ is not None:
                return (f"data mismatch after copy: {differ.size} of {nbytes} bytes differ "
                        f"(first at offset {int(differ[0])})")
    return None


def differing(got, want):
    """The flat indices where two same-shaped NumPy or CuPy arrays differ, or None where they are equal: compared
    eight bytes at a time first where both views allow it (a tenth of the host time of an element-wise compare and
    scan of a gigabyte), element by element only to say where they differ."""
    xp = cupy.get_array_module(got)
    wide = got.nbytes % 8 == 0 and got.flags.c_contiguous and want.flags.c_contiguous
    if wide and bool(xp.array_equal(got.reshape(-1).view(xp.uint64), want.reshape(-1).view(xp.uint64))):
        return None
    differ = xp.flatnonzero(got != want)
    return differ if differ.size else None


def verified_and_timed(row: dict, copies: Sequence, nbytes: int, timer, metric: str, gated: bool = True):
    """Verify ``copies`` (anything with ``stream``, ``dst``, ``expected`` and ``enqueue(nbytes)``) once, then time
    them together with ``timer``. Fills ``row``'s verified, sample and status columns (failed, with the error, when
    the data did not arrive or the timing failed) and returns the timing, or None."""
    problem = mismatch(copies, nbytes)
    if problem:
        row["error"] = problem
        return None
    return timed(row, copies, nbytes, timer, metric, gated)


def timed(row: dict, copies: Sequence, nbytes: int, timer, metric: str, gated: bool = True,
          devices: Sequence[int] | None = None):
    """Time verified ``copies`` (anything with ``stream`` and ``enqueue(nbytes)``) together with ``timer``
    (``devices``: each copy's GPU, as :meth:`bench.timing.Timer.measure` takes them). Fills ``row`` as
    :func:`verified_and_timed` does and returns the timing, or None."""
    row["verified"] = True

    def enqueue(ops: int) -> None:
        for _ in range(ops):
            for copy in copies:
                copy.enqueue(nbytes)

    try:
        timing = timer.measure(enqueue, [copy.stream for copy in copies], metric=metric, gated=gated,
                               devices=devices)
    except MeasurementFailed as error:
        row["error"] = str(error)
        return None
    row.update(timing.samples.columns(), status=Status.OK, gbps=len(copies) * nbytes / (timing.median_ms * 1e6))
    return timing


@contextmanager
def verified_copy(direction: str, host_memory: str, nbytes: int, stream) -> Iterator[Callable[[], None]]:
    """One ``direction`` copy (H2D, D2H or D2D) of ``nbytes`` on ``stream``, its data verified once as the
    ``bandwidth`` experiment does; yields the function that enqueues it. MeasurementFailed if the data did not
    arrive."""
    with CopyBuffers(host_memory, nbytes) as buffers:
        (copy,) = buffers.copies(direction)
        copy = replace(copy, stream=stream)
        problem = mismatch([copy], nbytes)
        if problem:
            raise MeasurementFailed(problem)
        yield lambda: copy.enqueue(nbytes)
        stream.synchronize()


def by_host_memory(configs: Sequence[dict], buffers: Callable[[str, int], BufferSet],
                   measure_one: Callable[[dict, BufferSet], dict]) -> Iterator[dict]:
    """``measure_one(config, buffers)`` for each configuration, one host memory kind at a time so that kind's
    buffers (``buffers(host_memory, largest bytes)``) are allocated once."""
    for host_memory in dict.fromkeys(config["host_memory"] for config in configs):
        group = [config for config in configs if config["host_memory"] == host_memory]
        with buffers(host_memory, max(config["bytes"] for config in group)) as made:
            for config in group:
                yield measure_one(config, made)
