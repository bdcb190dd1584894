"""Results → figures (PNG and SVG). Works on DataFrames alone and never imports CUDA."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FixedLocator, NullFormatter  # noqa: E402

from bench.env import pcie_gbps_per_direction  # noqa: E402
from bench.units import format_size  # noqa: E402

DIRECTION_COLORS = {"H2D": "#1f77b4", "D2H": "#d62728", "BIDIR": "#2ca02c", "D2D": "#9467bd"}
HOST_STYLES = {"pinned": ("-", "o"), "registered": ("--", "s"), "pageable": (":", "^"), "device": ("-", "D")}


def _size_axis(ax, sizes: np.ndarray) -> None:
    """log2 x axis: a label every other power of two, human units."""
    ax.set_xscale("log", base=2)
    powers = np.unique(sizes)
    labelled = powers[::2] if len(powers) > 10 else powers
    ax.xaxis.set_major_locator(FixedLocator(labelled))
    ax.xaxis.set_minor_locator(FixedLocator(powers))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(labelled, [format_size(int(size)) for size in labelled], rotation=45, ha="right")
    ax.set_xlabel("transfer size")


def plot_bandwidth(rows: pd.DataFrame, out_dir: Path, tables: dict) -> list[Path]:
    """GB/s vs size: host↔device on the left with the PCIe link's theoretical rate, device↔device on the right."""
    rows = rows[rows["experiment"] == "bandwidth"]
    ok = rows[rows["status"] == "ok"]
    env = rows.iloc[0]
    figure, (pcie_ax, device_ax) = plt.subplots(
        1, 2, figsize=(14, 7.2), gridspec_kw={"width_ratios": [2.3, 1]}, constrained_layout=True
    )
    for (direction, host_memory), group in ok.groupby(["direction", "host_memory"], sort=False):
        group = group.sort_values("bytes")
        ax = device_ax if direction == "D2D" else pcie_ax
        linestyle, marker = HOST_STYLES.get(host_memory, ("-", "o"))
        color = DIRECTION_COLORS.get(direction, "k")
        copies = 2 if direction == "BIDIR" else 1
        label = f"{direction} {host_memory}" + (" (sum of both)" if direction == "BIDIR" else "")
        ax.plot(group["bytes"], group["gbps"], linestyle=linestyle, marker=marker, markersize=4, color=color,
                label=label)
        # Samples' range as a band: the slowest sample gives the lowest rate.
        ax.fill_between(group["bytes"], copies * group["bytes"] / (group["max_ms"] * 1e6),
                        copies * group["bytes"] / (group["min_ms"] * 1e6), color=color, alpha=0.12, linewidth=0)
    link = pcie_gbps_per_direction(int(env["pcie_gen_max"]), int(env["pcie_width_max"]))
    if link:
        name = f"PCIe Gen{int(env['pcie_gen_max'])} x{int(env['pcie_width_max'])}"
        pcie_ax.axhline(link, color="0.3", linestyle="-.", linewidth=1,
                        label=f"{name} theoretical, one direction ({link:.1f} GB/s)")
        pcie_ax.axhline(2 * link, color="0.6", linestyle="-.", linewidth=1,
                        label=f"{name} theoretical, both directions ({2 * link:.1f} GB/s)")
    l2_bytes = int(env.get("l2_cache_bytes", 0) or 0)
    if l2_bytes and (ok["direction"] == "D2D").any():
        # Repeated copies between two buffers that together fit in L2 measure the cache, not device memory.
        device_ax.axvline(l2_bytes / 2, color="0.5", linestyle=":", linewidth=1,
                          label=f"source + destination = L2 ({l2_bytes / 1e6:.0f} MB):\ncache-assisted to the left")
    for ax, title in ((pcie_ax, "Host ↔ device (cudaMemcpyAsync)"), (device_ax, "Device → device")):
        ax.set_title(title)
        ax.set_ylabel("GB/s (10⁹ bytes/s), median")
        ax.set_ylim(bottom=0)
        ax.grid(True, which="major", alpha=0.3)
        if len(ok):
            _size_axis(ax, ok["bytes"].to_numpy())
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3 if ax is pcie_ax else 1)
    failed = int((rows["status"] != "ok").sum())
    figure.suptitle(
        f"Copy bandwidth on {env['gpu_name']} — driver {env['driver_version']}, CUDA runtime {env['cuda_runtime']}, "
        f"link now Gen{env['pcie_gen']} x{env['pcie_width']}"
        + (f" — {failed} configuration(s) failed, not shown" if failed else "")
    )
    figure.supxlabel("band: min–max of samples; pageable copies are timed without the gate, so their time includes "
                     f"the host's staging work.   run {env['run_id']}, commit {str(env['git_commit'])[:12]}",
                     fontsize=7, color="0.4")
    return _save(figure, Path(out_dir) / "bandwidth")


