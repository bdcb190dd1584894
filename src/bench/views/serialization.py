"""The ``serialization`` experiment's view: the calls that keep kernels on two streams from overlapping; the truth table
it shares with ``blocking`` (:func:`bench.analysis.plots.truth_table_figure`)."""

from __future__ import annotations

from functools import partial

import pandas as pd

from bench.analysis.selection import row_dicts
from bench.analysis.plots import truth_table_figure
from bench.views import View, catalog_answer
from bench.platform.vocabulary import DeviceVerdict, Status


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Calls that kept the two kernels from overlapping, and why."""
    ok = rows[(rows["status"] == Status.OK) & (rows["verdict"] != DeviceVerdict.OVERLAPS)]
    return pd.DataFrame([{
        "call": row["call"], "placement": row["placement"], "streams": row["spin_stream"],
        "overlap ms": f"{row['overlap_ms']:.2f}", "verdict": row["verdict"],
        "cause": "host waited" if row["host_waited"] else "device",
    } for row in row_dicts(ok)])


VIEW = View("serialization", headline, partial(catalog_answer, verdict=DeviceVerdict.SERIALIZES,
                                              what="keep kernels on two streams from overlapping in some placement"),
            (truth_table_figure,),
            columns=("call", "host_ms", "host_waited", "matches_docs", "overlap_ms", "placement", "spin_stream",
                     "verdict"))
