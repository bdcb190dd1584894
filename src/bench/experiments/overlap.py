"""Copy/compute overlap: a payload split into chunks over N streams, each chunk H2D → kernel → D2H on its stream.

Chunks go round-robin over ``streams`` non-blocking streams, ``chunks_per_stream`` each. With ``allocator=malloc``
the chunks live in one device buffer allocated up front; with ``mallocAsync`` every chunk allocates its buffer on its
stream before the upload and frees it after the download, inside the timed loop, as real code does (the device's
default pool, release threshold untouched). ``launch=eager`` enqueues every operation from Python (kernels through
the precompiled path, see the ``launch`` experiment); ``launch=graph`` captures the whole multi-stream pipeline into a
CUDA graph once and times its replays. A combination the runtime will not capture is a row with status
``unsupported`` and the runtime's error text.

The kernel does ``compute_ratio`` × (the pinned one-direction transfer time of the whole payload) of work; its rounds
per element (``kernel_rounds``) are calibrated on the GPU at hand, and the ratio actually reached is recorded.

**The bound.** Each stage of the whole payload is timed alone on one stream, after untimed passes over the fresh
buffers: ``h2d_ms``, ``kernel_ms``, ``d2h_ms`` are medians and ``serial_ms`` is their sum. The bound takes each stage
at its fastest sample, since a lower bound must not inherit a slow moment, and the kernel stage at the faster of the
single whole-payload kernel and the same work split into four chunks per stream over 2, 4 or 8 streams
(``kernel_split_ms``): on the H200, concurrent chunk kernels finish the same work about 8% sooner than one kernel
(the next kernel fills the SMs a finishing one leaves idle), so the single kernel alone gives no lower bound.

With two or more copy engines (``asyncEngineCount``) an upload, a download and kernels can all run at once, but the
two copy directions share the PCIe link, so the copy stages are counted at the rate each direction keeps while the
other one runs (``h2d_duplex_ms``, ``d2h_duplex_ms``: the fastest sample of the whole payload copied both ways at
once). No schedule can finish sooner than ``bound_ms = max(kernel, h2d_duplex_ms, d2h_duplex_ms)``: splitting a
direction's bytes between "alone" and "together" periods only lengthens the copies, because the link moves more in
total when both directions run. With one copy engine the copies serialize: ``bound_ms = max(kernel, h2d_ms +
d2h_ms)``. The bound uses pinned copy times for every row, so pageable rows show what pageable memory costs against
what the hardware can do; their ``serial_ms`` (and so ``speedup``) uses their own pageable stage times. Filling and
draining the pipeline (the first upload and the last download overlap nothing) is not in the bound, so
``efficiency = bound_ms / makespan_ms`` approaches 1 only with enough, small enough chunks.

**Timing.** Pinned pipelines are enqueued behind the gate and timed from the start event to the last stream's end
(``makespan_ms``), so Python's enqueue speed is not in it; ``host_enqueue_ms`` is the host time the enqueue took.
Pageable copies cannot wait behind a closed gate, so those rows are timed from a start event recorded just before
the first enqueue (``gated`` False). Each configuration runs once first with an event before and after every
operation (the ``timeline`` side table, from which ``concurrency`` is computed: the share of the makespan during which
two or more operations run) and with its output checked against the kernel applied to the input.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd

from bench.cuda import cupy
from bench.experiments import Config, Experiment, Row, numbers, span
from bench.measure.launches import launch_samples, launchers
from bench.measure.pipeline import POISON_WORD, Payload, Pipeline, Runner, capture_pipeline
from bench.measure.pipeline import mismatch as pipeline_mismatch
from bench.schema import FLAG, FLOAT, INT, TEXT, column
from bench.timing import Context, MeasurementFailed, Samples, StopRule, concurrency
from bench.units import format_size

METRIC = "GPU time of one pipeline run (makespan)"
AXES = ("total_bytes", "compute_ratio", "host_memory", "allocator", "launch", "chunks_per_stream", "streams")

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
    measurements and the kernel's calibration."""
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
    stages_s = 12 * (3 * copy_s + 4 * kernel_s) if first else 0.0
    if config["host_memory"] == "pageable" and config["streams"] == 1:  # the first pageable row: its stages
        stages_s = 12 * 2 * config["total_bytes"] / 5e9
    return overhead_s + 4 * makespan_s + sampling_s + stages_s


