"""Copy/compute overlap: a payload split into chunks over N streams, each chunk H2D → kernel → D2H on its stream.

Chunks go round-robin over ``streams`` non-blocking streams, ``chunks_per_stream`` each; the ``allocator``
(``malloc`` up front, or ``mallocAsync`` per chunk in the timed loop), the ``launch`` (``eager`` or one CUDA
``graph``) and the host memory vary, and the kernel does ``compute_ratio`` × the payload's transfer time of work.
``efficiency`` is ``bound_ms`` (the engine-aware lower bound on the makespan, from each stage timed alone:
:mod:`bench.measure.pipeline`) over ``makespan_ms``, timed behind the gate where the copies are pinned; each
configuration also runs once with events around every operation (the ``timeline`` side table) and its output checked.
The model of the bound and the timing in full: docs/methodology.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from bench.platform.cuda import cupy
from bench.experiments import Accuracy, Config, Cost, Experiment, Row, Sweeps
from bench.measure.launches import launch_samples, launchers
from bench.measure.pipeline import BOUND_RULE, Payload, Pipeline, Runner, capture_pipeline
from bench.measure.pipeline import mismatch as pipeline_mismatch
from bench.results.schema import FLAG, FLOAT, INT, TEXT, column
from bench.timing import Context, Floor, MeasurementFailed, Samples, StopRule, concurrency
from bench.platform.vocabulary import Clock, Status, Unit

METRIC = "GPU time of one pipeline run (makespan)"

COLUMNS = (
    column("total_bytes", INT, "payload bytes of one pipeline run"),
    column("compute_ratio", FLOAT, "the kernel's work as a multiple of the whole payload's pinned upload time"),
    column("host_memory", TEXT, "host memory of the payload (pinned or pageable)", ("pinned", "pageable")),
    column("allocator", TEXT, "malloc: chunks in one buffer allocated up front; mallocAsync: each chunk allocated "
                              "and freed on its stream inside the timed loop", ("malloc", "mallocAsync")),
    column("launch", TEXT, "eager: every operation enqueued from Python; graph: a captured CUDA graph replayed",
           ("eager", "graph")),
    column("chunks_per_stream", INT, "chunks each stream carries"),
    column("streams", INT, "non-blocking streams the chunks go round-robin over"),
    column("chunks", INT, "streams × chunks_per_stream"),
    column("chunk_bytes", INT, "bytes of the largest chunk"),
    column("makespan_ms", FLOAT, "median GPU time of one pipeline run"),
    column("speedup", FLOAT, "serial_ms / makespan_ms"),
    column("efficiency", FLOAT, "bound_ms / makespan_ms"),
    column("concurrency", FLOAT, "share of the timeline run's makespan during which two or more operations ran"),
    column("serial_ms", FLOAT, "h2d_ms + kernel_ms + d2h_ms"),
    column("bound_ms", FLOAT, "the engine-aware lower bound on the makespan"),
    column("h2d_ms", FLOAT, "median time of the whole payload's upload alone, in this row's host memory"),
    column("kernel_ms", FLOAT, "median time of the kernel over the whole payload alone"),
    column("d2h_ms", FLOAT, "median time of the whole payload's download alone, in this row's host memory"),
    column("h2d_duplex_ms", FLOAT, "fastest upload of the whole payload while a download runs (pinned)"),
    column("d2h_duplex_ms", FLOAT, "fastest download of the whole payload while an upload runs (pinned)"),
    column("kernel_split_ms", FLOAT, "fastest time of the kernel work split into chunks over 2, 4 or 8 streams"),
    column("kernel_rounds", INT, "rounds per element the kernel was calibrated to"),
    column("compute_ratio_measured", FLOAT, "kernel_ms / the pinned upload's median"),
    column("host_enqueue_ms", FLOAT, "median host time to enqueue (or, for a graph, launch) one run"),
    column("launch_host_us", FLOAT, "host µs per kernel launch on this row's path (precompiled or graph)"),
    column("verified", FLAG, "the output equalled the kernel applied to the input, word for word"),
)
TIMELINE = (
    column("stream", INT, "stream index"),
    column("chunk", INT, "chunk index"),
    column("op", TEXT, "the operation", ("alloc", "H2D", "kernel", "D2H", "free")),
    column("start_ms", FLOAT, "start, ms after the run's first event"),
    column("end_ms", FLOAT, "end, ms after the run's first event"),
)


# --- description ---------------------------------------------------------------------------------------------

def lean(config: Config) -> bool:
    """The default sweep: pinned pipelines at 4, 8 and 32 streams, and one pinned pipeline on a single stream (the
    serial baseline: one stream overlaps nothing, whatever its allocator, launch or chunks); pageable ones at a few
    points (they all overlap almost nothing). --full runs all."""
    variant = (config["allocator"], config["launch"], config["chunks_per_stream"])
    if config["host_memory"] == "pinned":
        if config["streams"] == 1:
            return variant == ("malloc", "eager", 1)
        return config["streams"] in (4, 8, 32)  # --full adds 2, 3 and 16
    return variant == ("malloc", "eager", 4) and config["streams"] in (1, 4)


def seconds(config: Config, rule: StopRule) -> float:
    """Expected wall time: a timeline run, a verification, a first and a warm-up run, then ``min_samples`` timed
    runs of a pipeline whose makespan is about max(kernel, duplex copies); pageable pipelines run at about a tenth
    of the link and sample up to the time cap. The first configuration of a compute ratio also pays for the stage
    measurements and the kernel's calibration; the bound's copies (BOUND_RULE, once per total size) are shared out
    over the sweep's compute ratios."""
    copy_s = config["total_bytes"] / 50e9
    kernel_s = config["compute_ratio"] * copy_s
    makespan_s = max(kernel_s, copy_s * 0.95)
    sampling_s = rule.min_samples * makespan_s
    if config["host_memory"] == "pageable":
        makespan_s = config["total_bytes"] / 5e9 + kernel_s
        sampling_s = max(rule.min_samples * makespan_s, rule.time_cap_s)
    overhead_s = 0.02 + 0.0004 * config["streams"] * config["chunks_per_stream"]
    first = (config["host_memory"], config["allocator"], config["launch"], config["chunks_per_stream"],
             config["streams"]) == ("pinned", "malloc", "eager", 1, 1)
    bound_s = BOUND_RULE["min_samples"] * (1.1 * copy_s + 3e-4) / len(RATIOS)
    stages_s = 12 * (3 * copy_s + 4 * kernel_s) + bound_s if first else 0.0
    if config["host_memory"] == "pageable" and config["streams"] == 1:  # the first pageable row: its stages
        stages_s = 12 * 2 * config["total_bytes"] / 5e9
    return overhead_s + 4 * makespan_s + sampling_s + stages_s


