"""First-call blocking: does loading (or compiling) a kernel wait for a kernel already running on another stream?

Each ``module_loading`` (``lazy``, ``eager``) runs in a process of its own with ``CUDA_MODULE_LOADING`` set before
its first CUDA call. Each repeat loads a cubin (compiled once per process with NVRTC) anew and times its steps in turn
while a spin kernel runs on another stream: ``module-load``, ``get-function``, ``first-launch``, ``second-launch``
(the control), and ``numba-first-call`` and ``cupy-first-compile`` (in ``--full``). Verdicts as in ``blocking``; the
spin lasts ``SPIN_MS`` or four times the step's own host time. The method in full: docs/methodology.md.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from bench.platform.cuda import cupy, runtime
from bench.measure import kernels
from bench.experiments import Accuracy, Config, Cost, Experiment, Processes, Row, Sweeps
from bench.measure import columns
from bench.measure.verdicts import (HOST_VERDICTS, MIN_REPEATS, host_columns, host_verdict, repeat_until_settled,
                                    spin_for)
from bench.results.schema import FLOAT, TEXT, column
from bench.timing import Context, Floor, SpinWatch, StopRule, host_interval
from bench.timing.kernels import nvrtc_cubin
from bench.platform.vocabulary import Clock, FirstCall, ModuleLoading, Status, Unit, values

VERDICTS = HOST_VERDICTS
LOADING = values(ModuleLoading)
CALLS = values(FirstCall)
COMPILING = ("numba-first-call", "cupy-first-compile")
KERNEL = 'extern "C" __global__ void untouched(int *out) { if (out) out[0] = 1; }'
METRIC = "host time of the step while a kernel runs on another stream"

COLUMNS = (
    column("module_loading", TEXT, "CUDA_MODULE_LOADING for the process", LOADING),
    column("call", TEXT, "the step timed (see the experiment's description)", CALLS),
    column("idle_host_ms", FLOAT, "the step's host time with nothing running"),
    column("spin_ms", FLOAT, "length of the spin on the other stream"),
    column("host_ms", FLOAT, "median host time of the step while the spin ran"),
    column("spin_left_ms", FLOAT, "median of how much of the spin was left when the step was made"),
    *columns.verdict_columns(VERDICTS),
    columns.STABLE,
)


def before_cuda(loading: str, device: int) -> None:
    os.environ["CUDA_MODULE_LOADING"] = loading.upper()


def lean(config: Config) -> bool:
    """Compiling steps (hundreds of ms each, with spins four times as long) only in --full."""
    return config["call"] not in COMPILING


def seconds(config: Config, rule: StopRule) -> float:
    if config["call"] in COMPILING:
        return 4.0
    return 0.01 + 3 * 0.008


# --- measuring code --------------------------------------------------------------------------------------------

@dataclass
class _Step:
    """The step to time, and what must happen (untimed) before it."""

    prepare: Callable[[], None]
    call: Callable[[], object]


class _Steps:
    """Fresh modules and kernels, one per repeat."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.cubin = nvrtc_cubin(KERNEL)
        self.out = cupy.zeros(1, dtype=cupy.int32)
        self._count = itertools.count()

    def step(self, call: str) -> _Step:
        state: dict = {}
        module = cupy.cuda.function.Module()

        def load():
            module.load(self.cubin)

        def get():
            state["function"] = module.get_function("untouched")

        def launch():
            state["function"]((1,), (1,), (self.out,), stream=self.stream)

        if call == "module-load":
            return _Step(lambda: None, load)
        if call == "get-function":
            return _Step(load, get)
        if call == "first-launch":
            return _Step(lambda: (load(), get()), launch)
        if call == "second-launch":
            return _Step(lambda: (load(), get(), launch(), self.stream.synchronize()), launch)
        number = next(self._count)
        if call == "numba-first-call":
            kernel = _numba_kernel(number)
            array = cupy.zeros(1, dtype=cupy.int32)
            return _Step(lambda: None, lambda: kernel[1, 1, kernels.numba_stream(self.stream.ptr)](array))
        name = f"fresh_{os.getpid()}_{number}"  # new source: compiled, not found in CuPy's caches
        kernel = cupy.RawKernel(KERNEL.replace("untouched", name), name)
        return _Step(lambda: None, lambda: kernel((1,), (1,), (self.out,), stream=self.stream))


def _numba_kernel(number: int):
    from numba import cuda

    def body(out):
        out[0] = number

    return cuda.jit(body)


def _measure(config: Config, steps: _Steps, watch: SpinWatch, spinning) -> Row:
    probe = steps.step(config["call"])
    probe.prepare()
    idle_ms, _ = host_interval(probe.call)
    runtime.deviceSynchronize()
    spin_ms = spin_for(idle_ms)

    def once():
        step = steps.step(config["call"])
        step.prepare()
        runtime.deviceSynchronize()
        return watch.call_during_spin(spinning, spin_ms, step.call)

    repeats = repeat_until_settled(once, host_verdict)
    samples = repeats.samples([seen.host_ms for seen in repeats.seen], Unit.MS, Clock.HOST, METRIC)
    return {**config, **samples.columns(), **host_columns(repeats), "idle_host_ms": idle_ms, "spin_ms": spin_ms,
            "status": Status.OK, "error": ""}


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    stream = cupy.cuda.Stream(non_blocking=True)
    spinning = cupy.cuda.Stream(non_blocking=True)
    steps = _Steps(stream)
    watch = SpinWatch()
    for config in configs:
        yield _measure(config, steps, watch, spinning)


EXPERIMENT = Experiment(
    name="firstcall",
    description="CUDA_MODULE_LOADING lazy vs eager: module load, first launch, numba's first call and CuPy's first "
                "compile while a kernel runs on another stream",
    axes={"module_loading": LOADING, "call": CALLS},
    columns=COLUMNS,
    measure=measure,
    outcome=("verdict",),
    order=45,
    sweeps=Sweeps(
        quick={"module_loading": ("lazy",), "call": ("first-launch", "second-launch")},
        lean=lean,
        size_axis="",
    ),
    cost=Cost(seconds, share_s=2),
    accuracy=Accuracy(floor=Floor(min_samples=MIN_REPEATS)),  # its verdict's repeats
    processes=Processes(own_gpu=True, process_axis="module_loading", before_cuda=before_cuda),
)
