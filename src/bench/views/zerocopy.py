"""The ``zerocopy`` experiment's view: a kernel on mapped pinned host memory against the copy engines."""

from __future__ import annotations

import pandas as pd

from bench.analysis.selection import row_dicts
from bench.platform.units import format_size
from bench.views import View, grouped, ok_rows, peak
from bench.platform.vocabulary import Direction, Status

DIRECTIONS = (Direction.H2D, Direction.D2H)


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Per direction: the SM copy's peak and its rate at 16 MiB."""
    lines = []
    for (direction,), group in grouped(ok_rows(rows, "direction", "bytes", "gbps"), "direction").items():
        best = peak(group, "gbps")
        at_16mib = [row["gbps"] for row in group if row["bytes"] == 16 << 20]
        lines.append({"direction": direction, "GB/s at 16 MiB": f"{at_16mib[0]:.1f}" if at_16mib else "—",
                      "peak GB/s": f"{best['gbps']:.1f}", "peak at": format_size(int(best["bytes"]))})
    return pd.DataFrame(lines)


def answer(rows: pd.DataFrame, table: pd.DataFrame) -> str | None:
    """Peak GB/s of a kernel reading and writing mapped pinned host memory."""
    if not len(table):
        return None
    return "a kernel on mapped pinned host memory, peak GB/s: " + ", ".join(
        f"{line['direction']} {line['peak GB/s']}" for line in row_dicts(table))


def zerocopy_figure(rows: pd.DataFrame, tables: dict) -> list:
    """GB/s vs size: SM copies (solid) beside the copy engines' pinned copies from the same run (dashed)."""
    from bench.analysis.plots import DIRECTION_COLORS, gpu_label, pyplot, size_axis

    sm = rows[(rows["experiment"] == "zerocopy") & (rows["status"] == Status.OK)]
    if not len(sm):
        return []
    ce = rows[(rows["experiment"] == "bandwidth") & (rows["status"] == Status.OK) & (rows["host_memory"] == "pinned")]
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(9, 5.5), constrained_layout=True)
    for direction in DIRECTIONS:
        color = DIRECTION_COLORS[direction]
        for frame, style, label in ((sm, "-", "SM copy (kernel, mapped host memory)"),
                                    (ce, "--", "copy engine (cudaMemcpyAsync, pinned)")):
            group = frame[frame["direction"] == direction].sort_values("bytes")
            if len(group):
                ax.plot(group["bytes"].astype(float), group["gbps"], style, marker="o", markersize=3, color=color,
                        label=f"{direction} {label}")
    size_axis(ax, sm["bytes"].to_numpy(dtype=float))
    ax.set_ylim(bottom=0)
    ax.set_ylabel("GB/s (10⁹ bytes/s), median")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"SM copies vs copy engines on {gpu_label(sm)}")
    return [("zerocopy", figure)]


VIEW = View("zerocopy", headline, answer, (zerocopy_figure,),
            columns=("bytes", "direction", "gbps", "host_memory"))
