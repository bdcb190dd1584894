"""The ``roundtrip`` experiment's view: the host's round trip of a small copy against the copy alone."""

from __future__ import annotations

import pandas as pd

from bench.analysis.selection import row_dicts
from bench.platform.units import format_size
from bench.views import View, numbers, span
from bench.platform.vocabulary import Status


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    ok = rows[rows["status"] == Status.OK]
    return pd.DataFrame([{"direction": row["direction"], "size": format_size(int(row["bytes"])),
                          "round trip µs (host)": f"{row['median']:.1f}", "copy µs (GPU)": f"{row['gpu_us']:.2f}"}
                         for row in row_dicts(ok)])


def answer(rows: pd.DataFrame, table: pd.DataFrame) -> str | None:
    """The host's round trip of a small copy, per direction, over the sizes measured."""
    if not len(table):
        return None
    parts = []
    for direction, group in table.groupby("direction", sort=False):
        host_us = numbers(group["round trip µs (host)"])
        parts.append(f"{direction} {span(host_us)}")
    return (f"host µs per round trip of a small copy ({table['size'].iloc[0]} – {table['size'].iloc[-1]}): "
            + ", ".join(parts))


def roundtrip_figure(rows: pd.DataFrame, tables: dict) -> list:
    from bench.analysis.plots import DIRECTION_COLORS, gpu_label, pyplot, size_axis

    ok = rows[(rows["experiment"] == "roundtrip") & (rows["status"] == Status.OK)]
    if not len(ok):
        return []
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(8, 4.5), constrained_layout=True)
    for direction, group in ok.groupby("direction", sort=False):
        group = group.sort_values("bytes")
        sizes = group["bytes"].astype(float)
        color = DIRECTION_COLORS.get(direction, "k")
        ax.plot(sizes, group["median"], "-o", color=color, label=f"{direction} round trip (host, from Python)")
        ax.fill_between(sizes, group["min"], group["max"], color=color, alpha=0.12, linewidth=0)
        ax.plot(sizes, group["gpu_us"], ":s", color=color, label=f"{direction} the copy alone (GPU)")
    size_axis(ax, ok["bytes"].to_numpy(dtype=float))
    ax.set_ylim(bottom=0)
    ax.set_ylabel("µs (median; band: min–max of samples)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"Small-copy round trip on {gpu_label(ok)}")
    return [("roundtrip", figure)]


VIEW = View("roundtrip", headline, answer, (roundtrip_figure,),
            columns=("bytes", "direction", "gpu_us", "max", "median", "min"))
