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


def plot_bandwidth(rows: pd.DataFrame, out_dir: Path) -> list[Path]:
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


PLOTTERS = {"bandwidth": plot_bandwidth}


def plot_results(rows: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Every figure the results support; returns the files written."""
    paths: list[Path] = []
    for experiment in rows["experiment"].unique():
        if experiment in PLOTTERS:
            paths += PLOTTERS[experiment](rows, out_dir)
    return paths
