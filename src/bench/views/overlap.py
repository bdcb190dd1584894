"""The ``overlap`` experiment's view: the best pipelines against the engine-aware bound; scaling, heat map and
timeline figures, a set per payload."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pandas as pd

from bench.platform.units import format_size
from bench.views import View, grouped, numbers, ok_rows, peak, span
from bench.platform.vocabulary import Status


AXES = ("total_bytes", "compute_ratio", "host_memory", "allocator", "launch", "chunks_per_stream", "streams")


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Per size × compute ratio × host memory: the most efficient configuration, and one stream's speedup."""
    ok = ok_rows(rows, "total_bytes", "compute_ratio", "host_memory", "allocator", "launch", "chunks_per_stream",
                 "streams", "makespan_ms", "bound_ms", "speedup", "efficiency")
    lines = []
    for (total, ratio, host_memory), group in grouped(ok, "total_bytes", "compute_ratio", "host_memory").items():
        best = peak(group, "efficiency")
        one_stream = [row["speedup"] for row in group if row["streams"] == 1]
        lines.append({
            "payload": format_size(int(total)), "compute ratio": f"{ratio:g}", "host memory": host_memory,
            "best configuration": f"{_count(best['streams'], 'stream')} × "
                                  f"{_count(best['chunks_per_stream'], 'chunk')}, {best['allocator']}, {best['launch']}",
            "makespan ms": f"{best['makespan_ms']:.2f}", "bound ms": f"{best['bound_ms']:.2f}",
            "speedup": f"{best['speedup']:.2f}", "efficiency": f"{best['efficiency']:.1%}",
            "1-stream speedup": f"{_median(one_stream):.2f}" if one_stream else "—",
        })
    return pd.DataFrame(lines)


def answer(rows: pd.DataFrame, table: pd.DataFrame) -> str | None:
    """How close the best pinned and pageable pipelines come to the engine-aware bound."""
    if not len(table):
        return None
    efficiency = numbers(table["efficiency"])
    parts = []
    for memory in ("pinned", "pageable"):
        mine = efficiency[(table["host memory"] == memory).to_numpy()].dropna()
        if len(mine):
            parts.append(f"{memory} {span(mine)}%")
    return "the best pipelines reach, of the engine-aware bound: " + ", ".join(parts) if parts else None


def _median(values: list[float]) -> float:
    """The median of the values not missing (NaN where all are), as pandas takes it."""
    present = [value for value in values if not math.isnan(value)]
    return statistics.median(present) if present else math.nan


def _count(number, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


OP_COLORS = {"H2D": "#1f77b4", "kernel": "#2ca02c", "D2H": "#d62728", "alloc": "#7f7f7f", "free": "#bcbd22"}
_LINE_STYLES = {1: "-", 4: "--"}


def _slice(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows the figures compare: ok rows of the largest payload, malloc, eager."""
    ok = rows[(rows["experiment"] == "overlap") & (rows["status"] == Status.OK)]
    ok = ok[ok["total_bytes"] == ok["total_bytes"].max()]
    return ok[(ok["allocator"] == "malloc") & (ok["launch"] == "eager")]


def overlap_figures(rows: pd.DataFrame, tables: dict) -> list:
    """Scaling (speedup and efficiency vs streams), an efficiency heat map, a timeline of 1 stream vs the best."""
    from bench.analysis.plots import gpu_label, pyplot

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
    drawn = [("overlap_scaling", figure)]
    if not (selected["host_memory"] == "pinned").any():  # the heatmap and the timeline are of pinned pipelines
        return drawn
    drawn.append(("overlap_heatmap", _heatmap(plt, selected, payload)))
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


VIEW = View("overlap", headline, answer, (overlap_figures,), split_axis="total_bytes",
            columns=("allocator", "bound_ms", "chunks_per_stream", "compute_ratio", "concurrency", "efficiency",
                     "host_memory", "launch", "makespan_ms", "serial_ms", "speedup", "streams"),
            tables=("timeline",))
