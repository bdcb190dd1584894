"""The ``latency`` experiment's view: ns per dependent access, per memory and working set."""

from __future__ import annotations

import pandas as pd

from bench.analysis.selection import row_dicts
from bench.platform.units import format_size
from bench.views import View
from bench.platform.vocabulary import CHASE_STEPS, Status


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    ok = rows[rows["status"] == Status.OK]
    return pd.DataFrame([{"memory": row["memory"], "working set": format_size(int(row["bytes"])),
                          "ns per dependent access": f"{row['ns_per_access']:.0f}"} for row in row_dicts(ok)])


def answer(rows: pd.DataFrame, table: pd.DataFrame) -> str | None:
    """ns per dependent access, per memory and working set."""
    if not len(table):
        return None
    return "ns per dependent access: " + ", ".join(
        f"{line['memory']} {line['ns per dependent access']} ({line['working set']})" for line in row_dicts(table))


def latency_figure(rows: pd.DataFrame, tables: dict) -> list:
    from bench.analysis.plots import gpu_label, pyplot

    ok = rows[(rows["experiment"] == "latency") & (rows["status"] == Status.OK)]
    if not len(ok):
        return []
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(8, 3.5), constrained_layout=True)
    labels = [f"{row['memory']}, {format_size(int(row['bytes']))}" for _, row in ok.iterrows()]
    low = ok["min"] * 1e6 / ok["steps"]
    high = ok["max"] * 1e6 / ok["steps"]
    ax.barh(labels, ok["ns_per_access"], xerr=[ok["ns_per_access"] - low, high - ok["ns_per_access"]],
            color=["#d62728" if memory == "host-mapped" else "#1f77b4" for memory in ok["memory"]], capsize=3)
    for y, value in enumerate(ok["ns_per_access"]):
        ax.text(value, y, f" {value:.0f} ns", va="bottom")
    ax.invert_yaxis()
    ax.set_xlabel(f"ns per dependent load (median of {CHASE_STEPS}-load chases; whiskers: min–max)")
    ax.set_title(f"GPU access latency on {gpu_label(ok)}")
    return [("latency", figure)]


VIEW = View("latency", headline, answer, (latency_figure,),
            columns=("bytes", "max", "memory", "min", "ns_per_access", "steps"))
