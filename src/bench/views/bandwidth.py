"""The ``bandwidth`` experiment's view: GB/s by direction and host memory, against the PCIe link's rate."""

from __future__ import annotations

import pandas as pd

from bench.analysis.selection import row_dicts
from bench.platform.units import format_size
from bench.views import View, grouped, ok_rows, peak
from bench.platform.vocabulary import Status


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Per direction × host memory: GB/s at 16 MiB and the peak (with the size it was reached at)."""
    ok = ok_rows(rows, "direction", "host_memory", "bytes", "gbps")
    lines = []
    for (direction, host_memory), group in grouped(ok, "direction", "host_memory").items():
        at_16mib = [row["gbps"] for row in group if row["bytes"] == 16 << 20]
        best = peak(group, "gbps")
        lines.append({
            "direction": direction,
            "host memory": host_memory,
            "GB/s at 16 MiB": f"{at_16mib[0]:.1f}" if at_16mib else "—",
            "peak GB/s": f"{best['gbps']:.1f}",
            "peak at": format_size(int(best["bytes"])),
        })
    return pd.DataFrame(lines)


def answer(rows: pd.DataFrame, table: pd.DataFrame) -> str | None:
    """Peak GB/s of each direction and kind of memory."""
    if not len(table):
        return None
    return "peak GB/s: " + ", ".join(f"{line['direction']} {line['host memory']} {line['peak GB/s']}"
                                     for line in row_dicts(table))


HOST_STYLES = {"pinned": ("-", "o"), "registered": ("--", "s"), "pageable": (":", "^"), "device": ("-", "D")}


def bandwidth_figure(rows: pd.DataFrame, tables: dict) -> list:
    """GB/s vs size: host↔device on the left with the PCIe link's theoretical rate, device↔device on the right."""
    from bench.platform.env import pcie_gbps_per_direction
    from bench.analysis.plots import DIRECTION_COLORS, pyplot, size_axis

    rows = rows[rows["experiment"] == "bandwidth"]
    ok = rows[rows["status"] == Status.OK]
    if not len(rows):
        return []
    plt = pyplot()
    env = rows.iloc[0]
    figure, (pcie_ax, device_ax) = plt.subplots(
        1, 2, figsize=(14, 7.2), gridspec_kw={"width_ratios": [2.3, 1]}, constrained_layout=True
    )
    for (direction, host_memory), group in ok.groupby(["direction", "host_memory"], sort=False):
        group = group.sort_values("bytes")
        sizes = group["bytes"].astype(float)
        ax = device_ax if direction == "D2D" else pcie_ax
        linestyle, marker = HOST_STYLES.get(host_memory, ("-", "o"))
        color = DIRECTION_COLORS.get(direction, "k")
        copies = 2 if direction == "BIDIR" else 1
        label = f"{direction} {host_memory}" + (" (sum of both)" if direction == "BIDIR" else "")
        ax.plot(sizes, group["gbps"], linestyle=linestyle, marker=marker, markersize=4, color=color, label=label)
        # Samples' range as a band: the slowest sample gives the lowest rate.
        ax.fill_between(sizes, copies * sizes / (group["max"] * 1e6), copies * sizes / (group["min"] * 1e6),
                        color=color, alpha=0.12, linewidth=0)
    link = pcie_gbps_per_direction(int(env["pcie_gen_max"]), int(env["pcie_width_max"]))
    if link:
        name = f"PCIe Gen{int(env['pcie_gen_max'])} x{int(env['pcie_width_max'])}"
        pcie_ax.axhline(link, color="0.3", linestyle="-.", linewidth=1,
                        label=f"{name} theoretical, one direction ({link:.1f} GB/s)")
        pcie_ax.axhline(2 * link, color="0.6", linestyle="-.", linewidth=1,
                        label=f"{name} theoretical, both directions ({2 * link:.1f} GB/s)")
    l2_bytes = int(env["l2_cache_bytes"]) if pd.notna(env.get("l2_cache_bytes")) else 0
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
            size_axis(ax, ok["bytes"].to_numpy(dtype=float))
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3 if ax is pcie_ax else 1)
    failed = int((rows["status"] != Status.OK).sum())
    figure.suptitle(
        f"Copy bandwidth on {env['gpu_name']} — driver {env['driver_version']}, CUDA runtime {env['cuda_runtime']}, "
        f"link now Gen{env['pcie_gen']} x{env['pcie_width']}"
        + (f" — {failed} configuration(s) failed, not shown" if failed else "")
    )
    figure.supxlabel("band: min–max of samples; pageable copies are timed without the gate, so their time includes "
                     f"the host's staging work.   run {env['run_id']}, commit {str(env['git_commit'])[:12]}",
                     fontsize=7, color="0.4")
    return [("bandwidth", figure)]


VIEW = View("bandwidth", headline, answer, (bandwidth_figure,),
            columns=("bytes", "direction", "gbps", "host_memory", "l2_cache_bytes", "max", "min", "pcie_gen",
                     "pcie_gen_max", "pcie_width", "pcie_width_max"))
