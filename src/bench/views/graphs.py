"""The ``graphs`` experiment's view: enqueueing an allocating loop eagerly and as a graph, a synchronization in a
capture, stream order."""

from __future__ import annotations

import pandas as pd

from bench.analysis.selection import row_dicts
from bench.platform.units import format_size
from bench.views import View, ok_rows
from bench.platform.vocabulary import Status


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    ok = rows[rows["status"] == Status.OK]
    lines = []
    for row in row_dicts(ok):
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
    ok = ok_rows(rows, "case", "launch", "iterations", "bytes", "host_enqueue_ms", "sync_error", "trials",
                 "wrong_results")
    parts = []
    loop = _case(ok, "malloc-loop")
    if loop:
        most = {column: max(row[column] for row in loop if row[column] is not None)
                for column in ("iterations", "bytes")}
        largest = [row for row in loop if all(row[column] == value for column, value in most.items())]
        enqueue = {row["launch"]: row["host_enqueue_ms"] for row in largest}
        parts.append(f"host ms to enqueue {largest[0]['iterations']} mallocAsync iterations: "
                     + ", ".join(f"{launch} {ms:.3f}" for launch, ms in enqueue.items()))
    capture = _case(ok, "sync-in-capture")
    if capture:
        parts.append("synchronizing in a capture: " + ("refused" if capture[0]["sync_error"] else "allowed"))
    order = _case(ok, "stream-order")
    if order:
        parts.append(f"stream order: {_total(order, 'wrong_results')} wrong of {_total(order, 'trials')} "
                     "unsynchronized chains")
    return "; ".join(parts) or None


def _case(rows: list[dict], case: str) -> list[dict]:
    """The rows of ``case``."""
    return [row for row in rows if row["case"] == case]


def _total(rows: list[dict], column: str) -> int:
    """The sum of ``column``, a missing value left out."""
    return sum(row[column] for row in rows if row[column] is not None)


VIEW = View("graphs", headline, answer,
            columns=("bytes", "capture_state_after_sync", "case", "graph_equals_eager", "host_enqueue_ms",
                     "iterations", "launch", "median", "sync_error", "trials", "wrong_results"))
