"""The ``alloc`` experiment's view: host µs to allocate and free per API and size, the loop's cost."""

from __future__ import annotations

import pandas as pd

from bench.analysis.selection import row_dicts
from bench.platform.units import format_size
from bench.views import View, grouped, ok_rows
from bench.platform.vocabulary import ALLOC_LOOP, Status


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Per API, threshold and pattern: the cost at the smallest and the largest size measured."""
    ok = ok_rows(rows, "api", "release_threshold", "pattern", "bytes", "median")
    lines = []
    for (api, threshold, pattern), group in grouped(ok, "api", "release_threshold", "pattern").items():
        group = sorted(group, key=lambda row: (row["bytes"] is None, row["bytes"] or 0))  # a missing size last
        smallest, largest = group[0], group[-1]
        lines.append({"api": api if threshold == "none" else f"{api} (threshold {threshold})",
                      "measures": "allocate + free" if pattern == "single" else "(allocate, kernel, free) in a loop",
                      "smallest size": format_size(int(smallest["bytes"])), "host µs (smallest)":
                      f"{smallest['median']:.1f}", "largest size": format_size(int(largest["bytes"])),
                      "host µs (largest)": f"{largest['median']:.1f}"})
    return pd.DataFrame(lines)


def answer(rows: pd.DataFrame, table: pd.DataFrame) -> str | None:
    """Host µs to allocate and free, per API, from the smallest size to the largest."""
    single = table[table["measures"] == "allocate + free"] if len(table) else table
    if not len(single):
        return None
    return "host µs to allocate and free: " + ", ".join(
        f"{line['api']} {line['host µs (smallest)']} ({line['smallest size']}) – {line['host µs (largest)']} "
        f"({line['largest size']})" for line in row_dicts(single))


def alloc_figure(rows: pd.DataFrame, tables: dict) -> list:
    """Allocation latency vs size (log-log): device allocate+free round trip, pinned host memory, and the loop."""
    from bench.analysis.plots import gpu_label, pyplot, size_axis

    ok = rows[(rows["experiment"] == "alloc") & (rows["status"] == Status.OK)]
    if not len(ok):
        return []
    plt = pyplot()
    single = ok[ok["pattern"] == "single"]
    panels = (("device: allocate + free round trip", single[single["api"].str.startswith("cudaMalloc")],
               "host µs (median)"),
              ("pinned host memory: allocate + free", single[single["api"].str.startswith("cudaHost")],
               "host µs (median)"),
              (f"loop: (allocate, kernel, free) × {ALLOC_LOOP}", ok[ok["pattern"] == "loop"],
               "µs per iteration (solid: host, dotted: GPU)"))
    figure, axes = plt.subplots(1, 3, figsize=(16, 5), constrained_layout=True)
    for ax, (title, group, ylabel) in zip(axes, panels):
        for (api, threshold), line in group.groupby(["api", "release_threshold"], sort=False):
            line = line.sort_values("bytes")
            sizes = line["bytes"].astype(float)
            label = api if threshold == "none" else f"{api}, release threshold {threshold}"
            drawn = ax.plot(sizes, line["median"], marker="o", markersize=4, label=label)
            if title.startswith("loop"):
                ax.plot(sizes, line["gpu_us_per_iteration"], linestyle=":", marker=".", color=drawn[0].get_color())
        if len(group):
            size_axis(ax, group["bytes"].to_numpy(dtype=float))
            ax.set_xlabel("bytes per allocation")
        ax.set_yscale("log")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    figure.suptitle(f"Allocation costs on {gpu_label(ok)}")
    return [("alloc", figure)]


VIEW = View("alloc", headline, answer, (alloc_figure,),
            columns=("api", "bytes", "gpu_us_per_iteration", "median", "pattern", "release_threshold"))
