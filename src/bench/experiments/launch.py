"""Host cost of launching a numba-cuda kernel, by launch path.

``dispatcher``: ``kernel[grid, block, stream](array, ...)``, numba's default path, which types the arguments on
every call. ``precompiled``: the kernel compiled once for a raw-pointer signature and launched through the compiled
kernel object (what the overlap pipeline uses). ``graph``: the same launches captured once into a CUDA graph and
replayed; the cost is one graph launch divided by the kernels in it. Each sample times ``LAUNCHES`` launches of a
one-block kernel with no work, then waits for the stream untimed, so only the host's cost is measured.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence

import pandas as pd

from bench.cuda import cupy, kernels, numba_cuda
from bench.experiments import Config, Experiment, Row
from bench.schema import INT, TEXT, column
from bench.timing import Context, Samples, StopRule

PATHS = ("dispatcher", "precompiled", "graph")
LAUNCHES = 100
METRIC = "host time per kernel launch"

COLUMNS = (
    column("path", TEXT, "dispatcher (numba's default), precompiled (compiled kernel object, raw pointers), graph "
                         "(CUDA graph replay, per kernel in it)", PATHS),
    column("launches_per_sample", INT, "launches timed together for one sample"),
)


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    ok = rows[rows["status"] == "ok"]
    return pd.DataFrame({"launch path": ok["path"], "host µs per launch (median)": ok["median"].map("{:.3g}".format)})


def launch_figure(rows: pd.DataFrame, tables: dict) -> list:
    from bench.plots import gpu_label, pyplot

    launch = rows[(rows["experiment"] == "launch") & (rows["status"] == "ok")]
    if not len(launch):
        return []
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(7, 3), constrained_layout=True)
    ax.barh(launch["path"], launch["median"], xerr=[launch["median"] - launch["min"], launch["max"] - launch["median"]],
            color="#1f77b4", ecolor="0.4", capsize=3)
    for y, value in enumerate(launch["median"]):
        ax.text(value, y, f" {value:.3g} µs", va="bottom")
    ax.set_xlabel("host µs per kernel launch (median; whiskers: min–max of samples)")
    ax.invert_yaxis()
    ax.set_title(f"numba-cuda launch cost on {gpu_label(launch)}")
    return [("launch", figure)]


def seconds(config: Config, rule: StopRule) -> float:
    return 0.02 + rule.time_cap_s  # host samples are noisy: sampling runs to the time cap


# --- measuring code --------------------------------------------------------------------------------------------

def launchers(kernel, stream) -> dict:
    """One call per path that makes ``LAUNCHES`` launches of an empty one-block kernel on ``stream``."""
    from bench.capture import capture

    data = cupy.zeros(1, dtype=cupy.uint32)
    array = numba_cuda.as_cuda_array(data)
    handle = kernels.numba_stream(stream.ptr)

    from numba.cuda.core.errors import NumbaPerformanceWarning

    def dispatcher():
        with warnings.catch_warnings():  # one block on purpose: numba's low-occupancy warning does not apply
            warnings.simplefilter("ignore", NumbaPerformanceWarning)
            for _ in range(LAUNCHES):
                kernels.mix_array_kernel[1, 1, handle](array, 0)

    def precompiled():
        for _ in range(LAUNCHES):
            kernel.launch(stream, data.data.ptr, 1, 0)

    graph = capture(stream, [], precompiled)
    return {"dispatcher": dispatcher, "precompiled": precompiled, "graph": lambda: graph.launch(stream)}


def launch_samples(context: Context, call, stream) -> Samples:
    """Host µs per launch of ``call`` (one of :func:`launchers`), waiting for the stream untimed after each."""
    return context.host(call, metric=METRIC, unit="us", per_sample=LAUNCHES, after=stream.synchronize)


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    stream = cupy.cuda.Stream(non_blocking=True)
    kernel = kernels.MixKernel()
    calls = launchers(kernel, stream)
    for config in configs:
        samples = launch_samples(context, calls[config["path"]], stream)
        yield {**config, **samples.columns(), "launches_per_sample": LAUNCHES, "status": "ok", "error": ""}


EXPERIMENT = Experiment(
    name="launch",
    description="host µs per numba-cuda kernel launch: default dispatcher, precompiled, CUDA graph replay",
    axes={"path": PATHS},
    columns=COLUMNS,
    measure=measure,
    headline=headline,
    seconds=seconds,
    figures=(launch_figure,),
    size_axis="",
    order=20,
    share_s=2,
)
