"""The ``connections`` experiment's view: the makespan of depth-first spins per connection setting and stream count."""

from __future__ import annotations

import pandas as pd

from bench.analysis.selection import row_dicts
from bench.views import View, firsts, ok_rows
from bench.platform.vocabulary import CONNECTIONS_STREAMS, CONNECTIONS_VARIABLE, Connections, Status, values

CONNECTIONS = values(Connections)  # in this order: a line each


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Spins: the makespan in spin lengths per connection setting and stream count."""
    spins = [row for row in ok_rows(rows, "workload", "connections", "streams", "spin_lengths")
             if row["workload"] == "spins"]
    if not spins:
        return pd.DataFrame()
    lengths = firsts(spins, "connections", "streams", "spin_lengths")
    headings = {streams: f"{streams} streams, spin lengths" for streams in sorted({key[1] for key in lengths})}
    present = {key[0] for key in lengths}
    return pd.DataFrame([{"connections": value, **{heading: _lengths(lengths.get((value, streams)))
                                                   for streams, heading in headings.items()}}
                         for value in CONNECTIONS if value in present], columns=["connections", *headings.values()])


def _lengths(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def answer(rows: pd.DataFrame, table: pd.DataFrame) -> str | None:
    """The makespan of the most streams, per connection setting."""
    if not len(table):
        return None
    most = table.columns[-1]
    return (f"{most.split(',')[0]} of two spins each take, in spin lengths (2: all side by side), with "
            f"{CONNECTIONS_VARIABLE}: "
            + ", ".join(f"{line['connections']} {line[most]}" for line in row_dicts(table)))


def connections_figure(rows: pd.DataFrame, tables: dict) -> list:
    from bench.analysis.plots import gpu_label, pyplot

    ok = rows[(rows["experiment"] == "connections") & (rows["status"] == Status.OK)]
    spins = ok[ok["workload"] == "spins"]
    if not len(spins):
        return []
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(8, 5), constrained_layout=True)
    for connections in CONNECTIONS:
        group = spins[spins["connections"] == connections].sort_values("streams")
        if len(group):
            ax.plot(group["streams"], group["spin_lengths"], marker="o", label=f"{CONNECTIONS_VARIABLE}={connections}",
                    linestyle="--" if connections == Connections.ONE_AFTER_INIT else "-")
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(CONNECTIONS_STREAMS), [str(value) for value in CONNECTIONS_STREAMS])
    ax.set_xlabel("streams, two dependent spin kernels each, issued depth-first")
    ax.set_ylabel("makespan in spin lengths (2 = all streams side by side)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    pipeline = ok[ok["workload"] == "pipeline"]
    note = "; ".join(f"{row['connections']}: {row['efficiency']:.0%}" for _, row in pipeline.iterrows())
    ax.set_title(f"Hardware queues ({CONNECTIONS_VARIABLE}) on {gpu_label(spins)}"
                 + (f"\npipeline efficiency at 8 streams — {note}" if note else ""), fontsize=10)
    return [("connections", figure)]


VIEW = View("connections", headline, answer, (connections_figure,),
            columns=("connections", "efficiency", "spin_lengths", "streams", "workload"))