def memory_needed(configs: Sequence[Config]) -> tuple[int, int]:
    largest = max(config["total_bytes"] for config in configs)
    kinds = len({"pinned", *(config["host_memory"] for config in configs)})
    return 6 * largest, 2 * kinds * largest  # four buffers, the random draw's int64 temporary


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Per size × compute ratio × host memory: the most efficient configuration, and one stream's speedup."""
    ok = rows[rows["status"] == "ok"]
    lines = []
    for (total, ratio, host_memory), group in ok.groupby(["total_bytes", "compute_ratio", "host_memory"],
                                                         sort=False):
        best = group.loc[group["efficiency"].idxmax()]
        one_stream = group[group["streams"] == 1]["speedup"]
        lines.append({
            "payload": format_size(int(total)), "compute ratio": f"{ratio:g}", "host memory": host_memory,
            "best configuration": f"{_count(best['streams'], 'stream')} × "
                                  f"{_count(best['chunks_per_stream'], 'chunk')}, {best['allocator']}, {best['launch']}",
            "makespan ms": f"{best['makespan_ms']:.2f}", "bound ms": f"{best['bound_ms']:.2f}",
            "speedup": f"{best['speedup']:.2f}", "efficiency": f"{best['efficiency']:.1%}",
            "1-stream speedup": f"{one_stream.median():.2f}" if len(one_stream) else "—",
        })
    return pd.DataFrame(lines)


def answer(rows: pd.DataFrame) -> str | None:
    """How close the best pinned and pageable pipelines come to the engine-aware bound."""
    table = headline(rows)
    if not len(table):
        return None
    efficiency = numbers(table["efficiency"])
    parts = []
    for memory in ("pinned", "pageable"):
        mine = efficiency[(table["host memory"] == memory).to_numpy()].dropna()
        if len(mine):
            parts.append(f"{memory} {span(mine)}%")
    return "the best pipelines reach, of the engine-aware bound: " + ", ".join(parts) if parts else None


