"""CuPy calls and what CuPy's documentation says about them. The call runs with its stream as CuPy's current
stream (``with stream:``), on inputs made before the spin kernel started."""

from __future__ import annotations

from bench.catalogs import Call, Prepared, fresh_number
from bench.catalogs.pages import CUPY_DOCS
from bench.platform.cuda import cupy, cupyx

DOCS = CUPY_DOCS
SIZE = 1 << 20  # elements of the float32 inputs (4 MiB)


class Kit:
    """CuPy inputs of every kind a call needs, made once and synchronized: random float32 data, a boolean mask,
    integer indices and small non-negative integers on the device; pageable and pinned host arrays."""

    def __init__(self) -> None:
        import numpy as np

        random = cupy.random.RandomState(5)
        self.x = random.random_sample(SIZE, dtype=cupy.float32)
        self.one = self.x[0]  # zero-dimensional: what float() and bool() accept
        self.small = self.x[:10]
        self.mask = self.x > 0.5
        self.index = random.randint(0, SIZE, 4096)
        self.counts = random.randint(0, 1000, SIZE)
        self.matrix = random.random_sample((1024, 1024), dtype=cupy.float32)
        self.host = np.random.default_rng(6).random(SIZE, dtype=np.float32)  # pageable
        self.pinned = cupyx.empty_pinned(SIZE, dtype=np.float32)
        self.pinned[:] = self.host
        self.pageable_out = np.empty(SIZE, dtype=np.float32)
        cupy.cuda.runtime.deviceSynchronize()


def _simple(make):
    """A call that needs only the kit: ``make(kit)`` returns the function to time."""
    return lambda kit, stream: Prepared(call=make(kit))


def _pool_blocks(kit, stream) -> Prepared:
    """free_all_blocks with free blocks in the pool: a few arrays allocated and dropped first."""

    pool = cupy.get_default_memory_pool()
    arrays = [cupy.empty(SIZE, dtype=cupy.float32) for _ in range(4)]
    del arrays
    return Prepared(call=pool.free_all_blocks)


def _back_to_pool(kit, stream) -> Prepared:

    held = [cupy.empty(SIZE, dtype=cupy.float32)]
    return Prepared(call=held.clear)


def _elementwise(kit, stream) -> Prepared:
    """A kernel CuPy has not compiled in this process: its source differs by a constant each time."""

    kernel = cupy.ElementwiseKernel("float32 x", "float32 y", f"y = x * 2 + {fresh_number()}",
                                    f"bench_fresh_elementwise_{fresh_number()}")
    return Prepared(call=lambda: kernel(kit.x))


