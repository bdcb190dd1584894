"""The ``launch`` experiment's view: host µs per kernel launch of each launch path."""

from __future__ import annotations

import pandas as pd

from bench.analysis.selection import row_dicts
from bench.views import View
from bench.platform.vocabulary import Status


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    ok = rows[rows["status"] == Status.OK]
    return pd.DataFrame({"launch path": ok["path"], "host µs per launch (median)": ok["median"].map("{:.3g}".format)})


def answer(rows: pd.DataFrame, table: pd.DataFrame) -> str | None:
    """Host µs per launch of each path."""
    if not len(table):
        return None
    return "host µs per launch: " + ", ".join(
        f"{line['launch path']} {line['host µs per launch (median)']}" for line in row_dicts(table))


def launch_figure(rows: pd.DataFrame, tables: dict) -> list:
    from bench.analysis.plots import gpu_label, pyplot

    launch = rows[(rows["experiment"] == "launch") & (rows["status"] == Status.OK)]
    if not len(launch):
        return []
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(7, 3), constrained_layout=True)
    ax.barh(launch["path"], launch["median"], xerr=[launch["median"] - launch["min"], launch["max"] - launch["median"]],
            color="#1f77b4", ecolor="0.4", capsize=3)
    for y, value in enumerate(launch["median"]):
        ax.text(value, y, f" {value:.3g} µs", va="bottom")
    ax.set_xlabel("host µs per kernel launch (median; whiskers: min–max of samples)")
    ax.invert_yaxis()
    ax.set_title(f"Kernel launch cost from Python on {gpu_label(launch)}")
    return [("launch", figure)]


VIEW = View("launch", headline, answer, (launch_figure,),
            columns=("launch", "max", "median", "min", "path"))
