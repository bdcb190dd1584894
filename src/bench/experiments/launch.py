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

from collections.abc import Iterator, Sequence

from bench.platform.cuda import cupy
from bench.measure import kernels
from bench.experiments import Config, Cost, Experiment, Row, Sweeps
from bench.measure.launches import LAUNCH_METRIC, LAUNCHES, launch_samples, launchers
from bench.results.schema import INT, TEXT, column
from bench.timing import Context, Samples, StopRule
from bench.platform.vocabulary import Clock, Status, Unit

PATHS = ("dispatcher", "precompiled", "cupy-raw", "cuda-core", "cuda-bindings", "graph")
METRIC = LAUNCH_METRIC

COLUMNS = (
    column("path", TEXT, "dispatcher (numba's default), precompiled (numba's compiled kernel object, raw pointers), "
                         "cupy-raw (cupy.RawKernel), cuda-core (cuda.core.launch), cuda-bindings (cuLaunchKernel, "
                         "arguments packed once), graph (CUDA graph replay, per kernel in it)", PATHS),
    column("launches_per_sample", INT, "launches timed together for one sample"),
)


def seconds(config: Config, rule: StopRule) -> float:
    return 0.02 + 0.55 * rule.time_cap_s  # host samples are noisy: most paths sample half the time cap or more


# --- measuring code --------------------------------------------------------------------------------------------

def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    stream = cupy.cuda.Stream(non_blocking=True)
    kernel = kernels.MixKernel()
    calls = launchers(kernel, stream, [config["path"] for config in configs])
    for config in configs:
        call = calls[config["path"]]
        if isinstance(call, str):
            yield {**config, **Samples.missing(Unit.US, Clock.HOST, METRIC), "launches_per_sample": LAUNCHES,
                   "status": Status.UNSUPPORTED, "error": call}
            continue
        samples = launch_samples(context, call, stream)
        yield {**config, **samples.columns(), "launches_per_sample": LAUNCHES, "status": Status.OK, "error": ""}


EXPERIMENT = Experiment(
    name="launch",
    description="host µs per kernel launch from Python: numba dispatcher and precompiled, CuPy RawKernel, cuda.core, "
                "cuda-bindings with prepacked arguments, CUDA graph replay",
    axes={"path": PATHS},
    columns=COLUMNS,
    measure=measure,
    order=20,
    sweeps=Sweeps(size_axis=""),
    cost=Cost(seconds, share_s=2),
)
