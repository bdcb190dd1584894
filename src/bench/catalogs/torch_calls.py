"""PyTorch calls and what PyTorch's documentation says about them. The call runs with its stream as PyTorch's
current stream (``torch.cuda.stream``). PyTorch is optional (``pip install "cuda-sync-bench[torch]"``): without it
these calls' rows are skipped with the reason."""

from __future__ import annotations

from bench.catalogs import Call, Prepared
from bench.cuda import LazyModule

torch = LazyModule("torch")

DOCS = "https://docs.pytorch.org/docs/stable/"
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


def _call(name, category, stream, docs, page, prepare, docs_host="silent") -> Call:
    return Call(f"torch {name}", "torch", docs_host, docs, page, prepare, category=category, stream=stream)


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
)
