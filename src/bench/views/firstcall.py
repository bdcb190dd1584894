"""The ``firstcall`` experiment's view: which first-call steps wait for a kernel on another stream."""

from __future__ import annotations

import math

import pandas as pd

from bench.views import View, firsts, listed, ok_rows
from bench.platform.vocabulary import FirstCall, HostVerdict, ModuleLoading, Status, values

CALLS = values(FirstCall)  # in the order a program takes them
LOADING = values(ModuleLoading)


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    ok = ok_rows(rows, "call", "module_loading", "verdict")
    if not ok:
        return pd.DataFrame()
    verdicts = firsts(ok, "call", "module_loading", "verdict")
    loadings = sorted({key[1] for key in verdicts})
    present = {key[0] for key in verdicts}
    return pd.DataFrame([{"call": call, **{loading: verdicts.get((call, loading), math.nan) for loading in loadings}}
                         for call in CALLS if call in present], columns=["call", *loadings])


def answer(rows: pd.DataFrame, table: pd.DataFrame) -> str | None:
    """The first-call steps that wait for a kernel running on another stream."""
    ok = rows[rows["status"] == Status.OK]
    if not len(ok):
        return None
    waits = ok[ok["verdict"] == HostVerdict.WAITS_FOR_DEVICE]
    steps = [f"{call} ({', '.join(group['module_loading'])})" for call, group in waits.groupby("call", sort=False)]
    return f"waits for a kernel on another stream: {listed(steps)}"


def firstcall_figure(rows: pd.DataFrame, tables: dict) -> list:
    from bench.analysis.plots import VERDICT_COLORS, gpu_label, pyplot

    ok = rows[(rows["experiment"] == "firstcall") & (rows["status"] == Status.OK)]
    if not len(ok):
        return []
    plt = pyplot()
    calls = [call for call in CALLS if call in set(ok["call"])]
    figure, ax = plt.subplots(figsize=(9, 1 + 0.5 * len(calls)), constrained_layout=True)
    for x, loading in enumerate(LOADING):
        for y, call in enumerate(calls):
            match = ok[(ok["module_loading"] == loading) & (ok["call"] == call)]
            if not len(match):
                continue
            row = match.iloc[0]
            ax.add_patch(plt.Rectangle((x, y), 1, 1, color=VERDICT_COLORS.get(row["verdict"], "0.8")))
            ax.text(x + 0.5, y + 0.5, f"{row['verdict']}\n{row['host_ms']:.3g} ms", ha="center", va="center",
                    fontsize=8)
    ax.set_xlim(0, len(LOADING))
    ax.set_ylim(len(calls), 0)
    ax.set_xticks([x + 0.5 for x in range(len(LOADING))], [f"CUDA_MODULE_LOADING={v.upper()}" for v in LOADING])
    ax.set_yticks([y + 0.5 for y in range(len(calls))], calls)
    ax.set_title(f"Does a first call wait for a kernel on another stream? {gpu_label(ok)}", fontsize=10)
    return [("firstcall", figure)]


VIEW = View("firstcall", headline, answer, (firstcall_figure,),
            columns=("call", "host_ms", "module_loading", "verdict"))