def memory_needed(configs: Sequence[Config]) -> tuple[int, int]:
    largest = max(config["total_bytes"] for config in configs)
    kinds = len({"pinned", *(config["host_memory"] for config in configs)})
    return 6 * largest, 2 * kinds * largest  # four buffers, the random draw's int64 temporary


# --- measuring code --------------------------------------------------------------------------------------------

def _measure(runner: Runner, config: Config, payload: Payload, expected_error: str | None) -> Row:
    host_memory, launch = config["host_memory"], config["launch"]
    gated = host_memory != "pageable"
    streams = payload.streams[: config["streams"]]
    chunks = config["streams"] * config["chunks_per_stream"]
    base = {**config, **Samples.missing(Unit.MS, Clock.GPU, METRIC, gated), "chunks": chunks, "verified": False,
            "status": Status.FAILED, "_timeline": []}
    if payload.total_bytes % 4 or payload.total_bytes // 4 < chunks:
        return {**base, "error": f"{payload.total_bytes} bytes do not split into {chunks} chunks of whole "
                                 "4-byte words"}
    stages = runner.stages(payload, config["compute_ratio"], host_memory)
    pipeline = Pipeline(runner.kernel, payload, streams, host_memory, config["allocator"], chunks,
                        stages.kernel_rounds)
    row = {**base, **stages.columns(), "chunk_bytes": max(size for _, size in pipeline.chunks),
           "launch_host_us": runner.launch_us["graph" if launch == "graph" else "precompiled"], "error": ""}
    if expected_error:
        row["error"] = expected_error
        return row
    if launch == "graph":
        try:
            graph = capture_pipeline(streams, pipeline)
        except Exception as error:  # CuPy's or numba's error for work the runtime will not capture
            row.update(status=Status.UNSUPPORTED, error=f"graph capture refused: {type(error).__name__}: {error}")
            return row
        streams = streams[:1]

        def enqueue(ops: int) -> None:
            for _ in range(ops):
                graph.launch(streams[0])
    else:
        def enqueue(ops: int) -> None:
            for _ in range(ops):
                pipeline.enqueue(None)
    try:
        payload.poison(host_memory)
        if launch == "graph":
            runner.timer.run_once(enqueue, streams, gated=gated)
        else:
            runner.timer.run_once(lambda ops: pipeline.enqueue(runner.timeline), streams, gated=gated)
            row["_timeline"] = runner.timeline.read()
            row["concurrency"] = concurrency([(op["start_ms"], op["end_ms"]) for op in row["_timeline"]])
        problem = pipeline_mismatch(payload, host_memory)
        if problem:
            row["error"] = problem
            return row
        row["verified"] = True
        timing = runner.timer.measure(enqueue, streams, metric=METRIC, gated=gated, ops_per_batch=1)
    except MeasurementFailed as error:
        row["error"] = str(error)
        return row
    makespan = timing.median_ms
    row.update(timing.samples.columns(), status=Status.OK, makespan_ms=makespan, speedup=stages.serial_ms / makespan,
               efficiency=stages.bound_ms / makespan, host_enqueue_ms=timing.enqueue_median_ms)
    return row


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    """Rows one total size at a time (its buffers allocated once), stage times and calibration cached."""
    runner = Runner(context)
    try:
        stream = cupy.cuda.Stream(non_blocking=True)
        calls = launchers(runner.kernel, stream)
        runner.launch_us = {path: launch_samples(context, calls[path], stream).median
                            for path in ("precompiled", "graph")}
        for total in dict.fromkeys(config["total_bytes"] for config in configs):
            group = [config for config in configs if config["total_bytes"] == total]
            kinds = ["pinned", *sorted({c["host_memory"] for c in group} - {"pinned"})]
            with Payload(total, kinds, max(c["streams"] for c in group)) as payload:
                for ratio in dict.fromkeys(config["compute_ratio"] for config in group):
                    rounds = runner.calibrate(payload, ratio)[0]
                    expected_error = runner.prepare_expected(payload, rounds)
                    for config in (c for c in group if c["compute_ratio"] == ratio):
                        yield _measure(runner, config, payload, expected_error)
    finally:
        runner.timeline.close()


