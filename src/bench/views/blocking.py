"""The ``blocking`` experiment's view: the calls that wait for the device, and where the documentation is contradicted;
the truth table it shares with ``serialization`` (:func:`bench.analysis.plots.truth_table_figure`)."""

from __future__ import annotations

from functools import partial

import pandas as pd

from bench.analysis.selection import contradicts_docs
from bench.analysis.plots import truth_table_figure
from bench.views import View, catalog_answer, ok_rows
from bench.platform.vocabulary import HostVerdict


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Calls that wait for the device, and rows that contradict the documentation."""
    ok = ok_rows(rows, "call", "placement", "spin_stream", "host_ms", "verdict", "matches_docs")
    findings = (("waits for the device", lambda row: row["verdict"] == HostVerdict.WAITS_FOR_DEVICE),
                ("contradicts the docs", contradicts_docs))
    return pd.DataFrame([{"finding": label, "call": row["call"], "placement": row["placement"],
                          "spinning stream": row["spin_stream"], "host ms": f"{row['host_ms']:.3f}",
                          "verdict": row["verdict"]} for label, chosen in findings for row in ok if chosen(row)])


VIEW = View("blocking", headline, partial(catalog_answer, verdict=HostVerdict.WAITS_FOR_DEVICE,
                                         what="wait for a running kernel in some placement"),
            (truth_table_figure,),
            columns=("call", "host_ms", "host_waited", "matches_docs", "placement", "spin_stream", "verdict"))
