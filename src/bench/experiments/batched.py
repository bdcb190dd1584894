"""Batched copies: many small host-to-device copies in one cudaMemcpyBatchAsync call, against the same copies issued
one by one with cudaMemcpyAsync.

``copies`` copies of ``bytes`` each, from one host buffer (``pinned`` or ``pageable``) into one device buffer, 256
bytes apart; ``issue=batch`` is one call of the driver's entry point (``cuMemcpyBatchAsync_v2``, or CUDA 12.8's
``cuMemcpyBatchAsync``, through ctypes) with source access order ``access_order``, ``issue=one-by-one`` a loop of
cudaMemcpyAsync. ``host_ms`` is how long the host was blocked issuing them, ``gbps`` the copies' bytes over their GPU
time, timed without the gate; every copied byte and every gap byte is verified. Where the driver lacks the entry
point, every row is ``unsupported``. Why no gate, the two entry points and the caveats: docs/methodology.md.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from bench.platform.cuda import cupy, runtime
from bench.experiments import Accuracy, Config, Cost, Experiment, Row, Sweeps
from bench.measure import columns
from bench.measure.copies import FILL_CHUNK, POISON, differing, fill_random
from bench.measure.memory import BufferSet, DeviceBuffer, HostBuffer
from bench.results.schema import FLAG, FLOAT, FLOATS, INT, TEXT, column
from bench.timing import Context, MeasurementFailed, Samples, StopRule
from bench.platform.vocabulary import AccessOrder, Clock, Status, Unit, values

HOST_KINDS = ("pinned", "pageable")
ACCESS_ORDERS = values(AccessOrder)
ISSUES = ("batch", "one-by-one")
# CUmemcpySrcAccessOrder (cuda.h; cudaMemcpySrcAccessOrder in the runtime has the same values)
SRC_ACCESS_ORDER = {"stream": 1, "during-call": 2, "any": 3}
CUDA_ERROR_NOT_SUPPORTED = 801
MIN_DRIVER_VERSION = 12080  # cuMemcpyBatchAsync came with CUDA 12.8
GAP = 256  # bytes between consecutive copies, in the source and in the destination
METRIC = "GPU time from just before issuing all the copies (one batch call, or the loop of calls) to their end"
ONE_BY_ONE_API = "cudaMemcpyAsync"
_FILL_BYTES = 5 * FILL_CHUNK  # what fill_random (bench.measure.copies) allocates on the device while it fills
# for the time estimate, from a default sweep on an H200 (PCIe Gen5, driver 580.159)
_HOST_PER_COPY_S = {"batch": 0.5e-6, "one-by-one": 2.5e-6}
_HOST_PER_CALL_S = 10e-6
_GPU_PER_COPY_S = {"batch": 0.1e-6, "one-by-one": 2.6e-6}
_GPU_GBPS = 50.0
_STAGING_GBPS = 6.0  # pageable sources: the host copies them into staging buffers

COLUMNS = (
    column("host_memory", TEXT, "the source: pinned (cudaHostAlloc) or pageable host memory", HOST_KINDS),
    column("access_order", TEXT, "the batch's source access order: stream, during-call (out of stream order, done "
                                 "before the call returns) or any (out of stream order, maybe after it returns); "
                                 "one-by-one rows: stream", ACCESS_ORDERS),
    column("issue", TEXT, "batch (one batched-copy call) or one-by-one (a cudaMemcpyAsync per copy)", ISSUES),
    column("copies", INT, "copies in the batch"),
    columns.BYTES_PER_COPY,
    column("gbps", FLOAT, "GB/s (1e9 bytes/s): all the copies' bytes over their median GPU time"),
    column("host_ms", FLOAT, "median host time the enqueue took: the batch call, or the whole loop of calls"),
    column("host_ms_samples", FLOATS, "host time of each sample's enqueue (ms)"),
    column("entry_point", TEXT, "the function called: cuMemcpyBatchAsync_v2 (CUDA 13 driver), cuMemcpyBatchAsync "
                                "(CUDA 12.8 driver, with failIdx) or cudaMemcpyAsync (one-by-one)"),
    column("verified", FLAG, "every copied byte equalled its source and every gap byte stayed poisoned, before "
                             "timing"),
)


# --- description ---------------------------------------------------------------------------------------------

def valid(config: Config) -> bool:
    """A loop of cudaMemcpyAsync has no source access order: it runs once, as ``stream``."""
    return config["issue"] == "batch" or config["access_order"] == "stream"


def stride(nbytes: int) -> int:
    """Distance from one copy's start to the next one's, in the source and in the destination."""
    return nbytes + GAP


def _sample_s(config: Config) -> float:
    """Expected wall time of one sample: the host issues the copies (staging pageable ones), the GPU runs them."""
    copies, nbytes, issue = config["copies"], config["bytes"], config["issue"]
    total = copies * nbytes
    host_s = copies * _HOST_PER_COPY_S[issue] + (_HOST_PER_CALL_S if issue == "batch" else 0.0)
    if config["host_memory"] == "pageable":
        host_s += total / (_STAGING_GBPS * 1e9)
    gpu_s = copies * _GPU_PER_COPY_S[issue] + total / (_GPU_GBPS * 1e9)
    return 1e-4 + host_s + gpu_s


CALIBRATION = 0.9  # H200 default sweeps of 2026-11-22 took 72-100% of the model


def seconds(config: Config, rule: StopRule) -> float:
    """Expected wall time: building the arrays, the verification (poison, one batch, compare), a first and the
    warm-up samples, then sampling: timed without the gate, the samples are noisy, so it usually runs to the time
    cap after ``min_samples``."""
    sample_s = _sample_s(config)
    setup_s = 0.002 + config["copies"] * 2e-6 + 2 * config["copies"] * stride(config["bytes"]) / 50e9
    sampling_s = max(rule.min_samples * sample_s, rule.time_cap_s)
    return CALIBRATION * (setup_s + (2 + rule.warmup_batches) * sample_s + sampling_s)


def memory_needed(configs: Sequence[Config]) -> tuple[int, int]:
    """The destination and the random reference on the device (and the fill's temporaries), the source on the
    host: each as large as the largest configuration's copies with their gaps."""
    largest = max(config["copies"] * stride(config["bytes"]) for config in configs)
    return 2 * largest + _FILL_BYTES, largest


# --- measuring code --------------------------------------------------------------------------------------------

class _Location(ctypes.Structure):
    """CUmemLocation: ``type``, then ``id`` (newer cuda.h: a union of ``id`` and a two-byte ``localized``): 8 bytes."""

    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _Attributes(ctypes.Structure):
    """CUmemcpyAttributes (cudaMemcpyAttributes has the same layout)."""

    _fields_ = [("srcAccessOrder", ctypes.c_int), ("srcLocHint", _Location), ("dstLocHint", _Location),
                ("flags", ctypes.c_uint)]


@dataclass(frozen=True)
class BatchApi:
    """The driver's batched-copy entry point and its signature."""

    name: str  # the exported symbol called
    function: Callable  # the ctypes function
    fail_index: bool  # the CUDA 12.8 signature: a size_t *failIdx before the stream
    driver_version: int  # cuDriverGetVersion: 1000 * major + 10 * minor
    error_name: Callable[[int], str]  # CUresult -> its name


def _version(version: int) -> str:
    return f"{version // 1000}.{version % 1000 // 10}"


def find_batch_api() -> BatchApi | str:
    """The driver's batched-copy entry point, or why there is none (the ``error`` of every row then).

    Loads libcuda (already loaded by CuPy where CUDA runs), reads the driver's CUDA version, and takes the exported
    symbol whose signature is known from its name: ``cuMemcpyBatchAsync_v2`` (CUDA 13.0 and later, no failIdx),
    else ``cuMemcpyBatchAsync`` (CUDA 12.8's, with failIdx). On driver 580.159 (CUDA 13.0), cuGetProcAddress of
    ``cuMemcpyBatchAsync`` for CUDA 13000 and for 12080 gave exactly these two symbols' addresses."""
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError as error:
        return f"the CUDA driver library libcuda.so.1 could not be loaded ({error})"
    get_version = libcuda.cuDriverGetVersion
    get_version.argtypes = [ctypes.POINTER(ctypes.c_int)]
    get_version.restype = ctypes.c_int
    version = ctypes.c_int(0)
    status = get_version(ctypes.byref(version))
    if status != 0:
        return f"cuDriverGetVersion failed with CUresult {status}"
    if version.value < MIN_DRIVER_VERSION:
        return (f"the driver supports CUDA {_version(version.value)}; cudaMemcpyBatchAsync (cuMemcpyBatchAsync) "
                f"needs CUDA {_version(MIN_DRIVER_VERSION)}")
    get_name = libcuda.cuGetErrorName
    get_name.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    get_name.restype = ctypes.c_int

    def error_name(result: int) -> str:
        name = ctypes.c_char_p()
        if get_name(result, ctypes.byref(name)) != 0 or not name.value:
            return f"CUresult {result}"
        return f"{name.value.decode()} ({result})"

    for name, fail_index in (("cuMemcpyBatchAsync_v2", False), ("cuMemcpyBatchAsync", True)):
        try:
            symbol = getattr(libcuda, name)
        except AttributeError:
            continue
        arguments = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,  # dsts, srcs, sizes, count
                     ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]  # attrs, attrsIdxs, numAttrs
        arguments += [ctypes.c_void_p] if fail_index else []  # size_t *failIdx (CUDA 12.8 and 12.9 only)
        arguments += [ctypes.c_void_p]  # hStream
        symbol.argtypes = arguments
        symbol.restype = ctypes.c_int
        return BatchApi(name, symbol, fail_index, version.value, error_name)
    return (f"the driver (CUDA {_version(version.value)}) exports neither cuMemcpyBatchAsync_v2 nor "
            "cuMemcpyBatchAsync")


