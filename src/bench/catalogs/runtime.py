"""The catalog of CUDA runtime calls whose blocking the ``blocking``, ``serialization`` and ``crossgpu`` experiments
measure, each with what the CUDA documentation says about it: one catalog of :mod:`bench.catalogs`, its calls of the
one model (:class:`bench.catalogs.Call`).

A call is prepared on a *placement* stream before anything runs (buffers, handles), optionally *armed* right after
the spin kernel started (e.g. an event recorded behind it), then made once while the host times it, and cleaned up
once the device is idle. Placements, for calls that take a stream: ``same`` (the spinning stream), ``other`` (a
second non-blocking stream), ``legacy`` (the legacy default NULL stream) and ``per-thread`` (the per-thread default
stream); calls that take no stream have the one placement ``none``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

import numpy as np

from bench.catalogs import RUNTIME, Call, Prepared
from bench.catalogs import catalog as _catalogs
from bench.catalogs.pages import (ASYNC_ALLOC_PAGE, DEVICE_PAGE, ERROR_PAGE, EVENT_PAGE, GUIDE_ASYNC, GUIDE_IMPLICIT,
                                  GUIDE_STREAMS, MEMORY_PAGE, STREAM_PAGE, SYNC_PAGE)
from bench.platform.cuda import runtime
from bench.measure.memory import touched

SMALL_BYTES = 4 << 10
LARGE_BYTES = 64 << 20
ALLOC_BYTES = 1 << 20
KIT_MEMORY = (2 * LARGE_BYTES + (16 << 20), 2 * LARGE_BYTES)  # (device, host) bytes a Kit and its calls need
CUDA_ERROR_NOT_READY = 600



def documented_serializes(call: Call, placement: str, spin_blocking: bool) -> bool | None:
    """Whether the Programming Guide says the call, issued between two kernels on different streams, keeps them
    from overlapping; None where it says nothing."""
    on_null_stream = (placement == "legacy" and call.enqueues) or call.null_stream
    if call.guide_serializes or (on_null_stream and spin_blocking):  # "any CUDA command to the NULL stream"
        return True
    return None


@functools.cache
def cudart() -> ctypes.CDLL:
    """The CUDA runtime library this process already loaded (CuPy's), for calls CuPy does not wrap."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "libcudart.so" in path:
                return ctypes.CDLL(path)
    name = ctypes.util.find_library("cudart")
    if name is None:
        raise RuntimeError("libcudart is not loaded in this process and not on the library path")
    return ctypes.CDLL(name)


def _query(function: Callable[[int], int], handle: int) -> None:
    """eventQuery / streamQuery, not-ready accepted (some CuPy builds return the status, some raise it)."""
    try:
        function(handle)
    except runtime.CUDARuntimeError as error:
        if error.status != CUDA_ERROR_NOT_READY:
            raise


def _call(name: str, api: str, docs_host: str, docs: str, source: str, prepare: Callable, **options) -> Call:
    return Call(name, RUNTIME, docs_host, docs, source, prepare, api=api, **options)


def _catalog() -> list[Call]:
    """The calls. Building it touches no CUDA: every runtime function is looked up when a call is prepared or made.
    """

    def allocating(allocate: Callable[[], int], free: Callable[[int], None]) -> Callable:
        def prepare(kit, stream) -> Prepared:
            made: list[int] = []
            return Prepared(call=lambda: made.append(allocate()), cleanup=lambda: [free(ptr) for ptr in made])
        return prepare

    def malloc_async(kit, stream) -> Prepared:
        made: list[int] = []
        return Prepared(call=lambda: made.append(runtime.mallocAsync(ALLOC_BYTES, stream.ptr)),
                        cleanup=lambda: [runtime.freeAsync(ptr, stream.ptr) for ptr in made])

    def free_async(kit, stream) -> Prepared:
        ptr = runtime.mallocAsync(ALLOC_BYTES, stream.ptr)
        runtime.streamSynchronize(stream.ptr)
        return Prepared(call=lambda: runtime.freeAsync(ptr, stream.ptr))

    def freeing(allocate: Callable[[], int], free: Callable[[int], None]) -> Callable:
        def prepare(kit, stream) -> Prepared:
            ptr = allocate()
            return Prepared(call=lambda: free(ptr))
        return prepare

    def host_register(kit, stream) -> Prepared:
        memory = touched(ALLOC_BYTES)
        return Prepared(call=lambda: runtime.hostRegister(memory.ctypes.data, ALLOC_BYTES, 0),
                        cleanup=lambda: runtime.hostUnregister(memory.ctypes.data))

    def host_unregister(kit, stream) -> Prepared:
        memory = touched(ALLOC_BYTES)
        runtime.hostRegister(memory.ctypes.data, ALLOC_BYTES, 0)
        return Prepared(call=lambda: runtime.hostUnregister(memory.ctypes.data))

    def copy_async(direction: str, host: str, nbytes: int) -> Callable:
        def prepare(kit, stream) -> Prepared:
            host_ptr = kit.host[host].ptr
            if direction == "H2D":
                dst, src, kind = kit.device_dst.ptr, host_ptr, runtime.memcpyHostToDevice
            else:
                dst, src, kind = host_ptr, kit.device_src.ptr, runtime.memcpyDeviceToHost
            return Prepared(call=lambda: runtime.memcpyAsync(dst, src, nbytes, kind, stream.ptr))
        return prepare

    def stream_destroy(kit, stream) -> Prepared:
        ptr = stream.ptr
        return Prepared(call=lambda: runtime.streamDestroy(ptr), cleanup=stream.disown)

    def event_query(kit, stream) -> Prepared:
        return Prepared(arm=lambda: runtime.eventRecord(kit.event, stream.ptr),
                        call=lambda: _query(runtime.eventQuery, kit.event))

    def simple(make_call: Callable) -> Callable:
        return lambda kit, stream: Prepared(call=make_call(kit, stream))

    pinned_async = ("cudaMemcpyAsync returns at once for copies that involve pinned host memory or only device "
                    "memory: \"for all other transfers, the function should be fully asynchronous\"")
    pageable_h2d = ("from pageable memory the copy \"might be synchronous\": \"if pageable memory must first be "
                    "staged to pinned memory, the driver may synchronize with the stream\"")
    pageable_d2h = ("\"for transfers from device memory to pageable host memory, the function will return only once "
                    "the copy has completed\"")
    copies = []
    for direction in ("H2D", "D2H"):
        for host in ("pinned", "pageable"):
            for nbytes, label in ((SMALL_BYTES, "4 KiB"), (LARGE_BYTES, "64 MiB")):
                if host == "pinned":
                    docs_host, docs = "never", pinned_async
                elif direction == "H2D":
                    docs_host, docs = "maybe", pageable_h2d
                else:
                    docs_host, docs = "stream", pageable_d2h
                copies.append(_call(f"cudaMemcpyAsync {direction} {host} {label}", "cudaMemcpyAsync", docs_host,
                                    docs, SYNC_PAGE, copy_async(direction, host, nbytes)))

    return [
        _call("(nothing)", "(nothing)", "never", "control: no call at all between the spin and the check",
              "", simple(lambda kit, stream: lambda: None), placements=("none",)),
        _call("cudaMalloc", "cudaMalloc", "silent",
              "the function's page says nothing about waiting; the Programming Guide lists \"a device memory "
              "allocation\" among the operations that keep commands of different streams from running concurrently",
              GUIDE_IMPLICIT, allocating(lambda: runtime.malloc(ALLOC_BYTES), lambda ptr: runtime.free(ptr)), placements=("none",),
              guide_serializes=True),
        _call("cudaFree", "cudaFree", "silent", "the function's page says nothing about waiting for the device",
              MEMORY_PAGE, freeing(lambda: runtime.malloc(ALLOC_BYTES), lambda ptr: runtime.free(ptr)), placements=("none",)),
        _call("cudaMallocAsync", "cudaMallocAsync", "never",
              "\"inserts an allocation operation into\" the stream; \"a pointer to the allocated memory is returned "
              "immediately\"", ASYNC_ALLOC_PAGE, malloc_async),
        _call("cudaFreeAsync", "cudaFreeAsync", "never", "\"inserts a free operation into\" the stream",
              ASYNC_ALLOC_PAGE, free_async),
        _call("cudaHostAlloc", "cudaHostAlloc", "silent",
              "the function's page says nothing about waiting; the Programming Guide lists \"a page-locked host "
              "memory allocation\" among the operations that keep streams from running concurrently",
              GUIDE_IMPLICIT, allocating(lambda: runtime.hostAlloc(ALLOC_BYTES, 0), lambda ptr: runtime.freeHost(ptr)),
              placements=("none",), guide_serializes=True),
        _call("cudaFreeHost", "cudaFreeHost", "silent", "the function's page says nothing about waiting",
              MEMORY_PAGE, freeing(lambda: runtime.hostAlloc(ALLOC_BYTES, 0), lambda ptr: runtime.freeHost(ptr)),
              placements=("none",)),
        _call("cudaHostRegister", "cudaHostRegister", "silent", "the function's page says nothing about waiting",
              MEMORY_PAGE, host_register, placements=("none",)),
        _call("cudaHostUnregister", "cudaHostUnregister", "silent", "the function's page says nothing about waiting",
              MEMORY_PAGE, host_unregister, placements=("none",)),
        *copies,
        _call("cudaMemcpy D2D 64 MiB", "cudaMemcpy", "never",
              "synchronous memcpy: \"for transfers from device memory to device memory, no host-side synchronization "
              "is performed\"; the Guide lists \"a memory copy between two addresses to the same device memory\" "
              "among the operations that keep streams from running concurrently", SYNC_PAGE,
              simple(lambda kit, stream: lambda: runtime.memcpy(kit.device_dst.ptr, kit.device_src.ptr, LARGE_BYTES,
                                                                runtime.memcpyDeviceToDevice)),
              placements=("none",), guide_serializes=True, null_stream=True),
        _call("cudaMemset 64 MiB", "cudaMemset", "never",
              "\"the cudaMemset functions are asynchronous with respect to the host except when the target memory is "
              "pinned host memory\"; the Guide lists \"a device memory set\" among the operations that keep streams "
              "from running concurrently", SYNC_PAGE,
              simple(lambda kit, stream: lambda: runtime.memset(kit.device_dst.ptr, 0, LARGE_BYTES)),
              placements=("none",), guide_serializes=True, null_stream=True),
        _call("cudaMemsetAsync 64 MiB", "cudaMemsetAsync", "never",
              "asynchronous for device memory (as cudaMemset); the Guide lists \"a device memory set\" among the "
              "operations that keep streams from running concurrently", SYNC_PAGE,
              simple(lambda kit, stream: lambda: runtime.memsetAsync(kit.device_dst.ptr, 0, LARGE_BYTES, stream.ptr)),
              guide_serializes=True),
        _call("cudaStreamCreate", "cudaStreamCreate", "silent", "the function's page says nothing about waiting",
              STREAM_PAGE, allocating(lambda: runtime.streamCreate(), lambda ptr: runtime.streamDestroy(ptr)), placements=("none",)),
        _call("cudaStreamDestroy", "cudaStreamDestroy", "never",
              "\"in case the device is still doing work in the stream when cudaStreamDestroy() is called, the "
              "function will return immediately\"", GUIDE_STREAMS, stream_destroy, placements=("same", "other")),
        _call("cudaEventRecord", "cudaEventRecord", "silent",
              "captures the stream's contents at the time of the call; the page says nothing about waiting",
              EVENT_PAGE, simple(lambda kit, stream: lambda: runtime.eventRecord(kit.event, stream.ptr))),
        _call("cudaEventQuery", "cudaEventQuery", "never",
              "queries the event's work; returns cudaErrorNotReady if it has not completed", EVENT_PAGE, event_query,
              placements=("same", "other")),
        _call("cudaStreamQuery", "cudaStreamQuery", "never",
              "returns cudaErrorNotReady if the stream's operations have not completed", STREAM_PAGE,
              simple(lambda kit, stream: lambda: _query(runtime.streamQuery, stream.ptr)), enqueues=False),
        _call("cudaGetLastError", "cudaGetLastError", "silent",
              "returns and resets the last error of a runtime call in this thread; says nothing about waiting",
              ERROR_PAGE, simple(lambda kit, stream: cudart().cudaGetLastError), placements=("none",)),
        _call("kernel launch", "kernel<<<>>>", "never", "\"kernel launches\" are asynchronous with respect to the host",
              GUIDE_ASYNC, simple(lambda kit, stream: lambda: kit.kernel.launch(stream, kit.device_dst.ptr, 1024, 1))),
        _call("cudaStreamSynchronize", "cudaStreamSynchronize", "stream",
              "control: \"blocks until stream has completed all operations\"", STREAM_PAGE,
              simple(lambda kit, stream: lambda: runtime.streamSynchronize(stream.ptr)), enqueues=False),
        _call("cudaDeviceSynchronize", "cudaDeviceSynchronize", "device",
              "control: \"blocks until the device has completed all preceding requested tasks\"", DEVICE_PAGE,
              simple(lambda kit, stream: runtime.deviceSynchronize), placements=("none",)),
    ]


CALLS = tuple(_catalog())


def catalog() -> dict[str, Call]:
    """Every call by name, in a fixed order."""
    return _catalogs(RUNTIME)


class Kit:
    """What the prepared calls work on: device source and destination, pinned and pageable host buffers (random
    bytes, ``LARGE_BYTES`` each), an event and the mix kernel. Also makes the streams of one measurement."""

    def __init__(self) -> None:
        from bench.platform.cuda import cupy
        from bench.measure import kernels
        from bench.measure.memory import BufferSet, DeviceBuffer, HostBuffer

        self.buffers = BufferSet(streams=0)
        with self.buffers.freed_on_failure():
            self.device_src = self.buffers.take(DeviceBuffer("malloc", LARGE_BYTES))
            self.device_dst = self.buffers.take(DeviceBuffer("malloc", LARGE_BYTES))
            self.device_src.array[:] = cupy.random.RandomState(1).randint(0, 256, LARGE_BYTES, dtype=cupy.uint8)
            self.host = {kind: self.buffers.take(HostBuffer(kind, LARGE_BYTES)) for kind in ("pinned", "pageable")}
            for buffer in self.host.values():
                buffer.array[:] = np.random.default_rng(2).integers(0, 256, LARGE_BYTES, dtype=np.uint8)
            self.kernel = kernels.MixKernel()
            self.event = runtime.eventCreate()
        runtime.deviceSynchronize()

    def close(self) -> None:
        runtime.deviceSynchronize()
        runtime.eventDestroy(self.event)
        self.buffers.close()

    def __enter__(self) -> Kit:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def placement_stream(placement: str, spinning, other):
    """The stream a call with this placement goes to (None for ``none``)."""
    from bench.measure.memory import LEGACY_STREAM, PER_THREAD_STREAM

    return {"same": spinning, "other": other, "legacy": LEGACY_STREAM, "per-thread": PER_THREAD_STREAM,
            "none": None}[placement]
