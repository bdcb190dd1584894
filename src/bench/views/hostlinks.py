"""The ``hostlinks`` experiment's view: each GPU's GB/s alone and with every GPU copying at once."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.analysis.selection import row_dicts
from bench.platform.units import format_size
from bench.views import View, span
from bench.platform.vocabulary import Direction, Status

DIRECTIONS = (Direction.H2D, Direction.D2H)  # a panel each


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    ok = rows[rows["status"] == Status.OK]
    lines = []
    for (direction, nbytes), group in ok.groupby(["direction", "bytes"], sort=False):
        line = {"direction": direction, "size": format_size(int(nbytes))}
        for row in row_dicts(group.sort_values(["load", "device"])):
            line[f"GPU {row['device']} {row['load']} GB/s"] = f"{row['gbps']:.1f}"
        together = group[group["load"] == "together"]
        if len(together):
            line["total together GB/s"] = f"{together['total_gbps'].iloc[0]:.1f}"
        lines.append(line)
    return pd.DataFrame(lines)


def answer(rows: pd.DataFrame, table: pd.DataFrame) -> str | None:
    """Per direction: GB/s per GPU alone against the total with every GPU copying at once."""
    ok = rows[rows["status"] == Status.OK]
    parts = []
    for direction, group in ok.groupby("direction", sort=False):
        group = group[group["bytes"] == group["bytes"].max()]
        alone, together = group[group["load"] == "alone"], group[group["load"] == "together"]
        if len(alone) and len(together):
            parts.append(f"{direction} {span(alone['gbps'].round(1))} GB/s per GPU alone, "
                         f"{together['total_gbps'].iloc[0]:.1f} GB/s in total with {together['device'].nunique()} "
                         "at once")
    return "; ".join(parts) or None


def hostlinks_figure(rows: pd.DataFrame, tables: dict) -> list:
    """Per direction: each GPU's GB/s alone and with every GPU copying, and the total."""
    from bench.analysis.plots import gpu_label, pyplot

    ok = rows[(rows["experiment"] == "hostlinks") & (rows["status"] == Status.OK)]
    if not len(ok):
        return []
    largest = ok[ok["bytes"] == ok["bytes"].max()]
    plt = pyplot()
    figure, axes = plt.subplots(1, len(DIRECTIONS), figsize=(11, 4.2), squeeze=False, constrained_layout=True)
    devices = sorted(largest["device"].unique())
    for ax, direction in zip(axes[0], DIRECTIONS):
        group = largest[largest["direction"] == direction]
        width = 0.38
        for offset, load, color in ((-width / 2, "alone", "#1f77b4"), (width / 2, "together", "#d62728")):
            values = [group[(group["load"] == load) & (group["device"] == device)]["gbps"] for device in devices]
            heights = [float(value.iloc[0]) if len(value) else np.nan for value in values]
            bars = ax.bar(np.arange(len(devices)) + offset, heights, width, color=color,
                          label=f"{load} ({'this GPU only' if load == 'alone' else 'every GPU at once'})")
            ax.bar_label(bars, fmt="%.1f", fontsize=8)
        together = group[group["load"] == "together"]
        if len(together):
            ax.set_title(f"{direction}: all {len(devices)} GPUs together move "
                         f"{together['total_gbps'].iloc[0]:.1f} GB/s", fontsize=10)
        ax.set_xticks(range(len(devices)), [f"GPU {device}" for device in devices])
        ax.set_ylabel("GB/s (10⁹ bytes/s), median")
        ax.set_ylim(0, 1.3 * np.nanmax(largest["gbps"]))
        ax.legend(fontsize=8, loc="upper center", ncol=2)
    figure.suptitle(f"Host links under load: pinned cudaMemcpyAsync, {format_size(int(largest['bytes'].iloc[0]))} "
                    f"per copy — {gpu_label(ok)}", fontsize=10)
    return [("hostlinks", figure)]


VIEW = View("hostlinks", headline, answer, (hostlinks_figure,),
            columns=("bytes", "device", "direction", "gbps", "load", "total_gbps"))
