"""What the pytest fixtures cost a test: the host time of ``with assert_async():`` and ``with assert_overlap():``
around a region, after the first use in the process, against the same region without them (``extra_info``:
``region_ms``, the region's own median; ``cost_ms``, the fixture's median less it; ``cost_per_region``, that cost
over the region's time).

The region: CuPy matrix products on the current stream (``assert_async``: queued only, nothing waits), and for
``assert_overlap`` an upload, the products and a download of pinned memory on one stream, waited for at its end.
Host wall-clock time: what the fixtures cost is the test's time, not the GPU's."""

import ctypes
import statistics
import time

import pytest

from bench.pytest_plugin import assert_async, assert_overlap

ROUNDS = 10
PRODUCTS = 8  # 2048 × 2048 float32 products: a few milliseconds of GPU work


def _region(copies: bool):
    """The region (and its inputs, made once)."""
    import cupy

    a = cupy.random.standard_normal((2048, 2048), dtype=cupy.float32)
    host = cupy.cuda.alloc_pinned_memory(a.nbytes)
    staged = cupy.empty_like(a)

    pinned = ctypes.c_void_p(host.ptr)  # what CuPy's copies to and from host memory take

    def region() -> None:
        if copies:
            staged.data.copy_from_host_async(pinned, a.nbytes)
        out = a
        for _ in range(PRODUCTS):
            out = out @ a
        if copies:
            out.data.copy_to_host_async(pinned, a.nbytes)
            cupy.cuda.get_current_stream().synchronize()

    region()  # cuBLAS made and its kernels loaded (loading waits for the GPU): not under a fixture
    cupy.cuda.runtime.deviceSynchronize()
    return region


def _own_ms(region) -> float:
    """The region's own host time (its work waited for), median of ``ROUNDS``."""
    import cupy

    times = []
    for _ in range(ROUNDS):
        began = time.perf_counter()
        region()
        cupy.cuda.runtime.deviceSynchronize()
        times.append((time.perf_counter() - began) * 1e3)
    return statistics.median(times)


@pytest.mark.parametrize("fixture", ["assert_async", "assert_overlap"])
def test_fixture_cost(benchmark, fixture):
    import cupy

    benchmark.group = "pytest fixtures"
    region = _region(copies=fixture == "assert_overlap")
    guard = assert_async if fixture == "assert_async" else assert_overlap

    def guarded() -> None:
        with guard():
            region()
        cupy.cuda.runtime.deviceSynchronize()

    guarded()  # the first use: the hold, CUPTI and their kernels made
    own_ms = _own_ms(region)
    benchmark.pedantic(guarded, rounds=ROUNDS, warmup_rounds=1)
    cost_ms = benchmark.stats.stats.median * 1e3 - own_ms
    benchmark.extra_info.update(region_ms=own_ms, cost_ms=cost_ms, cost_per_region=cost_ms / own_ms,
                                timer="host wall-clock time (time.perf_counter)")