class BatchCallFailed(MeasurementFailed):
    """The batched-copy call returned an error; ``result`` is its CUresult."""

    def __init__(self, message: str, result: int) -> None:
        super().__init__(message)
        self.result = result


class _Batch:
    """One batched-copy call over fixed arrays, built once: calling it enqueues every copy on the stream."""

    def __init__(self, api: BatchApi, dsts: np.ndarray, srcs: np.ndarray, sizes: np.ndarray, order: int,
                 stream_ptr: int) -> None:
        self.api = api
        self.dsts = np.ascontiguousarray(dsts, dtype=np.uint64)  # CUdeviceptr: unsigned long long
        self.srcs = np.ascontiguousarray(srcs, dtype=np.uint64)
        self.sizes = np.ascontiguousarray(sizes, dtype=np.uintp)  # size_t
        self.attributes = (_Attributes * 1)()
        self.attributes[0].srcAccessOrder = order
        self.attribute_index = (ctypes.c_size_t * 1)(0)  # the one entry applies from copy 0 on
        self.fail_index = ctypes.c_size_t(0)
        arguments = [self.dsts.ctypes.data, self.srcs.ctypes.data, self.sizes.ctypes.data, len(self.sizes),
                     ctypes.addressof(self.attributes), ctypes.addressof(self.attribute_index), 1]
        arguments += [ctypes.addressof(self.fail_index)] if api.fail_index else []
        arguments += [stream_ptr]
        self._arguments = tuple(arguments)
        self._function = api.function

    def __call__(self) -> None:
        result = self._function(*self._arguments)
        if result != 0:
            where = f" at copy {self.fail_index.value}" if self.api.fail_index and \
                self.fail_index.value < len(self.sizes) else ""
            raise BatchCallFailed(f"{self.api.name} failed{where}: {self.api.error_name(result)}", result)


