"""Host memory kinds and device allocators, each freed deterministically (context managers).

Host kinds:
    ``pinned``      cudaHostAlloc: page-locked, DMA-able directly, allows asynchronous copies.
    ``pageable``    ordinary numpy memory with every page touched; copies stage through a driver buffer.
    ``registered``  ordinary numpy memory page-locked after the fact with cudaHostRegister.
    ``write-combined``  cudaHostAlloc with cudaHostAllocWriteCombined: pinned, not cached by the CPU
                    (:class:`WriteCombinedBuffer`; :func:`host_buffer` makes any of the four).
Device allocators:
    ``malloc``       cudaMalloc / cudaFree.
    ``mallocAsync``  cudaMallocAsync / cudaFreeAsync on a stream, from the device's default pool.
"""

from __future__ import annotations

import ctypes
import mmap
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import numpy as np

from bench.platform.cuda import cupy, runtime

HOST_MEMORY = ("pinned", "pageable", "registered")
WRITE_COMBINED = "write-combined"
DEVICE_ALLOCATORS = ("malloc", "mallocAsync")
RELEASE_THRESHOLD_MAX = 2**64 - 1


@dataclass(frozen=True)
class StreamRef:
    """A stream by its CUDA handle, for the special ones no CuPy object stands for."""

    ptr: int


LEGACY_STREAM = StreamRef(1)  # cudaStreamLegacy: the NULL stream, implicitly synchronizing with blocking streams
PER_THREAD_STREAM = StreamRef(2)  # cudaStreamPerThread


class OwnedStream:
    """A stream created with ``cudaStreamCreateWithFlags`` (``blocking``: the default flags, so it synchronizes with
    the legacy default stream; otherwise non-blocking) that its user may also destroy itself; see :meth:`disown`."""

    def __init__(self, blocking: bool) -> None:
        self.ptr = runtime.streamCreateWithFlags(runtime.streamDefault if blocking else runtime.streamNonBlocking)

    def disown(self) -> None:
        """The stream was destroyed elsewhere; :meth:`close` will leave it alone."""
        self.ptr = 0

    def close(self) -> None:
        if self.ptr:
            runtime.streamDestroy(self.ptr)
            self.ptr = 0


@contextmanager
def release_threshold(threshold: int) -> Iterator[int]:
    """Set the device's default memory pool's release threshold (bytes it keeps across synchronizations), trimmed
    empty first; restore the old threshold afterwards. Yields the pool's handle."""
    pool = runtime.deviceGetDefaultMemPool(runtime.getDevice())
    previous = runtime.memPoolGetAttribute(pool, runtime.cudaMemPoolAttrReleaseThreshold)
    runtime.memPoolTrimTo(pool, 0)
    runtime.memPoolSetAttribute(pool, runtime.cudaMemPoolAttrReleaseThreshold, threshold)
    try:
        yield pool
    finally:
        runtime.memPoolSetAttribute(pool, runtime.cudaMemPoolAttrReleaseThreshold, previous)
        runtime.memPoolTrimTo(pool, 0)


def touched(nbytes: int) -> np.ndarray:
    """Pageable numpy memory with every page faulted in now, not during the first timed operation on it."""
    memory = np.empty(nbytes, dtype=np.uint8)
    memory[:: mmap.PAGESIZE] = 0
    return memory


