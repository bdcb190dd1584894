"""The ``managed`` experiment's view: a kernel over managed memory on the host, prefetched and resident."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.analysis.selection import row_dicts
from bench.platform.units import format_size
from bench.views import View, grouped, ok_rows
from bench.platform.vocabulary import ManagedCase, Status, values

CASES = values(ManagedCase)


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Per size and case: GPU ms, GB/s of the touched bytes, the time against resident, and the prefetch alone."""
    ok = ok_rows(rows, "bytes", "case", "median", "gbps", "prefetch_gbps")
    lines = []
    for (nbytes,), group in sorted(grouped(ok, "bytes").items(), key=lambda item: item[0]):
        resident = [row["median"] for row in group if row["case"] == "resident"]
        for case in CASES:
            row = next((row for row in group if row["case"] == case), None)
            if row is None:
                continue
            lines.append({
                "size": format_size(int(nbytes)),
                "case": case,
                "GPU ms": f"{row['median']:.3g}",
                "GB/s": f"{row['gbps']:.3g}",
                "× resident": f"{np.float64(row['median']) / resident[0]:.3g}" if resident else "—",  # /0: inf
                "prefetch alone GB/s": f"{row['prefetch_gbps']:.3g}" if pd.notna(row["prefetch_gbps"]) else "—",
            })
    return pd.DataFrame(lines)


def answer(rows: pd.DataFrame, table: pd.DataFrame) -> str | None:
    """GB/s of a kernel over managed memory on the host, prefetched and resident, at the largest size."""
    if not len(table):
        return None
    largest = table[table["size"] == table["size"].iloc[-1]]
    return (f"a kernel over {largest['size'].iloc[0]} of managed memory, GB/s: "
            + ", ".join(f"{line['case']} {line['GB/s']}" for line in row_dicts(largest)))


CASE_STYLES = {"first-touch": ("#d62728", "o"), "prefetch-then-kernel": ("#ff7f0e", "s"), "resident": ("#2ca02c", "D")}


def managed_figure(rows: pd.DataFrame, tables: dict) -> list:
    """GB/s of the touched bytes vs size per case (log scale), with the prefetch alone; GPU ms on the right."""
    from bench.analysis.plots import gpu_label, pyplot, size_axis

    ok = rows[(rows["experiment"] == "managed") & (rows["status"] == Status.OK)]
    if not len(ok):
        return []
    plt = pyplot()
    figure, (rate_ax, time_ax) = plt.subplots(1, 2, figsize=(13, 5.2), constrained_layout=True)
    for case, line in ok.groupby("case", sort=False):
        line = line.sort_values("bytes")
        sizes = line["bytes"].astype(float)
        color, marker = CASE_STYLES.get(case, ("k", "o"))
        rate_ax.plot(sizes, line["gbps"], color=color, marker=marker, markersize=4, label=case)
        time_ax.plot(sizes, line["median"], color=color, marker=marker, markersize=4, label=case)
        time_ax.fill_between(sizes, line["min"], line["max"], color=color, alpha=0.12, linewidth=0)
        if case == "prefetch-then-kernel" and line["prefetch_gbps"].notna().any():
            rate_ax.plot(sizes, line["prefetch_gbps"], color=color, linestyle=":", marker=".",
                         label="cudaMemPrefetchAsync alone (host → device)")
    for ax, ylabel in ((rate_ax, "GB/s of touched bytes (10⁹ bytes/s), median"),
                       (time_ax, "GPU ms, median (band: min–max of samples)")):
        ax.set_yscale("log")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        size_axis(ax, ok["bytes"].to_numpy(dtype=float))
        ax.set_xlabel("managed bytes the kernel touches")
        ax.legend(fontsize=8)
    rate_ax.set_title("Rate", fontsize=10)
    time_ax.set_title("Time", fontsize=10)
    mine = rows[rows["experiment"] == "managed"]
    skipped = int(mine.loc[mine["status"] == Status.SKIPPED, "bytes"].nunique())
    figure.suptitle(f"Managed memory on {gpu_label(ok)}: a one-round kernel over pages on the host (first touch), "
                    "prefetched, or resident" + (f" — {skipped} size(s) skipped" if skipped else ""))
    return [("managed", figure)]


VIEW = View("managed", headline, answer, (managed_figure,),
            columns=("bytes", "case", "gbps", "max", "median", "min", "prefetch_gbps"))