class _Buffers(BufferSet):
    """A random reference on the device, the host source holding the same bytes, and the device destination, all of
    ``nbytes``; one stream."""

    def __init__(self, host_memory: str, nbytes: int, seed: int = 0) -> None:
        super().__init__(streams=1)
        with self.freed_on_failure():
            self.reference = self.take(DeviceBuffer("malloc", nbytes))
            self.destination = self.take(DeviceBuffer("malloc", nbytes))
            self.source = self.take(HostBuffer(host_memory, nbytes))
            fill_random(self.reference.array, seed)
            runtime.memcpy(self.source.ptr, self.reference.ptr, nbytes, runtime.memcpyDeviceToHost)

    @property
    def stream(self):
        return self.streams[0]


@dataclass(frozen=True)
class _Work:
    """One configuration's copies and the function that enqueues all of them once."""

    copies: int
    nbytes: int
    enqueue_once: Callable[[], None]
    entry_point: str

    @property
    def total(self) -> int:
        return self.copies * self.nbytes


def _work(config: Config, buffers: _Buffers, api: BatchApi) -> _Work:
    copies, nbytes = config["copies"], config["bytes"]
    offsets = np.arange(copies, dtype=np.uint64) * np.uint64(stride(nbytes))
    dsts = np.uint64(buffers.destination.ptr) + offsets
    srcs = np.uint64(buffers.source.ptr) + offsets
    stream_ptr = buffers.stream.ptr
    if config["issue"] == "batch":
        sizes = np.full(copies, nbytes, dtype=np.uintp)
        batch = _Batch(api, dsts, srcs, sizes, SRC_ACCESS_ORDER[config["access_order"]], stream_ptr)
        return _Work(copies, nbytes, batch, api.name)
    pairs = list(zip(dsts.tolist(), srcs.tolist()))
    copy, kind = runtime.memcpyAsync, runtime.memcpyHostToDevice

    def loop() -> None:
        for dst, src in pairs:
            copy(dst, src, nbytes, kind, stream_ptr)

    return _Work(copies, nbytes, loop, ONE_BY_ONE_API)