class HostBuffer:
    """``nbytes`` of host memory of one kind; ``array`` is a uint8 numpy view, ``ptr`` its address."""

    def __init__(self, kind: str, nbytes: int) -> None:
        if kind not in HOST_MEMORY:
            raise ValueError(f"unknown host memory kind {kind!r}; choose from {', '.join(HOST_MEMORY)}")
        if nbytes <= 0:
            raise ValueError("nbytes must be positive")
        self.kind, self.nbytes = kind, nbytes
        self._pinned_ptr = 0
        self._registered = False
        if kind == "pinned":
            self._pinned_ptr = runtime.hostAlloc(nbytes, 0)
            self.array = np.frombuffer((ctypes.c_uint8 * nbytes).from_address(self._pinned_ptr), dtype=np.uint8)
        else:
            self.array = touched(nbytes)
            if kind == "registered":
                runtime.hostRegister(self.array.ctypes.data, nbytes, 0)
                self._registered = True
        self.ptr = self.array.ctypes.data

    def close(self) -> None:
        if self._registered:  # unregister while the numpy memory still exists
            runtime.hostUnregister(self.ptr)
            self._registered = False
        self.array = None  # drops pageable memory; for pinned, the view goes before the memory behind it
        if self._pinned_ptr:
            runtime.freeHost(self._pinned_ptr)
            self._pinned_ptr = 0

    def __enter__(self) -> HostBuffer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class WriteCombinedBuffer:
    """``nbytes`` of write-combined pinned host memory (``cudaHostAlloc`` with ``cudaHostAllocWriteCombined``):
    ``array`` is a uint8 numpy view of it, ``ptr`` its address; :class:`HostBuffer`'s interface."""

    kind = WRITE_COMBINED

    def __init__(self, nbytes: int) -> None:
        if nbytes <= 0:
            raise ValueError("nbytes must be positive")
        self.nbytes = nbytes
        self._ptr = runtime.hostAlloc(nbytes, runtime.hostAllocWriteCombined)
        self.array = np.frombuffer((ctypes.c_uint8 * nbytes).from_address(self._ptr), dtype=np.uint8)
        self.ptr = self._ptr

    def close(self) -> None:
        self.array = None  # the view goes before the memory behind it
        if self._ptr:
            runtime.freeHost(self._ptr)
            self._ptr = 0

    def __enter__(self) -> WriteCombinedBuffer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def host_buffer(kind: str, nbytes: int):
    """A host buffer of one of HOST_MEMORY (:class:`HostBuffer`) or write-combined (:class:`WriteCombinedBuffer`)."""
    if kind == WRITE_COMBINED:
        return WriteCombinedBuffer(nbytes)
    return HostBuffer(kind, nbytes)


class DeviceBuffer:
    """``nbytes`` of device memory from one allocator; ``array`` is a uint8 CuPy view, ``ptr`` its address.

    ``mallocAsync`` buffers are allocated and freed in stream order on ``stream`` (a CuPy stream).
    """

    def __init__(self, allocator: str, nbytes: int, stream=None) -> None:
        if allocator not in DEVICE_ALLOCATORS:
            raise ValueError(f"unknown allocator {allocator!r}; choose from {', '.join(DEVICE_ALLOCATORS)}")
        if nbytes <= 0:
            raise ValueError("nbytes must be positive")
        if allocator == "mallocAsync" and stream is None:
            raise ValueError("mallocAsync needs a stream")
        self.allocator, self.nbytes, self.stream = allocator, nbytes, stream
        if allocator == "malloc":
            self.ptr = runtime.malloc(nbytes)
        else:
            self.ptr = runtime.mallocAsync(nbytes, stream.ptr)
        memory = cupy.cuda.UnownedMemory(self.ptr, nbytes, self)
        self.array = cupy.ndarray((nbytes,), dtype=cupy.uint8, memptr=cupy.cuda.MemoryPointer(memory, 0))

    def close(self) -> None:
        if not self.ptr:
            return
        self.array = None
        if self.allocator == "malloc":
            runtime.free(self.ptr)
        else:
            runtime.freeAsync(self.ptr, self.stream.ptr)
        self.ptr = 0

    def __enter__(self) -> DeviceBuffer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class BufferSet:
    """Non-blocking streams and the buffers they work on, living and dying together.

    Subclasses allocate inside ``with self.freed_on_failure():`` and register each buffer with :meth:`take`; closing
    synchronizes every stream, then frees every buffer (in reverse order).
    """

    def __init__(self, streams: int) -> None:
        self.streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(streams)]
        self._buffers = ExitStack()

    def take(self, buffer):
        return self._buffers.enter_context(buffer)

    @contextmanager
    def freed_on_failure(self) -> Iterator[None]:
        try:
            yield
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for stream in self.streams:
            stream.synchronize()
        self._buffers.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