def _count(number, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


OP_COLORS = {"H2D": "#1f77b4", "kernel": "#2ca02c", "D2H": "#d62728", "alloc": "#7f7f7f", "free": "#bcbd22"}
_LINE_STYLES = {1: "-", 4: "--"}


def _slice(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows the figures compare: ok rows of the largest payload, malloc, eager."""
    ok = rows[(rows["experiment"] == "overlap") & (rows["status"] == "ok")]
    ok = ok[ok["total_bytes"] == ok["total_bytes"].max()]
    return ok[(ok["allocator"] == "malloc") & (ok["launch"] == "eager")]


def overlap_figures(rows: pd.DataFrame, tables: dict) -> list:
    """Scaling (speedup and efficiency vs streams), an efficiency heat map, a timeline of 1 stream vs the best."""
    from bench.plots import gpu_label, pyplot

    selected = _slice(rows)
    if not len(selected):
        return []
    plt = pyplot()
    payload = format_size(int(selected["total_bytes"].iloc[0]))
    ratios = sorted(selected["compute_ratio"].unique())
    streams = sorted(int(s) for s in selected["streams"].unique())
    figure, axes = plt.subplots(2, len(ratios), figsize=(5.2 * len(ratios), 8), sharex=True, squeeze=False,
                                constrained_layout=True)
    for column_index, ratio in enumerate(ratios):
        at_ratio = selected[selected["compute_ratio"] == ratio]
        speed_ax, efficiency_ax = axes[0][column_index], axes[1][column_index]
        for (host_memory, chunks), group in at_ratio.groupby(["host_memory", "chunks_per_stream"]):
            group = group.sort_values("streams")
            style = dict(color="#1f77b4" if host_memory == "pinned" else "#ff7f0e",
                         linestyle=_LINE_STYLES.get(int(chunks), ":"), marker="o", markersize=4,
                         label=f"{host_memory}, {chunks} chunk{'s' if chunks > 1 else ''}/stream")
            speed_ax.plot(group["streams"], group["speedup"], **style)
            efficiency_ax.plot(group["streams"], group["efficiency"], **style)
        pinned = at_ratio[at_ratio["host_memory"] == "pinned"]
        if len(pinned):
            best_speedup = (pinned["serial_ms"] / pinned["bound_ms"]).median()
            speed_ax.axhline(best_speedup, color="0.3", linestyle="-.", linewidth=1,
                             label="speedup bound: serial / bound (pinned)")
            speed_ax.annotate(f"{best_speedup:.2f}×", (1, best_speedup), xycoords=("axes fraction", "data"),
                              xytext=(-4, 3), textcoords="offset points", ha="right", fontsize=8, color="0.3")
        efficiency_ax.axhline(1.0, color="0.3", linestyle="-.", linewidth=1, label="bound")
        efficiency_ax.axhline(0.9, color="0.6", linestyle=":", linewidth=1, label="90% of bound")
        speed_ax.set_title(f"kernel = {ratio:g} × one-way transfer time")
        speed_ax.set_ylabel("speedup over serial (×)")
        efficiency_ax.set_ylabel("efficiency: bound / makespan")
        efficiency_ax.set_ylim(0, max(1.05, float(at_ratio["efficiency"].max()) + 0.05))
        for ax in (speed_ax, efficiency_ax):
            ax.set_xscale("log", base=2)
            ax.set_xticks(streams, [str(s) for s in streams])
            ax.grid(True, alpha=0.3)
        efficiency_ax.set_xlabel("streams")
    handles = {}
    for ax in (axes[0][0], axes[1][0]):
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    figure.legend(handles.values(), handles.keys(), loc="outside lower center", ncol=4, fontsize=8)
    figure.suptitle(f"Copy/compute overlap on {gpu_label(selected)}: {payload} payload, chunks H2D → kernel → D2H, "
                    "malloc, eager launches")
    drawn = [("overlap_scaling", figure), ("overlap_heatmap", _heatmap(plt, selected, payload))]
    timeline = tables.get("timeline")
    if timeline is not None and len(timeline):
        drawn.append(("overlap_timeline", _timeline(plt, selected, timeline, payload)))
    return drawn


def _heatmap(plt, selected: pd.DataFrame, payload: str):
    pinned = selected[selected["host_memory"] == "pinned"]
    ratios = sorted(pinned["compute_ratio"].unique())
    figure, axes = plt.subplots(1, len(ratios), figsize=(4.4 * len(ratios), 3.2), squeeze=False,
                                constrained_layout=True)
    image = None
    for ax, ratio in zip(axes[0], ratios):
        grid = pinned[pinned["compute_ratio"] == ratio].pivot_table(
            index="chunks_per_stream", columns="streams", values="efficiency")
        image = ax.imshow(grid.to_numpy(), vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(grid.columns)), [str(c) for c in grid.columns])
        ax.set_yticks(range(len(grid.index)), [str(i) for i in grid.index])
        for (y, x), value in np.ndenumerate(grid.to_numpy()):
            if np.isnan(value):  # not measured (the default sweep's one-stream baseline has one chunk only)
                continue
            ax.text(x, y, f"{value:.0%}", ha="center", va="center", fontsize=7,
                    color="white" if value < 0.6 else "black")
        ax.set_xlabel("streams")
        ax.set_ylabel("chunks per stream")
        ax.set_title(f"kernel = {ratio:g} × transfer")
    if image is not None:
        figure.colorbar(image, ax=axes[0].tolist(), label="efficiency (bound / makespan)")
    figure.suptitle(f"Pinned pipelines, {payload}: efficiency over streams × chunks")
    return figure


def _timeline(plt, selected: pd.DataFrame, timeline: pd.DataFrame, payload: str):
    """Gantt chart per stream: one stream vs the most efficient pinned configuration, kernel = 1 × transfer."""
    pinned = selected[selected["host_memory"] == "pinned"]
    ratio = 1.0 if (pinned["compute_ratio"] == 1.0).any() else pinned["compute_ratio"].iloc[0]
    pinned = pinned[pinned["compute_ratio"] == ratio]
    single = pinned[pinned["streams"] == 1].sort_values("chunks_per_stream").tail(1)
    best = pinned.loc[[pinned["efficiency"].idxmax()]]
    chosen = [row for row in (single, best) if len(row)]
    figure, axes = plt.subplots(len(chosen), 1, figsize=(13, 2.2 + 0.25 * int(best["streams"].iloc[0]) * 2),
                                sharex=True, squeeze=False, constrained_layout=True)
    for ax, row in zip(axes[:, 0], chosen):
        row = row.iloc[0]
        match = np.ones(len(timeline), dtype=bool)
        for key in AXES + ("run_id",):
            match &= (timeline[key] == row[key]).to_numpy(dtype=bool)
        ops = timeline[match]
        for kind, color in OP_COLORS.items():
            group = ops[ops["op"] == kind]
            if len(group):
                ax.barh(group["stream"], group["end_ms"] - group["start_ms"], left=group["start_ms"], height=0.7,
                        color=color, label=kind)
        ax.set_yticks(range(int(row["streams"])))
        ax.set_ylabel("stream")
        ax.invert_yaxis()
        ax.set_title(f"{row['streams']} stream(s) × {row['chunks_per_stream']} chunk(s): makespan "
                     f"{row['makespan_ms']:.2f} ms, efficiency {row['efficiency']:.0%}, "
                     f"concurrency {row['concurrency']:.0%}", fontsize=10)
        ax.grid(True, axis="x", alpha=0.3)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    axes[-1, 0].set_xlabel("ms from the start of the run (timeline run, events around every operation)")
    figure.suptitle(f"Pinned pipeline timeline, {payload}, kernel = {ratio:g} × transfer")
    return figure


# --- measuring code --------------------------------------------------------------------------------------------

def _measure(runner: Runner, config: Config, payload: Payload, expected_error: str | None) -> Row:
    host_memory, launch = config["host_memory"], config["launch"]
    gated = host_memory != "pageable"
    streams = payload.streams[: config["streams"]]
    chunks = config["streams"] * config["chunks_per_stream"]
    base = {**config, **Samples.missing("ms", "gpu", METRIC, gated), "chunks": chunks, "verified": False,
            "status": "failed", "_timeline": []}
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
            row.update(status="unsupported", error=f"graph capture refused: {type(error).__name__}: {error}")
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
        payload.host_out[host_memory].array.view(np.uint32).fill(POISON_WORD)
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
    row.update(timing.samples.columns(), status="ok", makespan_ms=makespan, speedup=stages.serial_ms / makespan,
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
EXPERIMENT = Experiment(
    name="overlap",
    description="chunked H2D → kernel → D2H pipelines over N streams, against the engine-aware bound",
    axes={
        "total_bytes": (256 << 20,),
        "compute_ratio": (0.25, 1.0, 4.0),
        "host_memory": ("pinned", "pageable"),
        "allocator": ("malloc", "mallocAsync"),
        "launch": ("eager", "graph"),
        "chunks_per_stream": (1, 4),
        "streams": STREAMS,
    },
    quick={"total_bytes": (64 << 20,), "compute_ratio": (1.0,), "streams": (1, 4)},
    full={"total_bytes": (256 << 20, 1 << 30), "streams": (1, 2, 3, 4, 8, 16, 32)},
    lean=lean,
    columns=COLUMNS,
    tables={"timeline": TIMELINE},
    measure=measure,
    headline=headline,
    answer=answer,
    seconds=seconds,
    memory_needed=memory_needed,
    figures=(overlap_figures,),
    stop_rules={"default": {"min_samples": 5, "time_cap_s": 0.25}, "stage": {"min_samples": 10, "time_cap_s": 1.0}},
    size_axis="total_bytes",
    order=30,
    share_s=23,
)