def _raw(kit, stream) -> Prepared:

    code = ('extern "C" __global__ void bench_fresh(float* x, int n) { int i = blockIdx.x * blockDim.x + '
            f'threadIdx.x; if (i < n) x[i] = x[i] * 2.0f + {fresh_number()}.0f; }}')
    kernel = cupy.RawKernel(code, "bench_fresh")
    data = cupy.empty(SIZE, dtype=cupy.float32)
    return Prepared(call=lambda: kernel(((SIZE + 255) // 256,), (256,), (data, cupy.int32(SIZE))), keep=data)


def _stream_sync(kit, stream) -> Prepared:
    return Prepared(call=stream.named.synchronize)


def _asarray(source: str, blocking: bool | None = None):
    def prepare(kit, stream) -> Prepared:
    
        array = kit.host if source == "pageable" else kit.pinned
        if blocking is None:
            return Prepared(call=lambda: cupy.asarray(array))
        return Prepared(call=lambda: cupy.asarray(array, blocking=blocking))
    return prepare


def _call(name, category, stream, docs, page, prepare, docs_host="silent", fresh=False) -> Call:
    return Call(f"cupy {name}", "cupy", docs_host, docs, DOCS + page, prepare, category=category, stream=stream,
                fresh=fresh)


ITEM = "cupy.ndarray.html"
SYNCHRONIZES_MAYBE = "\"This function may synchronize the device.\""

CALLS = (
    _call("a.item()", "scalar", "current", "\"Converts the array with one element to a Python scalar\"; silent about "
          "waiting", ITEM, _simple(lambda kit: kit.one.item)),
    _call("float(a)", "scalar", "current", "converts a one-element array to a Python float; silent about waiting",
          ITEM, _simple(lambda kit: lambda: float(kit.one))),
    _call("bool(a)", "scalar", "current", "the truth value of a one-element array; silent about waiting", ITEM,
          _simple(lambda kit: lambda: bool(kit.one))),
    _call("repr(a)", "scalar", "current", "prints the array's values; silent about waiting", ITEM,
          _simple(lambda kit: lambda: repr(kit.small))),
    _call("cupy.asnumpy(a)", "transfer", "current", "blocking defaults to True: \"the copy is synchronous (with "
          "respect to the host)\"", "cupy.asnumpy.html", _simple(lambda kit: lambda: cupy.asnumpy(kit.x)),
          docs_host="stream"),
    _call("a.get()", "transfer", "current", "blocking defaults to True: \"the copy is synchronous (with respect to the "
          "host)\"", ITEM, _simple(lambda kit: kit.x.get), docs_host="stream"),
    _call("cupy.asnumpy(a, blocking=False) into pinned", "transfer", "current", "with blocking=False \"the copy runs "
          "asynchronously on the given (if given) or current stream\"", "cupy.asnumpy.html",
          _simple(lambda kit: lambda: cupy.asnumpy(kit.x, out=kit.pinned, blocking=False)),
          docs_host="never"),
    _call("a.get(blocking=False) into pageable", "transfer", "current", "with blocking=False \"the copy runs "
          "asynchronously on the given (if given) or current stream\"; nothing said about pageable memory", ITEM,
          _simple(lambda kit: lambda: kit.x.get(out=kit.pageable_out, blocking=False)), docs_host="never"),
    _call("cupy.asarray(numpy pageable)", "transfer", "current", "blocking defaults to False: \"if a H2D copy is "
          "needed it would run asynchronously on the current stream\"", "cupy.asarray.html", _asarray("pageable"),
          docs_host="never"),
    _call("cupy.asarray(numpy pinned)", "transfer", "current", "blocking defaults to False: \"if a H2D copy is needed "
          "it would run asynchronously on the current stream\"", "cupy.asarray.html", _asarray("pinned"),
          docs_host="never"),
    _call("cupy.asarray(numpy pageable, blocking=True)", "transfer", "current", "with blocking=True \"the copy is "
          "synchronous (with respect to the host)\"", "cupy.asarray.html", _asarray("pageable", True),
          docs_host="stream"),
    _call("a[boolean mask]", "indexing", "current", "boolean-mask indexing; the indexing docs are silent about "
          "waiting (the result's size depends on the data)", ITEM, _simple(lambda kit: lambda: kit.x[kit.mask])),
    _call("a[integer array]", "indexing", "current", "integer-array indexing (a gather); silent about waiting", ITEM,
          _simple(lambda kit: lambda: kit.x[kit.index])),
    _call("a[boolean mask] = 0", "indexing", "current", "boolean-mask assignment; silent about waiting", ITEM,
          _simple(lambda kit: lambda: kit.x.__setitem__(kit.mask, 0))),
    _call("cupy.nonzero(a)", "indexing", "current", SYNCHRONIZES_MAYBE, "cupy.nonzero.html",
          _simple(lambda kit: lambda: cupy.nonzero(kit.mask))),
    _call("cupy.where(condition)", "indexing", "current", "\"This function may synchronize the device if both x and "
          "y are omitted.\"", "cupy.where.html", _simple(lambda kit: lambda: cupy.where(kit.mask))),
    _call("cupy.where(condition, x, y)", "indexing", "current", "may synchronize only \"if both x and y are "
          "omitted\"", "cupy.where.html",
          _simple(lambda kit: lambda: cupy.where(kit.mask, kit.x, 0.0)), docs_host="never"),
    _call("cupy.unique(a)", "indexing", "current", "returns the sorted unique elements; silent about waiting",
          "cupy.unique.html", _simple(lambda kit: lambda: cupy.unique(kit.counts))),
    _call("cupy.histogram(a, bins=100)", "reduction", "current", "computes a histogram; silent about waiting",
          "cupy.histogram.html", _simple(lambda kit: lambda: cupy.histogram(kit.x, bins=100))),
    _call("cupy.bincount(a)", "reduction", "current", "counts occurrences; silent about waiting",
          "cupy.bincount.html", _simple(lambda kit: lambda: cupy.bincount(kit.counts))),
    _call("a.sum()", "reduction", "current", "returns a zero-dimensional array; silent about waiting",
          "cupy.sum.html", _simple(lambda kit: kit.x.sum)),
    _call("cupy.argmax(a)", "reduction", "current", "returns a zero-dimensional array; silent about waiting",
          "cupy.argmax.html", _simple(lambda kit: lambda: cupy.argmax(kit.x))),
    _call("cupy.sort(a)", "compute", "current", "returns a sorted copy; silent about waiting", "cupy.sort.html",
          _simple(lambda kit: lambda: cupy.sort(kit.x))),
    _call("cupy.cumsum(a)", "compute", "current", "returns the cumulative sum; silent about waiting",
          "cupy.cumsum.html", _simple(lambda kit: lambda: cupy.cumsum(kit.x))),
    _call("a * 2 + 1", "compute", "current", "elementwise arithmetic; silent about waiting", ITEM,
          _simple(lambda kit: lambda: kit.x * 2 + 1)),
    _call("matrix @ matrix", "compute", "current", "matrix product (cuBLAS); silent about waiting",
          "cupy.matmul.html", _simple(lambda kit: lambda: kit.matrix @ kit.matrix)),
    _call("cupy.fft.fft(a)", "compute", "current", "a one-dimensional FFT (cuFFT, plan cached); silent about "
          "waiting", "cupy.fft.fft.html", _simple(lambda kit: lambda: cupy.fft.fft(kit.x))),
    _call("cupy.empty(4 MiB) from the pool", "allocation", "current", "allocates from the device memory pool; silent "
          "about waiting", "cupy.empty.html",
          _simple(lambda kit: lambda: cupy.empty(SIZE, dtype="float32"))),
    _call("del a (back to the pool)", "allocation", "current", "a freed array's memory returns to the pool for reuse "
          "on its stream; silent about waiting", "cupy.cuda.MemoryPool.html", _back_to_pool),
    _call("pool.free_all_blocks()", "allocation", "none", "\"Releases free blocks\" of the pool; silent about "
          "waiting", "cupy.cuda.MemoryPool.html", _pool_blocks),
    _call("cupyx.empty_pinned(4 MiB)", "allocation", "none", "allocates pinned host memory (from the pinned memory "
          "pool); silent about waiting", "cupyx.empty_pinned.html",
          _simple(lambda kit: lambda: cupyx.empty_pinned(SIZE, dtype="float32"))),
    _call("cupy.cuda.Stream()", "creation", "none", "creates a CUDA stream; silent about waiting",
          "cupy.cuda.Stream.html", _simple(lambda kit: lambda: cupy.cuda.Stream())),
    _call("cupy.cuda.Event()", "creation", "none", "creates a CUDA event; silent about waiting",
          "cupy.cuda.Event.html", _simple(lambda kit: lambda: cupy.cuda.Event())),
    _call("first call of a new ElementwiseKernel", "compilation", "current", "the kernel is compiled on its first "
          "call (and cached); silent about waiting", "cupy.ElementwiseKernel.html", _elementwise, fresh=True),
    _call("first call of a new RawKernel", "compilation", "current", "the kernel is compiled on its first call (and "
          "cached); silent about waiting", "cupy.RawKernel.html", _raw, fresh=True),
    _call("stream.synchronize()", "synchronization", "current", "control: \"Waits for the stream completing all "
          "queued tasks\"", "cupy.cuda.Stream.html", _stream_sync, docs_host="stream"),
    _call("cupy.cuda.Device().synchronize()", "synchronization", "none", "control: \"Synchronizes the current "
          "thread to the device\"", "cupy.cuda.Device.html",
          _simple(lambda kit: lambda: cupy.cuda.Device().synchronize()), docs_host="device"),
)
