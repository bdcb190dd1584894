"""What ``CUDA_DEVICE_MAX_CONNECTIONS`` does: how many hardware queues the streams of a context share.

Each value runs in a process of its own that sets the variable before its first CUDA call (``1 after init`` sets it
only after the context exists, which must change nothing). ``spins``: two dependent spin kernels of ``SPIN_MS`` on
each stream, depth-first; the makespan, in spins (``spin_lengths``), and ``peak_kernels`` say how many streams ran
side by side. ``pipeline``: the overlap experiment's pinned pipeline, with its efficiency against the same bound. The
method in full: docs/methodology.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

from bench.platform.cuda import cupy
from bench.experiments import Accuracy, Config, Cost, Experiment, Processes, Row, Sweeps
from bench.measure.pipeline import BOUND_RULE, verified_pipeline
from bench.results.schema import FLOAT, INT, TEXT, column
from bench.timing import Context, Floor, MeasurementFailed, Samples, SpinWatch, StopRule, Summary, peak_concurrency
from bench.platform.vocabulary import (CONNECTIONS_STREAMS, CONNECTIONS_VARIABLE, Clock, Connections, Status,
                                       StopReason, Unit, values)

VARIABLE = CONNECTIONS_VARIABLE
CONNECTIONS = values(Connections)
WORKLOADS = ("spins", "pipeline")
STREAMS = CONNECTIONS_STREAMS  # the views name these too: defined in bench.platform.vocabulary
SPIN_MS = 5.0
REPEATS = 3
PIPELINE_BYTES = 64 << 20
CHUNKS_PER_STREAM = 4

COLUMNS = (
    column("connections", TEXT, f"{VARIABLE} for the process: a number, unset, or '1 after init' (set to 1 after "
                                "the context was created)", CONNECTIONS),
    column("workload", TEXT, "spins (two dependent spin kernels per stream, depth-first) or pipeline (the overlap "
                             "pipeline, pinned)", WORKLOADS),
    column("streams", INT, "non-blocking streams"),
    column("spin_lengths", FLOAT, "spins: median makespan / one spin (2 = every stream ran side by side)"),
    column("peak_kernels", INT, "spins: the most kernels running at once (median over repeats)"),
    column("efficiency", FLOAT, "pipeline: engine-aware bound / makespan"),
)


def before_cuda(connections: str, device: int) -> None:
    if connections.isdigit():
        os.environ[VARIABLE] = connections
    else:
        os.environ.pop(VARIABLE, None)


def lean(config: Config) -> bool:
    """The default sweep: the spins at every stream count for 1, 4, unset (8), 32 and '1 after init'; the pipeline
    at 8 streams for 1 and unset."""
    if config["workload"] == "pipeline":
        return config["connections"] in ("1", "unset") and config["streams"] == 8
    return config["connections"] in ("1", "4", "unset", "32", "1 after init")


def seconds(config: Config, rule: StopRule) -> float:
    if config["workload"] == "pipeline":
        return 0.5 + BOUND_RULE["min_samples"] * 2e-3  # calibration, stages, the bound's copies, samples
    return 0.02 + REPEATS * (config["streams"] + 1) * SPIN_MS / 1e3 / 2


def memory_needed(configs: Sequence[Config]) -> tuple[int, int]:
    return 4 * PIPELINE_BYTES, 4 * PIPELINE_BYTES


# --- measuring code --------------------------------------------------------------------------------------------

def _spins(config: Config, watch: SpinWatch, streams: list) -> Row:
    used = streams[: config["streams"]]
    makespans, peaks = [], []
    for _ in range(REPEATS):
        intervals = watch.depth_first(used, 2, SPIN_MS)
        makespans.append(max(end for _, end in intervals))
        peaks.append(peak_concurrency(intervals))
    samples = Samples(makespans, Unit.MS, Clock.GPU, "makespan of the spins (GPU global timer)", StopReason.MAX_SAMPLES)
    return {**samples.columns(), "spin_lengths": samples.median / SPIN_MS, "peak_kernels": round(Summary.of(peaks).median)}


def _pipeline(config: Config, context: Context) -> Row:
    with verified_pipeline(PIPELINE_BYTES, config["streams"], CHUNKS_PER_STREAM, 1.0, context) as (once, used, stages):
        def enqueue(ops: int) -> None:
            for _ in range(ops):
                once()

        timing = context.timer().measure(enqueue, used, metric="makespan of the pipeline", ops_per_batch=1)
    return {**timing.samples.columns(), "efficiency": stages.bound_ms / timing.median_ms}


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    if configs and configs[0]["connections"] == "1 after init":
        cupy.cuda.runtime.free(cupy.cuda.runtime.malloc(1))  # the context exists now...
        os.environ[VARIABLE] = "1"  # ...so this comes too late
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(max(STREAMS))]
    watch = SpinWatch(slots=2 * max(STREAMS))
    for config in configs:
        row = {**config, "status": Status.OK, "error": ""}
        try:
            measured = _spins(config, watch, streams) if config["workload"] == "spins" else _pipeline(config, context)
        except MeasurementFailed as error:
            yield {**row, **Samples.missing(Unit.MS, Clock.GPU, config["workload"]), "status": Status.FAILED,
                   "error": str(error)}
            continue
        yield {**row, **measured}


EXPERIMENT = Experiment(
    name="connections",
    description=f"{VARIABLE} (1–32, unset, set too late): depth-first spins and the overlap pipeline over N streams",
    axes={"connections": CONNECTIONS, "workload": WORKLOADS, "streams": STREAMS},
    columns=COLUMNS,
    measure=measure,
    order=35,
    sweeps=Sweeps(quick={"connections": ("1",), "workload": ("spins",), "streams": (4,)}, lean=lean, size_axis=""),
    cost=Cost(seconds, memory_needed=memory_needed, share_s=8),
    accuracy=Accuracy(stop_rules={"bound": BOUND_RULE}, floor=Floor(min_samples=REPEATS)),
    processes=Processes(process_axis="connections", before_cuda=before_cuda),
)
