"""PyTorch calls and what PyTorch's documentation says about them. The call runs with its stream as PyTorch's
current stream (``torch.cuda.stream``). PyTorch is optional (``pip install "cuda-sync-bench[torch]"``): without it
these calls' rows are skipped with the reason. Two Triton kernels' launches come last: Triton launches on PyTorch's
current stream; without Triton those two rows fail with the reason."""

from __future__ import annotations

import functools
import linecache

from bench.catalogs import Call, Prepared, fresh_number
from bench.catalogs.pages import TORCH_DOCS
from bench.platform import lazy

torch = lazy.module("torch")

DOCS = TORCH_DOCS
TENSOR = DOCS + "tensors.html"
TO = DOCS + "generated/torch.Tensor.to.html"
SIZE = 1 << 20
NON_BLOCKING = ("\"When non_blocking is set to True, the function attempts to perform the conversion asynchronously "
                "with respect to the host, if possible. This asynchronous behavior applies to both pinned and pageable "
                "memory.\"")


class Kit:
    """PyTorch inputs: a random float32 tensor, a mask, one element, pageable and pinned host tensors."""

    def __init__(self) -> None:
        generator = torch.Generator(device="cuda").manual_seed(8)
        self.x = torch.rand(SIZE, device="cuda", generator=generator)
        self.one = self.x[0]
        self.small = self.x[:10]
        self.mask = self.x > 0.5
        self.counts = torch.randint(0, 1000, (SIZE,), device="cuda", generator=generator)
        self.matrix = torch.rand(1024, 1024, device="cuda", generator=generator)
        self.host = torch.rand(SIZE)  # pageable
        self.pinned = torch.rand(SIZE).pin_memory()
        self.pinned_out = torch.empty(SIZE, pin_memory=True)
        torch.cuda.synchronize()


def _simple(make):
    return lambda kit, stream: Prepared(call=make(kit))


def _empty_cache(kit, stream) -> Prepared:
    """empty_cache with cached blocks: a few tensors allocated and dropped first."""
    tensors = [torch.empty(SIZE, device="cuda") for _ in range(4)]
    del tensors
    return Prepared(call=torch.cuda.empty_cache)


TRITON_TUTORIAL = "https://triton-lang.org/main/getting-started/tutorials/01-vector-add.html"
TRITON_JIT = "https://triton-lang.org/main/python-api/generated/triton.jit.html"
TRITON_BLOCK = 1024
TRITON_SOURCE = """
@triton.jit
def bench_add(x, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(x + offsets, tl.load(x + offsets, mask=mask) + {constant}.0, mask=mask)
"""


def _triton_kernel(constant: int):
    """A Triton kernel adding ``constant`` to a float32 tensor, made from source text: ``triton.jit`` reads a
    function's source, so the text is registered with linecache under a file name of its own."""
    try:
        import triton
    except ImportError as error:
        raise ImportError(f"Triton is not installed (it comes with PyTorch's CUDA builds on Linux): {error}") from None
    name = f"<bench triton kernel {constant}>"
    source = TRITON_SOURCE.format(constant=constant)
    linecache.cache[name] = (len(source), None, source.splitlines(keepends=True), name)
    namespace = {"__name__": f"bench_triton_{constant}", "triton": triton, "tl": triton.language}
    exec(compile(source, name, "exec"), namespace)
    return namespace["bench_add"]


@functools.cache
def _warm_triton_kernel():
    return _triton_kernel(1)