def mismatch(work: _Work, buffers: _Buffers) -> str | None:
    """Poison the destination, issue the copies once, compare: None when every copied byte equals its source and
    every gap byte is still poison; else what went wrong."""
    stream = buffers.stream
    span = work.copies * stride(work.nbytes)
    with stream:
        buffers.destination.array[:span].fill(POISON)
    stream.synchronize()
    work.enqueue_once()
    stream.synchronize()
    destination = buffers.destination.array[:span].reshape(work.copies, stride(work.nbytes))
    reference = buffers.reference.array[:span].reshape(work.copies, stride(work.nbytes))
    with stream:
        differ = differing(destination[:, : work.nbytes], reference[:, : work.nbytes])
        overrun = int(cupy.count_nonzero(destination[:, work.nbytes:] != POISON))
        if differ is not None:
            first = int(differ[0])
            return (f"data mismatch after one batch: {differ.size} of {work.total} bytes differ (first in copy "
                    f"{first // work.nbytes} at offset {first % work.nbytes})")
    if overrun:
        return f"data mismatch after one batch: {overrun} bytes between the copies were written"
    return None


def _row(config: Config, status: str, error: str, entry_point: str = "") -> Row:
    return {**config, **Samples.missing(Unit.MS, Clock.GPU, METRIC, False), "gbps": np.nan, "host_ms": np.nan,
            "host_ms_samples": [], "entry_point": entry_point, "verified": False, "status": status, "error": error}


def unsupported_rows(configs: Sequence[Config], reason: str) -> list[Row]:
    """Every configuration as an ``unsupported`` row: the batched copy cannot be called here, so there is nothing
    to compare the loop with either."""
    return [_row(config, Status.UNSUPPORTED, reason) for config in configs]


def _measure(config: Config, buffers: _Buffers, api: BatchApi, context: Context) -> Row:
    try:
        work = _work(config, buffers, api)
        row = _row(config, Status.FAILED, "", work.entry_point)
        problem = mismatch(work, buffers)
    except BatchCallFailed as error:
        status = Status.UNSUPPORTED if error.result == CUDA_ERROR_NOT_SUPPORTED else Status.FAILED
        return _row(config, status, str(error), api.name)
    if problem:
        row["error"] = problem
        return row
    row["verified"] = True

    def enqueue(ops: int) -> None:
        for _ in range(ops):
            work.enqueue_once()

    try:
        # Never behind the gate (docs/methodology.md, batched): the loop would fill the stream's queue, and a
        # during-call batch waits for the stream.
        timing = context.timer().measure(enqueue, [buffers.stream], metric=METRIC, gated=False, ops_per_batch=1)
    except MeasurementFailed as error:
        row["error"] = str(error)
        return row
    row.update(timing.samples.columns(), status=Status.OK, gbps=work.total / (timing.median_ms * 1e6),
               host_ms=timing.enqueue_median_ms, host_ms_samples=[float(ms) for ms in timing.enqueue_ms])
    return row


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    """One row per configuration, one host memory kind at a time so its buffers are allocated once; all rows
    ``unsupported`` where the driver has no batched copy."""
    api = find_batch_api()
    if isinstance(api, str):
        yield from unsupported_rows(configs, api)
        return
    for host_memory in dict.fromkeys(config["host_memory"] for config in configs):
        group = [config for config in configs if config["host_memory"] == host_memory]
        largest = max(config["copies"] * stride(config["bytes"]) for config in group)
        with _Buffers(host_memory, largest) as buffers:
            for config in group:
                yield _measure(config, buffers, api, context)


EXPERIMENT = Experiment(
    name="batched",
    description="cudaMemcpyBatchAsync vs a cudaMemcpyAsync loop: many small H2D copies, pinned/pageable source × "
                "source access order × copies × size; host-blocked time and GB/s",
    axes={"host_memory": HOST_KINDS, "access_order": ACCESS_ORDERS, "issue": ISSUES, "copies": (64, 1024),
          "bytes": (4 << 10, 64 << 10)},
    columns=COLUMNS,
    measure=measure,
    order=12,
    sweeps=Sweeps(
        quick={"copies": (256,), "bytes": (4 << 10,)},
        full={"copies": (16, 64, 256, 1024, 4096), "bytes": (1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10)},
        valid=valid,
    ),
    cost=Cost(seconds, memory_needed=memory_needed, share_s=3),
    accuracy=Accuracy(stop_rules={"default": {"time_cap_s": 0.05}}),
)
