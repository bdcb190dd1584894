"""Host cost of launching a kernel from Python, by launch path.

``dispatcher``: numba-cuda's ``kernel[grid, block, stream](array, ...)``, which types the arguments on every call.
``precompiled``: the numba kernel compiled once for a raw-pointer signature and launched through the compiled kernel
object (what the overlap pipeline uses). ``cupy-raw``: a ``cupy.RawKernel``. ``cuda-core``: ``cuda.core.launch`` of a
kernel compiled by ``cuda.core.Program``. ``cuda-bindings``: ``cuda.bindings.driver.cuLaunchKernel`` with the
argument array packed once, ahead of the loop (the floor for Python). ``graph``: the precompiled launches captured
once into a CUDA graph and replayed; the cost is one graph launch divided by the kernels in it. Each sample times
``LAUNCHES`` launches of a one-block kernel with no work, then waits for the stream untimed, so only the host's cost
is measured. A path whose library is missing is a row with status ``unsupported`` and the reason. The C++ reference
(``scripts/reference_paths.cu``) times the same loop with ``<<<>>>`` and with a graph.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd

from bench.cuda import cupy, kernels, numba_cuda, runtime
from bench.experiments import Config, Experiment, Row
from bench.schema import INT, TEXT, column
from bench.timing import Context, Samples, StopRule

PATHS = ("dispatcher", "precompiled", "cupy-raw", "cuda-core", "cuda-bindings", "graph")
EMPTY = 'extern "C" __global__ void empty(unsigned int *data, long long count, int rounds) {}'
LAUNCHES = 100
METRIC = "host time per kernel launch"

COLUMNS = (
    column("path", TEXT, "dispatcher (numba's default), precompiled (numba's compiled kernel object, raw pointers), "
                         "cupy-raw (cupy.RawKernel), cuda-core (cuda.core.launch), cuda-bindings (cuLaunchKernel, "
                         "arguments packed once), graph (CUDA graph replay, per kernel in it)", PATHS),
    column("launches_per_sample", INT, "launches timed together for one sample"),
)


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    ok = rows[rows["status"] == "ok"]
    return pd.DataFrame({"launch path": ok["path"], "host µs per launch (median)": ok["median"].map("{:.3g}".format)})


def answer(rows: pd.DataFrame) -> str | None:
    """Host µs per launch of each path."""
    table = headline(rows)
    if not len(table):
        return None
    return "host µs per launch: " + ", ".join(
        f"{line['launch path']} {line['host µs per launch (median)']}" for _, line in table.iterrows())


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
    ax.set_title(f"Kernel launch cost from Python on {gpu_label(launch)}")
    return [("launch", figure)]


def seconds(config: Config, rule: StopRule) -> float:
    return 0.02 + 0.55 * rule.time_cap_s  # host samples are noisy: most paths sample half the time cap or more


# --- measuring code --------------------------------------------------------------------------------------------

def launchers(kernel, stream, paths: Sequence[str] = ("dispatcher", "precompiled", "graph")) -> dict:
    """One call per path that makes ``LAUNCHES`` launches of an empty one-block kernel on ``stream``; a path that
    cannot be set up here maps to the reason (a string)."""
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

    made = {"dispatcher": dispatcher, "precompiled": precompiled}
    makers = {"cupy-raw": _cupy_raw, "cuda-core": _cuda_core, "cuda-bindings": _cuda_bindings}
    for path in paths:
        if path in makers:
            try:
                made[path] = makers[path](stream, data)
                made[path]()  # once: a path that fails, fails here
                runtime.deviceSynchronize()
            except Exception as error:  # a missing or different library: reported, not fatal
                made[path] = f"{type(error).__name__}: {error}"
    if "graph" in paths:
        graph = capture(stream, [], precompiled)
        made["graph"] = lambda: graph.launch(stream)
    return made


def _cupy_raw(stream, data):
    function = cupy.RawKernel(EMPTY, "empty")
    count, rounds = np.int64(1), np.int32(0)

    def launch():
        for _ in range(LAUNCHES):
            function((1,), (1,), (data, count, rounds), stream=stream)

    return launch


def _cuda_core(stream, data):
    try:
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
    except ImportError:
        from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch
    device = Device(runtime.getDevice())
    device.set_current()
    program = Program(EMPTY, code_type="c++", options=ProgramOptions(arch=f"sm_{device.arch}"))
    function = program.compile("cubin").get_kernel("empty")
    own = device.create_stream()  # cuda.core launches on its own stream object
    config = LaunchConfig(grid=1, block=1)
    pointer, count, rounds = data.data.ptr, np.int64(1), np.int32(0)

    def launch_all():
        for _ in range(LAUNCHES):
            launch(own, config, function, pointer, count, rounds)
        own.sync()

    return launch_all


def _cuda_bindings(stream, data):
    import ctypes

    from cuda.bindings import driver

    def check(result):
        error, *values = result if isinstance(result, tuple) else (result,)
        if error != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuda.bindings: {error}")
        return values[0] if values else None

    module = check(driver.cuModuleLoadData(kernels.nvrtc_cubin(EMPTY)))
    function = check(driver.cuModuleGetFunction(module, b"empty"))
    values = (ctypes.c_void_p(data.data.ptr), ctypes.c_longlong(1), ctypes.c_int(0))
    packed = (ctypes.c_void_p * 3)(*(ctypes.addressof(value) for value in values))  # packed once
    handle = driver.CUstream(stream.ptr)
    address = ctypes.addressof(packed)

    def launch():
        for _ in range(LAUNCHES):
            driver.cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, handle, address, 0)

    launch.keep = (values, packed, module)  # alive as long as the launcher
    return launch


def launch_samples(context: Context, call, stream) -> Samples:
    """Host µs per launch of ``call`` (one of :func:`launchers`), waiting for the stream untimed after each."""
    return context.host(call, metric=METRIC, unit="us", per_sample=LAUNCHES, after=stream.synchronize)


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    stream = cupy.cuda.Stream(non_blocking=True)
    kernel = kernels.MixKernel()
    calls = launchers(kernel, stream, [config["path"] for config in configs])
    for config in configs:
        call = calls[config["path"]]
        if isinstance(call, str):
            yield {**config, **Samples.missing("us", "host", METRIC), "launches_per_sample": LAUNCHES,
                   "status": "unsupported", "error": call}
            continue
        samples = launch_samples(context, call, stream)
        yield {**config, **samples.columns(), "launches_per_sample": LAUNCHES, "status": "ok", "error": ""}


EXPERIMENT = Experiment(
    name="launch",
    description="host µs per kernel launch from Python: numba dispatcher and precompiled, CuPy RawKernel, cuda.core, "
                "cuda-bindings with prepacked arguments, CUDA graph replay",
    axes={"path": PATHS},
    columns=COLUMNS,
    measure=measure,
    headline=headline,
    answer=answer,
    seconds=seconds,
    figures=(launch_figure,),
    size_axis="",
    order=20,
    share_s=2,
)
