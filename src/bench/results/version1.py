"""Version 1 rows (bench before the one-sample schema) as version 2 rows: :func:`bench.results.store.read` converts a
version 1 file with :func:`from_version_1` as it reads it.

Version 1 rows kept their raw samples under experiment-specific names (``samples_ms``, ``host_us_samples``,
``host_ms_samples``, ``cycle_us_samples``, ...), stored yes/no/unknown flags as the text 'true'/'false'/'', and
held a graphs malloc-loop's eager and graph timings in one row. Version 2 has one set of sample columns with a unit
and a clock, nullable booleans, and one row per launch way. pandas and numpy only; imports nothing of bench.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.platform.vocabulary import Clock, Unit

# experiment -> (v1 samples column, unit, clock, metric, v1 median/min/max columns)
_SAMPLES = {
    "bandwidth": ("samples_ms", Unit.MS, Clock.GPU, "GPU time per copy", ("median_ms", "min_ms", "max_ms")),
    "overlap": ("samples_ms", Unit.MS, Clock.GPU, "GPU time of one pipeline run (makespan)",
                ("median_ms", "min_ms", "max_ms")),
    "launch": ("host_us_samples", Unit.US, Clock.HOST, "host time per kernel launch", ("host_us_per_launch", "min_us",
                                                                                 "max_us")),
    "blocking": ("host_ms_samples", Unit.MS, Clock.HOST, "host time of the call while a kernel runs", ("host_ms",)),
}
_TEXT_FLAGS = ("docs_waits", "matches_docs", "docs_serializes")


def from_version_1(rows: pd.DataFrame) -> pd.DataFrame:
    """Version 1 rows as version 2 rows."""
    if not len(rows) or "experiment" not in rows:
        return rows
    parts = [_convert(name, group.copy()) for name, group in rows.groupby("experiment", sort=False)]
    return pd.concat(parts, ignore_index=True)


def _convert(name: str, rows: pd.DataFrame) -> pd.DataFrame:
    for column in _TEXT_FLAGS:
        if column in rows:
            rows[column] = rows[column].map({"true": True, "false": False, "": None, None: None})
    if name in _SAMPLES:
        source, unit, clock, metric, statistics = _SAMPLES[name]
        _set_samples(rows, rows[source] if source in rows else None, unit, clock, metric)
        for new, old in zip(("median", "min", "max"), statistics):
            if old in rows and old not in ("host_ms", "host_us_per_launch"):
                rows[new] = rows[old]
        rows = rows.drop(columns=[c for c in (source, "samples_ms", "median_ms", "min_ms", "max_ms", "min_us",
                                              "max_us") if c in rows])
    elif name == "alloc":
        single = rows["pattern"] == "single"
        samples = rows["cycle_us_samples"].where(single, rows.get("host_us_per_iteration_samples"))
        _set_samples(rows, samples, Unit.US, Clock.HOST, None)
        rows["metric"] = np.where(single, "host time of one allocate + free round trip",
                                  "host time per (allocate, kernel, free) iteration")
        rows = rows.drop(columns=[c for c in ("cycle_us_samples", "host_us_per_iteration_samples") if c in rows])
    elif name == "graphs":
        rows = _split_graph_rows(rows)
    elif name == "serialization":
        rows["metric"] = "makespan of the two kernels"
    return rows


def _set_samples(rows: pd.DataFrame, samples, unit: str, clock: str, metric: str | None) -> None:
    lists = [list(map(float, s)) if s is not None and not (isinstance(s, float) and s != s) else []
             for s in (samples if samples is not None else [None] * len(rows))]
    rows["samples"] = lists
    rows["unit"], rows["clock"] = unit, clock
    if metric:
        rows["metric"] = metric
    rows["n_samples"] = [len(s) for s in lists]
    rows["median"] = [float(np.median(s)) if s else np.nan for s in lists]
    rows["min"] = [min(s) if s else np.nan for s in lists]
    rows["max"] = [max(s) if s else np.nan for s in lists]


def _split_graph_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """One version 1 malloc-loop row (eager and graph timings side by side) as two rows, one per ``launch``."""
    out = []
    for _, row in rows.iterrows():
        if row["case"] != "malloc-loop":
            out.append({**row.to_dict(), "launch": "graph" if row["case"] == "sync-in-capture" else "eager"})
            continue
        for way in ("eager", "graph"):
            samples = row.get(f"{way}_ms_samples")
            samples = list(map(float, samples)) if samples is not None and len(samples) else []
            out.append({**row.to_dict(), "launch": way, "samples": samples, "unit": "ms", "clock": "gpu",
                        "metric": "GPU time of the whole loop", "n_samples": len(samples),
                        "median": float(np.median(samples)) if samples else np.nan,
                        "min": min(samples) if samples else np.nan, "max": max(samples) if samples else np.nan,
                        "host_enqueue_ms": row.get(f"{way}_host_ms")})
    frame = pd.DataFrame(out)
    return frame.drop(columns=[c for c in frame.columns if c.startswith(("eager_", "graph_ms", "graph_host"))
                               or c == "graph_speedup"])