def _save(figure, stem: Path) -> list[Path]:
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    figure.savefig(paths[0], dpi=150)
    figure.savefig(paths[1])
    plt.close(figure)
    return paths


def plot_results(rows: pd.DataFrame, out_dir: Path, tables: dict | None = None) -> list[Path]:
    """Every figure the results (and their side tables, e.g. ``timeline``) support; returns the files written."""
    plotters = (({"bandwidth"}, plot_bandwidth), ({"launch"}, plot_launch), ({"overlap"}, plot_overlap),
                ({"blocking", "serialization"}, plot_truth_table), ({"alloc"}, plot_alloc))
    present = set(rows["experiment"].unique())
    paths: list[Path] = []
    for experiments, plotter in plotters:
        if experiments & present:
            paths += plotter(rows, out_dir, tables or {})
    return paths


OP_COLORS = {"H2D": "#1f77b4", "kernel": "#2ca02c", "D2H": "#d62728", "alloc": "#7f7f7f", "free": "#bcbd22"}
_LINE_STYLES = {1: "-", 4: "--"}


_OVERLAP_COUNTS = ["total_bytes", "streams", "chunks_per_stream", "chunks"]


def _overlap_slice(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows the overlap figures compare: ok rows of the largest payload, malloc, eager (counts as integers:
    a results file that also holds other experiments stores them as nullable floats)."""
    ok = rows[(rows["experiment"] == "overlap") & (rows["status"] == "ok")]
    ok = ok.astype({column: "int64" for column in _OVERLAP_COUNTS if column in ok.columns})
    ok = ok[ok["total_bytes"] == ok["total_bytes"].max()]
    return ok[(ok["allocator"] == "malloc") & (ok["launch"] == "eager")]


def plot_overlap(rows: pd.DataFrame, out_dir: Path, tables: dict) -> list[Path]:
    """Scaling (speedup and efficiency vs streams), a timeline of 1 stream vs the best, an efficiency heat map."""
    selected = _overlap_slice(rows)
    if not len(selected):
        return []
    env = selected.iloc[0]
    payload = format_size(int(env["total_bytes"]))
    ratios = sorted(selected["compute_ratio"].unique())
    figure, axes = plt.subplots(2, len(ratios), figsize=(5.2 * len(ratios), 8), sharex=True, squeeze=False,
                                constrained_layout=True)
    for column, ratio in enumerate(ratios):
        at_ratio = selected[selected["compute_ratio"] == ratio]
        speed_ax, efficiency_ax = axes[0][column], axes[1][column]
        for (host_memory, chunks), group in at_ratio.groupby(["host_memory", "chunks_per_stream"]):
            group = group.sort_values("streams")
            style = dict(color="#1f77b4" if host_memory == "pinned" else "#ff7f0e",
                         linestyle=_LINE_STYLES.get(chunks, ":"), marker="o", markersize=4,
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
        if (at_ratio["efficiency"] > 1).any():  # shown, not clipped: it means the bound is not tight here
            efficiency_ax.text(0.02, 0.03, "above 1: the pipeline beat the isolated-stage bound\n"
                               "(concurrent kernels outrun one kernel; see README)",
                               transform=efficiency_ax.transAxes, fontsize=7, color="0.3")
        for ax in (speed_ax, efficiency_ax):
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted(selected["streams"].unique()), [str(s) for s in sorted(selected["streams"].unique())])
            ax.grid(True, alpha=0.3)
        efficiency_ax.set_xlabel("streams")
    handles = {}
    for ax in (axes[0][0], axes[1][0]):
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    figure.legend(handles.values(), handles.keys(), loc="outside lower center", ncol=4, fontsize=8)
    figure.suptitle(f"Copy/compute overlap on {env['gpu_name']}: {payload} payload, chunks H2D → kernel → D2H, "
                    "malloc, eager launches")
    paths = _save(figure, Path(out_dir) / "overlap_scaling")
    paths += _plot_overlap_heatmap(selected, out_dir, payload)
    timeline = tables.get("timeline")
    if timeline is not None and len(timeline):
        paths += _plot_overlap_timeline(selected, timeline, out_dir, payload)
    return paths


def _plot_overlap_heatmap(selected: pd.DataFrame, out_dir: Path, payload: str) -> list[Path]:
    pinned = selected[selected["host_memory"] == "pinned"]
    ratios = sorted(pinned["compute_ratio"].unique())
    figure, axes = plt.subplots(1, len(ratios), figsize=(4.4 * len(ratios), 3.2), squeeze=False,
                                constrained_layout=True)
    for ax, ratio in zip(axes[0], ratios):
        grid = pinned[pinned["compute_ratio"] == ratio].pivot_table(
            index="chunks_per_stream", columns="streams", values="efficiency")
        image = ax.imshow(grid.to_numpy(), vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(grid.columns)), [str(c) for c in grid.columns])
        ax.set_yticks(range(len(grid.index)), [str(i) for i in grid.index])
        for (y, x), value in np.ndenumerate(grid.to_numpy()):
            ax.text(x, y, f"{value:.0%}", ha="center", va="center", fontsize=7,
                    color="white" if value < 0.6 else "black")
        ax.set_xlabel("streams")
        ax.set_ylabel("chunks per stream")
        ax.set_title(f"kernel = {ratio:g} × transfer")
    figure.colorbar(image, ax=axes[0].tolist(), label="efficiency (bound / makespan)")
    figure.suptitle(f"Pinned pipelines, {payload}: efficiency over streams × chunks")
    return _save(figure, Path(out_dir) / "overlap_heatmap")


def _plot_overlap_timeline(selected: pd.DataFrame, timeline: pd.DataFrame, out_dir: Path, payload: str) -> list[Path]:
    """Gantt chart per stream: one stream vs the most efficient pinned configuration, kernel = 1 × transfer."""
    pinned = selected[selected["host_memory"] == "pinned"]
    ratio = 1.0 if (pinned["compute_ratio"] == 1.0).any() else pinned["compute_ratio"].iloc[0]
    pinned = pinned[pinned["compute_ratio"] == ratio]
    single = pinned[pinned["streams"] == 1].sort_values("chunks_per_stream").tail(1)
    best = pinned.loc[[pinned["efficiency"].idxmax()]]
    keys = ["total_bytes", "compute_ratio", "host_memory", "allocator", "launch", "chunks_per_stream", "streams"]
    chosen = [row for row in (single, best) if len(row)]
    figure, axes = plt.subplots(len(chosen), 1, figsize=(13, 2.2 + 0.25 * int(best["streams"].iloc[0]) * 2),
                                sharex=True, squeeze=False, constrained_layout=True)
    for ax, row in zip(axes[:, 0], chosen):
        row = row.iloc[0]
        ops = timeline.merge(pd.DataFrame([row[keys]]), on=keys)
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
    return _save(figure, Path(out_dir) / "overlap_timeline")


def plot_launch(rows: pd.DataFrame, out_dir: Path, tables: dict) -> list[Path]:
    launch = rows[(rows["experiment"] == "launch") & (rows["status"] == "ok")]
    if not len(launch):
        return []
    figure, ax = plt.subplots(figsize=(7, 3), constrained_layout=True)
    ax.barh(launch["path"], launch["host_us_per_launch"], color="#1f77b4")
    for y, value in enumerate(launch["host_us_per_launch"]):
        ax.text(value, y, f" {value:.3g} µs", va="center")
    ax.set_xlabel("host µs per kernel launch (median)")
    ax.invert_yaxis()
    ax.set_title(f"numba-cuda launch cost on {launch.iloc[0]['gpu_name']}")
    return _save(figure, Path(out_dir) / "launch")


VERDICT_COLORS = {"returns": "#4daf4a", "own-work": "#ffd92f", "waits-for-device": "#e41a1c", "unclear": "#bdbdbd",
                  "overlaps": "#4daf4a", "partial": "#ff7f00", "serializes": "#e41a1c"}
_PLACEMENTS = ("same", "other", "legacy", "per-thread", "none")


def _truth_panel(ax, rows: pd.DataFrame, calls: list[str], columns: list[tuple[str, str]], annotate) -> None:
    """One cell per (call, placement × spinning stream), coloured by verdict; ``!`` where it contradicts the docs."""
    ax.set_xlim(-0.5, len(columns) - 0.5)
    ax.set_ylim(len(calls) - 0.5, -0.5)
    cells = {(row["call"], row["placement"], row["spin_stream"]): row for _, row in rows.iterrows()}
    for y, call in enumerate(calls):
        for x, (spin, placement) in enumerate(columns):
            row = cells.get((call, placement, spin))
            if row is None:
                continue
            ax.add_patch(plt.Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=VERDICT_COLORS.get(row["verdict"], "w"),
                                       edgecolor="white", linewidth=1.5))
            text = annotate(row) + ("!" if row.get("matches_docs") == "false" else "")
            ax.text(x, y, text, ha="center", va="center", fontsize=6.5)
    ax.set_xticks(range(len(columns)), [f"{placement}\n({spin})" for spin, placement in columns], fontsize=7)
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(calls)), calls, fontsize=7.5)
    for x in range(1, len(columns)):
        if columns[x][0] != columns[x - 1][0]:
            ax.axvline(x - 0.5, color="k", linewidth=1.5)


def plot_truth_table(rows: pd.DataFrame, out_dir: Path, tables: dict) -> list[Path]:
    """The blocking truth table: does the call hold the host (left), do two kernels around it still overlap
    (right); calls × placement and spinning stream, host ms in each cell."""
    panels = [(name, rows[(rows["experiment"] == name) & (rows["status"] == "ok")])
              for name in ("blocking", "serialization")]
    panels = [(name, ok) for name, ok in panels if len(ok)]
    if not panels:
        return []
    calls = list(dict.fromkeys(call for _, ok in panels for call in ok["call"]))
    figure, axes = plt.subplots(1, len(panels), figsize=(9.5 * len(panels), 0.3 * len(calls) + 2.6), squeeze=False,
                                constrained_layout=True)
    for ax, (name, ok) in zip(axes[0], panels):
        present = set(zip(ok["spin_stream"], ok["placement"]))
        columns = [(spin, placement) for spin in ("blocking", "non-blocking") for placement in _PLACEMENTS
                   if (spin, placement) in present]
        if name == "blocking":
            _truth_panel(ax, ok, calls, columns, lambda row: _short_ms(row["host_ms"]))
            ax.set_title("host: does the call return while a 20 ms kernel runs? (cell: host ms)", fontsize=10)
        else:
            _truth_panel(ax, ok, calls, columns, lambda row: "host" if row["host_waited"] else "")
            ax.set_title("device: do kernels on two streams around the call overlap? (\"host\": the call held the "
                         "host)", fontsize=10)
        if ax is not axes[0][0]:
            ax.set_yticks(range(len(calls)), [""] * len(calls))
    handles = [plt.Rectangle((0, 0), 1, 1, color=color) for color in VERDICT_COLORS.values()]
    figure.legend(handles, list(VERDICT_COLORS), loc="outside lower center", ncol=len(handles), fontsize=8)
    env = panels[0][1].iloc[0]
    figure.suptitle(f"Which CUDA calls block, on {env['gpu_name']} (driver {env['driver_version']}); columns: "
                    "the call's stream (the spinning stream's kind); ! = contradicts the CUDA documentation",
                    fontsize=10)
    return _save(figure, Path(out_dir) / "blocking_truth_table")


def _short_ms(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:.2f}" if value >= 0.01 else f"{value * 1e3:.0f}µs"


def plot_alloc(rows: pd.DataFrame, out_dir: Path, tables: dict) -> list[Path]:
    """Allocation latency vs size (log-log): device allocate+free round trip, pinned host memory, and the loop."""
    ok = rows[(rows["experiment"] == "alloc") & (rows["status"] == "ok")]
    if not len(ok):
        return []
    ok = ok.astype({"bytes": "int64"})
    single = ok[ok["pattern"] == "single"]
    panels = (("device: allocate + free round trip", single[single["api"].str.startswith("cudaMalloc")],
               "cycle_us", "host µs (median)"),
              ("pinned host memory: allocate + free", single[single["api"].str.startswith("cudaHost")],
               "cycle_us", "host µs (median)"),
              ("loop: (allocate, kernel, free) × 50", ok[ok["pattern"] == "loop"], "host_us_per_iteration",
               "µs per iteration (solid: host, dotted: GPU)"))
    figure, axes = plt.subplots(1, 3, figsize=(16, 5), constrained_layout=True)
    for ax, (title, group, column, ylabel) in zip(axes, panels):
        for (api, threshold), line in group.groupby(["api", "release_threshold"], sort=False):
            line = line.sort_values("bytes")
            label = api if threshold == "none" else f"{api}, release threshold {threshold}"
            drawn = ax.plot(line["bytes"], line[column], marker="o", markersize=4, label=label)
            if column == "host_us_per_iteration":
                ax.plot(line["bytes"], line["gpu_us_per_iteration"], linestyle=":", marker=".",
                        color=drawn[0].get_color())
        if len(group):
            _size_axis(ax, group["bytes"].to_numpy())
            ax.set_xlabel("bytes per allocation")
        ax.set_yscale("log")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    figure.suptitle(f"Allocation costs on {ok.iloc[0]['gpu_name']}")
    return _save(figure, Path(out_dir) / "alloc")
