"""The ``blocking`` experiment's view: the calls that wait for the device, and where the documentation is contradicted;
the truth table it shares with ``serialization`` (:func:`bench.plots.truth_table_figure`)."""

from __future__ import annotations

from functools import partial

import pandas as pd

from bench.plots import truth_table_figure
from bench.views import View, catalog_answer
from bench.vocabulary import HostVerdict, Status


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Calls that wait for the device, and rows that contradict the documentation."""
    ok = rows[rows["status"] == Status.OK]
    waits = ok[ok["verdict"] == HostVerdict.WAITS_FOR_DEVICE]
    contradicted = ok[ok["matches_docs"].eq(False).fillna(False).astype(bool)]  # as contradicts_docs, for a frame
    lines = []
    for label, group in (("waits for the device", waits), ("contradicts the docs", contradicted)):
        for _, row in group.iterrows():
            lines.append({"finding": label, "call": row["call"], "placement": row["placement"],
                          "spinning stream": row["spin_stream"], "host ms": f"{row['host_ms']:.3f}",
                          "verdict": row["verdict"]})
    return pd.DataFrame(lines)


VIEW = View("blocking", headline, partial(catalog_answer, verdict=HostVerdict.WAITS_FOR_DEVICE,
                                         what="wait for a running kernel in some placement"),
            (truth_table_figure,),
            columns=("call", "host_ms", "host_waited", "matches_docs", "placement", "spin_stream", "verdict"))
