"""The ``crossgpu`` experiment's view: each call's verdict with the spin on its own GPU and on another."""

from __future__ import annotations

import pandas as pd

from bench.analysis.selection import row_dicts
from bench.views import View, listed
from bench.platform.vocabulary import SPIN_MS, SPIN_STREAMS, CrossGpuCall, HostVerdict, Status, values

CALL_NAMES = values(CrossGpuCall)  # a row each, in this order


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Each call's verdict with the spin on its own GPU and on another."""
    ok = rows[rows["status"] == Status.OK]
    lines = []
    for (call, spin_stream), group in ok.groupby(["call", "spin_stream"], sort=False):
        line = {"call": call, "spinning stream": spin_stream}
        for row in row_dicts(group):
            line[f"spin on GPU {row['spin_gpu']}, call on GPU {row['call_gpu']}: verdict (host ms)"] = (
                f"{row['verdict']} ({row['host_ms']:.3f})")
        lines.append(line)
    return pd.DataFrame(lines)


def answer(rows: pd.DataFrame, table: pd.DataFrame) -> str | None:
    """The calls that wait for a kernel on another GPU, and those that wait for one on their own."""
    ok = rows[rows["status"] == Status.OK]
    if not len(ok):
        return None
    waits = ok[ok["verdict"] == HostVerdict.WAITS_FOR_DEVICE]
    other = list(dict.fromkeys(waits.loc[waits["spin_gpu"] != waits["call_gpu"], "call"]))
    own = list(dict.fromkeys(waits.loc[waits["spin_gpu"] == waits["call_gpu"], "call"]))
    return f"wait for a kernel on another GPU: {listed(other)}; on their own GPU: {listed(own)}"


def crossgpu_figure(rows: pd.DataFrame, tables: dict) -> list:
    """Calls × (spin GPU, spinning stream), one panel per call GPU: verdict colours, host ms in each cell."""
    from bench.analysis.selection import contradicts_docs
    from bench.analysis.plots import cell_ms, gpu_label, pyplot, truth_cell, truth_legend

    ok = rows[(rows["experiment"] == "crossgpu") & (rows["status"] == Status.OK)]
    if not len(ok):
        return []
    plt = pyplot()
    calls = [call for call in CALL_NAMES if call in set(ok["call"])]
    call_gpus = sorted(ok["call_gpu"].unique())
    columns = [(spin_gpu, stream) for spin_gpu in sorted(ok["spin_gpu"].unique()) for stream in SPIN_STREAMS
               if ((ok["spin_gpu"] == spin_gpu) & (ok["spin_stream"] == stream)).any()]
    figure, axes = plt.subplots(1, len(call_gpus), figsize=(4.5 * len(call_gpus) + 2, 0.42 * len(calls) + 2.2),
                                squeeze=False, constrained_layout=True)
    for ax, call_gpu in zip(axes[0], call_gpus):
        mine = ok[ok["call_gpu"] == call_gpu]
        cells = {(row["call"], row["spin_gpu"], row["spin_stream"]): row for _, row in mine.iterrows()}
        ax.set_xlim(-0.5, len(columns) - 0.5)
        ax.set_ylim(len(calls) - 0.5, -0.5)
        for y, call in enumerate(calls):
            for x, (spin_gpu, stream) in enumerate(columns):
                row = cells.get((call, spin_gpu, stream))
                if row is None:
                    continue
                truth_cell(plt, ax, x, y, row["verdict"], cell_ms(row["host_ms"]), contradicts_docs(row))
        ax.set_xticks(range(len(columns)), [f"spin on GPU {gpu}\n{'same' if gpu == call_gpu else 'other'} GPU\n"
                                            f"({stream})" for gpu, stream in columns], fontsize=7)
        ax.xaxis.tick_top()
        ax.set_yticks(range(len(calls)), calls if ax is axes[0][0] else [""] * len(calls), fontsize=8)
        ax.set_xlabel(f"call made on GPU {call_gpu}", fontsize=9)
    truth_legend(plt, figure, list(HostVerdict), "not measured", len(HostVerdict) + 2)
    figure.suptitle(f"Does a call on one GPU wait for a {SPIN_MS:g} ms kernel on another? {gpu_label(ok)} "
                    "(cell: host time in ms; ! = contradicts the docs)", fontsize=10)
    return [("crossgpu_truth_table", figure)]


VIEW = View("crossgpu", headline, answer, (crossgpu_figure,),
            columns=("call", "call_gpu", "host_ms", "matches_docs", "spin_gpu", "spin_stream", "verdict"))
