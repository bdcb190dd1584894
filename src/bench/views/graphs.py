"""The ``graphs`` experiment's view: enqueueing an allocating loop eagerly and as a graph, a synchronization in a
capture, stream order."""

from __future__ import annotations

import pandas as pd

from bench.units import format_size
from bench.views import View
from bench.vocabulary import Status


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    ok = rows[rows["status"] == Status.OK]
    lines = []
    for _, row in ok.iterrows():
        where = f"{row['iterations']} × {format_size(int(row['bytes']))}"
        gpu_ms = enqueue_ms = ""
        if row["case"] == "malloc-loop":
            gpu_ms, enqueue_ms = f"{row['median']:.3f}", f"{row['host_enqueue_ms']:.3f}"
            outcome = f"graph and eager outputs {'equal' if row['graph_equals_eager'] else 'NOT equal'}"
        elif row["case"] == "sync-in-capture":
            outcome = f"{row['sync_error'] or 'no error'}; capture {row['capture_state_after_sync']}"
        else:
            outcome = f"{row['wrong_results']} wrong of {row['trials']} trials"
        lines.append({"case": row["case"], "launch": row["launch"], "size": where, "GPU ms": gpu_ms,
                      "host ms to enqueue": enqueue_ms, "outcome": outcome})
    return pd.DataFrame(lines)


def answer(rows: pd.DataFrame, table: pd.DataFrame) -> str | None:
    """Enqueueing an allocating loop eagerly and as a graph, synchronizing in a capture, and stream order."""
    ok = rows[rows["status"] == Status.OK]
    parts = []
    loop = ok[ok["case"] == "malloc-loop"]
    if len(loop):
        largest = loop[(loop["iterations"] == loop["iterations"].max()) & (loop["bytes"] == loop["bytes"].max())]
        enqueue = {row["launch"]: row["host_enqueue_ms"] for _, row in largest.iterrows()}
        parts.append(f"host ms to enqueue {largest['iterations'].iloc[0]} mallocAsync iterations: "
                     + ", ".join(f"{launch} {ms:.3f}" for launch, ms in enqueue.items()))
    capture = ok[ok["case"] == "sync-in-capture"]
    if len(capture):
        parts.append("synchronizing in a capture: " + ("refused" if capture["sync_error"].iloc[0] else "allowed"))
    order = ok[ok["case"] == "stream-order"]
    if len(order):
        parts.append(f"stream order: {int(order['wrong_results'].sum())} wrong of {int(order['trials'].sum())} "
                     "unsynchronized chains")
    return "; ".join(parts) or None


VIEW = View("graphs", headline, answer,
            columns=("bytes", "capture_state_after_sync", "case", "graph_equals_eager", "host_enqueue_ms",
                     "iterations", "launch", "median", "sync_error", "trials", "wrong_results"))
