"""numba-cuda calls and what numba-cuda's documentation says about them. Calls given a stream get the call stream
as a numba stream; calls without one use numba's default, the legacy default stream."""

from __future__ import annotations

from bench.catalogs import Call, Prepared, fresh_number
from bench.platform.cuda import numba_cuda
from bench.measure import kernels

MEMORY = "https://nvidia.github.io/numba-cuda/user/memory.html"
KERNELS = "https://nvidia.github.io/numba-cuda/user/kernels.html"
DEVICE = "https://nvidia.github.io/numba-cuda/user/device-management.html"
SIZE = 1 << 20
ASYNC_WITH_STREAM = ("\"If a CUDA stream is given, then the transfer will be made asynchronously as part as the given "
                     "stream\"")
SYNC_WITHOUT = "\"Otherwise, the transfer is synchronous: the function returns after the copy is finished\""


class Kit:
    """numba-cuda inputs: pageable and pinned host arrays, a device array, a compiled kernel."""

    def __init__(self) -> None:
        import numpy as np

        self.host = np.random.default_rng(7).random(SIZE, dtype=np.float32)
        self.pinned = numba_cuda.pinned_array(SIZE, dtype=np.float32)
        self.pinned[:] = self.host
        self.device = numba_cuda.to_device(self.host)
        self.pageable_out = np.empty(SIZE, dtype=np.float32)
        self.kernel = kernels.mix_array_kernel
        self.words = numba_cuda.device_array(SIZE, dtype=np.uint32)
        numba_cuda.synchronize()


def _to_device(source: str, with_stream: bool):
    def prepare(kit, stream) -> Prepared:
        array = kit.host if source == "pageable" else kit.pinned
        if with_stream:
            return Prepared(call=lambda: numba_cuda.to_device(array, stream=stream.named))
        return Prepared(call=lambda: numba_cuda.to_device(array))
    return prepare


def _to_host(target: str, with_stream: bool):
    def prepare(kit, stream) -> Prepared:
        out = kit.pageable_out if target == "pageable" else kit.pinned
        if with_stream:
            return Prepared(call=lambda: kit.device.copy_to_host(out, stream=stream.named))
        return Prepared(call=lambda: kit.device.copy_to_host(out))
    return prepare


def _launch(kit, stream) -> Prepared:
    import warnings

    from numba.cuda.core.errors import NumbaPerformanceWarning

    def launch():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NumbaPerformanceWarning)
            kit.kernel[256, 256, stream.named](kit.words, 1)
    launch()  # compiled and loaded before the measurement
    return Prepared(call=launch)


FRESH_SOURCE = """
def body(data):
    index = cuda.grid(1)
    if index < data.size:
        data[index] = data[index] * 3 + CONSTANT
"""


def _fresh_kernel(kit, stream) -> Prepared:
    """A @cuda.jit kernel numba has not compiled: a new function each time (no cache)."""
    from numba import cuda

    namespace = {"cuda": cuda, "CONSTANT": fresh_number()}
    exec(FRESH_SOURCE, namespace)  # a new function object with its constant as a global
    kernel = cuda.jit(namespace["body"])
    return Prepared(call=lambda: kernel[256, 256, stream.named](kit.words))


def _dropped(kit, stream) -> Prepared:
    """The last reference to a device array dropped: numba defers the cudaFree to a queue."""
    import numpy as np

    held = [numba_cuda.device_array(SIZE, dtype=np.float32)]
    return Prepared(call=held.clear)


def _flushed(kit, stream) -> Prepared:
    """numba's pending deallocations flushed (what happens when the queue fills up)."""
    import numpy as np

    arrays = [numba_cuda.device_array(SIZE, dtype=np.float32) for _ in range(4)]
    del arrays
    return Prepared(call=numba_cuda.current_context().deallocations.clear)


def _call(name, category, stream, docs, page, prepare, docs_host="silent", fresh=False) -> Call:
    return Call(f"numba {name}", "numba-cuda", docs_host, docs, page, prepare, category=category, stream=stream,
                fresh=fresh)


CALLS = (
    _call("kernel[grid, block, stream](...)", "launch", "given", "kernel launches are asynchronous with respect to "
          "the host", KERNELS, _launch, docs_host="never"),
    _call("cuda.to_device(pageable)", "transfer", "default", SYNC_WITHOUT, MEMORY, _to_device("pageable", False),
          docs_host="stream"),
    _call("cuda.to_device(pageable, stream=s)", "transfer", "given", ASYNC_WITH_STREAM, MEMORY,
          _to_device("pageable", True), docs_host="never"),
    _call("cuda.to_device(pinned)", "transfer", "default", SYNC_WITHOUT, MEMORY, _to_device("pinned", False),
          docs_host="stream"),
    _call("cuda.to_device(pinned, stream=s)", "transfer", "given", ASYNC_WITH_STREAM, MEMORY,
          _to_device("pinned", True), docs_host="never"),
    _call("d.copy_to_host(pageable)", "transfer", "default", SYNC_WITHOUT, MEMORY, _to_host("pageable", False),
          docs_host="stream"),
    _call("d.copy_to_host(pageable, stream=s)", "transfer", "given", ASYNC_WITH_STREAM, MEMORY,
          _to_host("pageable", True), docs_host="never"),
    _call("d.copy_to_host(pinned, stream=s)", "transfer", "given", ASYNC_WITH_STREAM, MEMORY,
          _to_host("pinned", True), docs_host="never"),
    _call("cuda.device_array(4 MiB)", "allocation", "none", "\"Allocate an empty device ndarray\"; silent about "
          "waiting", MEMORY, lambda kit, stream: Prepared(call=lambda: numba_cuda.device_array(SIZE, "float32"))),
    _call("cuda.pinned_array(4 MiB)", "allocation", "none", "\"Allocate an ndarray with a buffer that is pinned "
          "(pagelocked)\"; silent about waiting", MEMORY,
          lambda kit, stream: Prepared(call=lambda: numba_cuda.pinned_array(SIZE, "float32"))),
    _call("cuda.mapped_array(4 MiB)", "allocation", "none", "\"Allocate a mapped ndarray with a buffer that is pinned "
          "and mapped on to the device\"; silent about waiting", MEMORY,
          lambda kit, stream: Prepared(call=lambda: numba_cuda.mapped_array(SIZE, "float32"))),
    _call("del d (deferred deallocation)", "allocation", "none", "deallocation is deferred: freed memory is queued "
          "and released later, in batches", MEMORY, _dropped),
    _call("deallocations.clear() (pending frees)", "allocation", "none", "releases the queued deallocations at once; "
          "silent about waiting", MEMORY, _flushed),
    _call("first call of a new @cuda.jit kernel", "compilation", "given", "a kernel is compiled for its argument "
          "types on its first call; silent about waiting", KERNELS, _fresh_kernel, fresh=True),
    _call("stream.synchronize()", "synchronization", "given", "control: waits for the stream's work", DEVICE,
          lambda kit, stream: Prepared(call=stream.named.synchronize), docs_host="stream"),
    _call("cuda.synchronize()", "synchronization", "none", "control: \"Synchronize the current context\"", DEVICE,
          lambda kit, stream: Prepared(call=numba_cuda.synchronize), docs_host="device"),
)
