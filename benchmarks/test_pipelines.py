"""The overlap pipeline (256 MiB, kernel = 1 × transfer, pinned): one stream vs 8 streams × 4 chunks; cudaMalloc vs
cudaMallocAsync in a loop; a mallocAsync loop eager vs replayed as a CUDA graph."""

import pytest
from gpu import GATED, UNGATED, run

from bench.platform import cuda  # its stand-ins, not one of them: collecting probes a module's names, which would import numba
from bench.experiments.alloc import LOOP, loop_once, pool_threshold
from bench.experiments.graphs import verified_malloc_loop
from bench.measure.capture import destroy, forked
from bench.measure.pipeline import verified_pipeline
from bench.timing import Context

PAYLOAD = 256 << 20


@pytest.mark.benchmark(timer=GATED)
@pytest.mark.parametrize("streams, chunks_per_stream", [(1, 1), (8, 4)],
                         ids=["pipeline-1stream", "pipeline-8streams-4chunks"])
def test_overlap_pipeline(benchmark, streams, chunks_per_stream):
    benchmark.group = "overlap 256MiB"
    with verified_pipeline(PAYLOAD, streams, chunks_per_stream, 1.0, Context()) as (once, used, stages):
        events: list[int] = []

        def pipeline():
            with forked(GATED.stream, used, events):
                once()
            destroy(events)

        median_s = run(benchmark, GATED, pipeline, rounds=10)
    benchmark.extra_info.update(speedup=stages.serial_ms / (median_s * 1e3),
                                efficiency=stages.bound_ms / (median_s * 1e3), bound_ms=stages.bound_ms,
                                serial_ms=stages.serial_ms, verified=True)


@pytest.mark.benchmark(timer=UNGATED)  # cudaFree waits on the host: no gate
@pytest.mark.parametrize("api, threshold", [("cudaMalloc", "none"), ("cudaMallocAsync", "0"),
                                            ("cudaMallocAsync", "max")],
                         ids=["alloc-loop-cudaMalloc", "alloc-loop-cudaMallocAsync-threshold0",
                              "alloc-loop-cudaMallocAsync-thresholdmax"])
def test_alloc_loop(benchmark, api, threshold):
    benchmark.group = "alloc loop 1MiB"
    kernel = cuda.kernels.MixKernel()
    with pool_threshold(threshold):
        median_s = run(benchmark, UNGATED, lambda: loop_once(api, 1 << 20, UNGATED.stream, kernel), rounds=10)
    benchmark.extra_info.update(iterations=LOOP, gpu_us_per_iteration=median_s * 1e6 / LOOP,
                                host_us_per_iteration=benchmark.extra_info["host_us"] / LOOP)


@pytest.mark.benchmark(timer=GATED)
@pytest.mark.parametrize("way", ["eager", "graph"], ids=["malloc-loop-eager-100x1MiB", "malloc-loop-graph-100x1MiB"])
def test_graph_vs_eager(benchmark, way):
    benchmark.group = "graph vs eager"
    with verified_malloc_loop(1 << 20, 100, cuda.kernels.MixKernel(), GATED.stream) as (eager, replay, _, checked):
        run(benchmark, GATED, eager if way == "eager" else replay)
    benchmark.extra_info.update(checked)