def _triton_launch(kernel) -> Prepared:
    """``kernel`` over a tensor of its own, launched on PyTorch's current stream (Triton's default)."""
    data = torch.zeros(SIZE, device="cuda")

    def launch():
        kernel[(SIZE // TRITON_BLOCK,)](data, SIZE, BLOCK=TRITON_BLOCK)
    return Prepared(call=launch, keep=data)


def _triton_warm(kit, stream) -> Prepared:
    """The warm kernel, compiled and loaded by a first launch before the measurement."""
    prepared = _triton_launch(_warm_triton_kernel())
    prepared.call()
    return prepared


def _triton_fresh(kit, stream) -> Prepared:
    """A kernel no cache has seen, Triton's on-disk cache included: its source differs by a constant each time."""
    return _triton_launch(_triton_kernel(fresh_number()))


def _call(name, category, stream, docs, page, prepare, docs_host="silent", fresh=False) -> Call:
    return Call(f"torch {name}", "torch", docs_host, docs, page, prepare, category=category, stream=stream,
                fresh=fresh)


CALLS = (
    _call("t.item()", "scalar", "current", "\"Returns the value of this tensor as a standard Python number\"; silent "
          "about waiting", DOCS + "generated/torch.Tensor.item.html", _simple(lambda kit: kit.one.item)),
    _call("t.cpu()", "transfer", "current", "\"Returns a copy of this object in CPU memory\"; silent about waiting",
          DOCS + "generated/torch.Tensor.cpu.html", _simple(lambda kit: kit.x.cpu)),
    _call("t.tolist()", "transfer", "current", "returns the tensor as a (nested) list; silent about waiting",
          DOCS + "generated/torch.Tensor.tolist.html", _simple(lambda kit: kit.small.tolist)),
    _call("t[boolean mask]", "indexing", "current", "boolean-mask indexing; silent about waiting", TENSOR,
          _simple(lambda kit: lambda: kit.x[kit.mask])),
    _call("torch.nonzero(t)", "indexing", "current", "returns the indices of non-zero elements; silent about waiting",
          DOCS + "generated/torch.nonzero.html", _simple(lambda kit: lambda: torch.nonzero(kit.mask))),
    _call("t.to('cuda', non_blocking=True) from pageable", "transfer", "current", NON_BLOCKING, TO,
          _simple(lambda kit: lambda: kit.host.to("cuda", non_blocking=True)), docs_host="never"),
    _call("t.to('cuda', non_blocking=True) from pinned", "transfer", "current", NON_BLOCKING, TO,
          _simple(lambda kit: lambda: kit.pinned.to("cuda", non_blocking=True)), docs_host="never"),
    _call("t.to('cuda') from pageable", "transfer", "current", "non_blocking defaults to False: a synchronous "
          "conversion", TO, _simple(lambda kit: lambda: kit.host.to("cuda"))),
    _call("t.to('cpu', non_blocking=True)", "transfer", "current", NON_BLOCKING + " (into new, pageable memory)", TO,
          _simple(lambda kit: lambda: kit.x.to("cpu", non_blocking=True)), docs_host="never"),
    _call("pinned.copy_(t, non_blocking=True)", "transfer", "current", "\"If non_blocking is True and this copy is "
          "between CPU and GPU, the copy may occur asynchronously with respect to the host\"",
          DOCS + "generated/torch.Tensor.copy_.html",
          _simple(lambda kit: lambda: kit.pinned_out.copy_(kit.x, non_blocking=True)), docs_host="never"),
    _call("torch.unique(t)", "indexing", "current", "returns the unique elements; silent about waiting",
          DOCS + "generated/torch.unique.html", _simple(lambda kit: lambda: torch.unique(kit.counts))),
    _call("t.any()", "reduction", "current", "returns a tensor; silent about waiting",
          DOCS + "generated/torch.any.html", _simple(lambda kit: kit.mask.any)),
    _call("bool(t.any())", "scalar", "current", "the truth value of a one-element tensor; silent about waiting",
          DOCS + "generated/torch.any.html", _simple(lambda kit: lambda: bool(kit.mask.any()))),
    _call("t @ t", "compute", "current", "matrix product (cuBLAS); silent about waiting",
          DOCS + "generated/torch.matmul.html", _simple(lambda kit: lambda: kit.matrix @ kit.matrix)),
    _call("torch.cuda.empty_cache()", "allocation", "none", "\"Release all unoccupied cached memory currently held "
          "by the caching allocator\"; silent about waiting", DOCS + "generated/torch.cuda.empty_cache.html",
          _empty_cache),
    _call("torch.cuda.synchronize()", "synchronization", "none", "control: \"Wait for all kernels in all streams on "
          "a CUDA device to complete\"", DOCS + "generated/torch.cuda.synchronize.html",
          _simple(lambda kit: lambda: torch.cuda.synchronize()), docs_host="device"),
    _call("triton kernel launch (warm)", "launch", "current", "the vector-add tutorial: after the launch \"the kernel "
          "is still running asynchronously\" until torch.cuda.synchronize()", TRITON_TUTORIAL, _triton_warm,
          docs_host="never"),
    _call("triton kernel first call", "compilation", "current", "@triton.jit is a \"Decorator for JIT-compiling a "
          "function using the Triton compiler\" (on its first launch); silent about waiting", TRITON_JIT,
          _triton_fresh, fresh=True),
)
