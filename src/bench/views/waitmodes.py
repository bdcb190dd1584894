"""The ``waitmodes`` experiment's view: how soon spinning and sleeping waits wake up, and how busy they keep the CPU."""

from __future__ import annotations

import pandas as pd

from bench.analysis.selection import row_dicts
from bench.views import View, numbers, span
from bench.platform.vocabulary import WAIT_SPIN_MS, Status


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    ok = rows[rows["status"] == Status.OK]
    return pd.DataFrame([{"schedule": row["schedule"], "wait": row["wait"],
                          "wake-up µs": f"{row['median']:.1f}", "CPU busy": f"{row['cpu_fraction']:.0%}"}
                         for row in row_dicts(ok)])


def answer(rows: pd.DataFrame, table: pd.DataFrame) -> str | None:
    """How soon waits that spin and waits that sleep wake up after a kernel, and how busy they keep the CPU."""
    if not len(table):
        return None
    wake, busy = numbers(table["wake-up µs"]), numbers(table["CPU busy"])
    parts = [f"{kind} waits wake up in {span(wake[chosen])} µs, the CPU {span(busy[chosen])}% busy"
             for kind, chosen in (("spinning", busy >= 50), ("sleeping", busy < 50)) if chosen.any()]
    return "; ".join(parts)


def waitmodes_figure(rows: pd.DataFrame, tables: dict) -> list:
    from bench.analysis.plots import gpu_label, pyplot

    ok = rows[(rows["experiment"] == "waitmodes") & (rows["status"] == Status.OK)]
    if not len(ok):
        return []
    plt = pyplot()
    figure, (wake_ax, cpu_ax) = plt.subplots(1, 2, figsize=(12, 4.5), constrained_layout=True, sharey=True)
    labels = [f"{row['schedule']} / {row['wait']}" for _, row in ok.iterrows()]
    wake_ax.barh(labels, ok["median"], xerr=[ok["median"] - ok["min"], ok["max"] - ok["median"]], capsize=3,
                 color="#1f77b4")
    for y, value in enumerate(ok["median"]):
        wake_ax.text(value, y, f" {value:.1f}", va="bottom", fontsize=8)
    wake_ax.set_title("µs from the kernel's end to the host's return\n(median; whiskers: min–max)", fontsize=9)
    cpu_ax.barh(labels, ok["cpu_fraction"] * 100, color="#d62728")
    cpu_ax.set_title("CPU busy while waiting, % of one core\n(process CPU time / wall time)", fontsize=9)
    wake_ax.invert_yaxis()
    figure.suptitle(f"How the host waits, on {gpu_label(ok)} (a {WAIT_SPIN_MS:g} ms kernel)")
    return [("waitmodes", figure)]


VIEW = View("waitmodes", headline, answer, (waitmodes_figure,),
            columns=("cpu_fraction", "max", "median", "min", "schedule", "wait"))