STREAMS = (1, 2, 4, 8, 16, 32)
RATIOS = (0.25, 1.0, 4.0)
EXPERIMENT = Experiment(
    name="overlap",
    description="chunked H2D → kernel → D2H pipelines over N streams, against the engine-aware bound",
    axes={
        "total_bytes": (256 << 20,),
        "compute_ratio": RATIOS,
        "host_memory": ("pinned", "pageable"),
        "allocator": ("malloc", "mallocAsync"),
        "launch": ("eager", "graph"),
        "chunks_per_stream": (1, 4),
        "streams": STREAMS,
    },
    columns=COLUMNS,
    measure=measure,
    tables={"timeline": TIMELINE},
    order=30,
    sweeps=Sweeps(
        quick={"total_bytes": (64 << 20,), "compute_ratio": (1.0,), "streams": (1, 4)},
        full={"total_bytes": (256 << 20, 1 << 30), "streams": (1, 2, 3, 4, 8, 16, 32)},
        lean=lean,
        size_axis="total_bytes",
    ),
    cost=Cost(seconds, memory_needed=memory_needed, share_s=23),
    accuracy=Accuracy(
        stop_rules={"default": {"min_samples": 5, "time_cap_s": 0.25}, "stage": {"min_samples": 10, "time_cap_s": 1.0},
                    "bound": BOUND_RULE},
        floor=Floor(min_samples=5),  # whole pipelines, each its stages' copies and kernels
    ),
)
