"""The ``hostmemory`` experiment's view: write-combined host memory against pinned, per operation."""

from __future__ import annotations

import pandas as pd

from bench.analysis.selection import row_dicts
from bench.platform.units import format_size
from bench.views import View, ok_rows
from bench.platform.vocabulary import HostMemory, HostOperation, Status, values

OPERATIONS = values(HostOperation)
COPIES = (HostOperation.H2D, HostOperation.D2H)  # on a linear scale; the CPU's passes on a log scale
HOST_KINDS = (HostMemory.PINNED, HostMemory.WRITE_COMBINED)  # compared


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Per operation: pinned and write-combined GB/s at the largest size both were measured at, and their ratio."""
    ok = ok_rows(rows, "operation", "host_memory", "bytes", "gbps")
    lines = []
    for operation in OPERATIONS:
        group = [row for row in ok if row["operation"] == operation]
        if not group:
            continue
        rates = {kind: {int(row["bytes"]): row["gbps"] for row in group if row["host_memory"] == kind}
                 for kind in HOST_KINDS}
        common = sorted(set(rates["pinned"]) & set(rates["write-combined"]))
        size = common[-1] if common else int(max(row["bytes"] for row in group if row["bytes"] is not None))
        pinned, combined = rates["pinned"].get(size), rates["write-combined"].get(size)
        lines.append({
            "operation": operation,
            "at": format_size(size),
            "pinned GB/s": _rate(pinned),
            "write-combined GB/s": _rate(combined),
            "write-combined / pinned": f"{combined / pinned:.3g}×" if pinned and combined else "—",
        })
    return pd.DataFrame(lines)


def answer(rows: pd.DataFrame, table: pd.DataFrame) -> str | None:
    """Write-combined memory against pinned, per operation."""
    if not len(table):
        return None
    return "write-combined / pinned host memory: " + ", ".join(
        f"{line['operation']} {line['write-combined / pinned']}" for line in row_dicts(table))


def _rate(gbps) -> str:
    return "—" if gbps is None or pd.isna(gbps) else f"{gbps:.3g}"


KIND_STYLES = {"pinned": ("#1f77b4", "-", "o"), "write-combined": ("#d62728", "--", "s")}
_TITLES = {"H2D": "H2D copy (cudaMemcpyAsync, GPU time)", "D2H": "D2H copy (cudaMemcpyAsync, GPU time)",
           "cpu-read": "CPU reads the buffer (numpy sum, one thread)",
           "cpu-write": "CPU writes the buffer (numpy fill, one thread)"}


def hostmemory_figure(rows: pd.DataFrame, tables: dict) -> list:
    """GB/s vs size, one panel per operation, pinned against write-combined (CPU panels on a log scale)."""
    from bench.analysis.plots import gpu_label, pyplot, size_axis

    ok = rows[(rows["experiment"] == "hostmemory") & (rows["status"] == Status.OK)]
    if not len(ok):
        return []
    plt = pyplot()
    figure, axes = plt.subplots(2, 2, figsize=(12, 8.5), constrained_layout=True)
    for ax, operation in zip(axes.flat, OPERATIONS):
        group = ok[ok["operation"] == operation]
        for kind, line in group.groupby("host_memory", sort=False):
            line = line.sort_values("bytes")
            sizes = line["bytes"].astype(float)
            color, linestyle, marker = KIND_STYLES.get(kind, ("k", "-", "o"))
            ax.plot(sizes, line["gbps"], color=color, linestyle=linestyle, marker=marker, markersize=4, label=kind)
            # the samples' range (unit ms) as a band: the slowest sample gives the lowest rate
            ax.fill_between(sizes, sizes / (line["max"] * 1e6), sizes / (line["min"] * 1e6), color=color,
                            alpha=0.12, linewidth=0)
        ax.set_title(_TITLES[operation], fontsize=10)
        ax.set_ylabel("GB/s (10⁹ bytes/s), median")
        if operation in COPIES:
            ax.set_ylim(bottom=0)
        else:
            ax.set_yscale("log")
        ax.grid(True, which="major", alpha=0.3)
        if len(group):
            size_axis(ax, group["bytes"].to_numpy(dtype=float))
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "not measured", ha="center", va="center", transform=ax.transAxes, color="0.5")
    figure.suptitle(f"Pinned vs write-combined host memory on {gpu_label(ok)}")
    figure.supxlabel("band: min–max of samples. Pinned memory is cached by the CPU (a small buffer is read from "
                     "its caches); write-combined memory never is.", fontsize=7, color="0.4")
    return [("hostmemory", figure)]


VIEW = View("hostmemory", headline, answer, (hostmemory_figure,),
            columns=("bytes", "gbps", "host_memory", "max", "min", "operation"))
