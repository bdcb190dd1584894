"""Host cost of launching a numba-cuda kernel, by launch path.

``dispatcher``: ``kernel[grid, block, stream](array, ...)``, numba's default path, which types the arguments on
every call. ``precompiled``: the kernel compiled once for a raw-pointer signature and launched through the compiled
kernel object (what the overlap pipeline uses). ``graph``: the same launches captured once into a CUDA graph and
replayed; the cost is one graph launch divided by the kernels in it. Each sample times ``LAUNCHES`` launches of a
one-block kernel with no work, so the GPU keeps up and only the host's cost is measured.
"""

from __future__ import annotations

import statistics
import warnings
from collections.abc import Iterator, Sequence

import cupy
import pandas as pd
from numba import cuda
from numba.cuda.core.errors import NumbaPerformanceWarning

from bench.capture import capture
from bench.experiments import Config, Experiment, Row
from bench.kernels import MixKernel, mix_array_kernel, numba_stream
from bench.timing import host_samples_ms

PATHS = ("dispatcher", "precompiled", "graph")
LAUNCHES = 100
REPEATS = 30


def launch_costs_us(kernel: MixKernel, stream, paths: Sequence[str] = PATHS) -> dict[str, list[float]]:
    """Host µs per launch, one list of samples per path."""
    data = cupy.zeros(1, dtype=cupy.uint32)
    array = cuda.as_cuda_array(data)
    handle = numba_stream(stream.ptr)

    def dispatcher():
        with warnings.catch_warnings():  # one block on purpose: numba's low-occupancy warning does not apply
            warnings.simplefilter("ignore", NumbaPerformanceWarning)
            for _ in range(LAUNCHES):
                mix_array_kernel[1, 1, handle](array, 0)

    def precompiled():
        for _ in range(LAUNCHES):
            kernel.launch(stream, data.data.ptr, 1, 0)

    launchers = {"dispatcher": dispatcher, "precompiled": precompiled}
    if "graph" in paths:
        graph = capture(stream, [], precompiled)
        launchers["graph"] = lambda: graph.launch(stream)
    return {
        path: [ms * 1e3 / LAUNCHES for ms in host_samples_ms(launchers[path], repeats=REPEATS, warmup=2,
                                                              after=stream.synchronize)]
        for path in paths
    }


def run(configs: Sequence[Config], timer) -> Iterator[Row]:
    stream = cupy.cuda.Stream(non_blocking=True)
    kernel = MixKernel()
    costs = launch_costs_us(kernel, stream, [config["path"] for config in configs])
    for config in configs:
        samples = costs[config["path"]]
        yield {**config, "launches_per_sample": LAUNCHES, "host_us_samples": samples,
               "host_us_per_launch": statistics.median(samples), "min_us": min(samples), "max_us": max(samples),
               "status": "ok", "error": ""}


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"launch path": rows["path"],
                         "host µs per launch (median)": rows["host_us_per_launch"].map("{:.3g}".format)})


EXPERIMENT = Experiment(
    name="launch",
    description="host µs per numba-cuda kernel launch: default dispatcher, precompiled, CUDA graph replay",
    axes={"path": PATHS},
    run=run,
    memory_needed=lambda configs: (0, 0),
    headline=headline,
    size_axis="",
)
