"""Views: how each experiment's results are shown, one module each (``bench/views/<experiment>.py`` defining
``VIEW``), found by :func:`views`: its headline table, its answer in a sentence, its figures and the columns they read
(a view is handed only those). The helpers several views share are here.

The analysis side: may import :mod:`bench.analysis.selection`, :mod:`bench.analysis.plots`, :mod:`bench.results.schema`
and :mod:`bench.platform` (units, vocabulary, errors, env); never an experiment, the measuring tools, the catalogs or
the sweep (``tests/test_layout.py``). More: docs/reference/packages.md.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import compress

import pandas as pd

from bench.analysis.selection import natives
from bench.platform.vocabulary import Status


IDENTITY = ("experiment", "status", "run_id", "hostname", "gpu_uuid", "gpu_name", "git_commit", "driver_version",
            "cuda_runtime")  # columns every view may read: which experiment, whether ok, which run on which GPU


def no_answer(rows: pd.DataFrame, table: pd.DataFrame) -> None:
    return None


@dataclass(frozen=True)
class View:
    name: str  # the experiment's name
    headline: Callable[[pd.DataFrame], pd.DataFrame]  # (this experiment's rows) -> the numbers a summary shows
    answer: Callable[[pd.DataFrame, pd.DataFrame], str | None] = no_answer  # (its rows of one GPU, their headline)
    # -> its answer in one sentence for the report's summary, or None where the rows cannot give it
    figures: tuple[Callable, ...] = ()  # (rows of one GPU, side tables) -> [(file stem, matplotlib figure)]
    split_axis: str = ""  # an axis whose every value gets a set of figures of its own (where several were measured)
    columns: tuple[str, ...] = ()  # the columns headline, answer and figures read besides IDENTITY and split_axis
    tables: tuple[str, ...] = ()  # the side tables its figures read (the report hands them only those)

    def reads(self) -> tuple[str, ...]:
        """Every column the view reads: :data:`IDENTITY`, its ``split_axis`` and its ``columns``."""
        return tuple(dict.fromkeys(column for column in (*IDENTITY, self.split_axis, *self.columns) if column))


@functools.cache
def views() -> dict[str, View]:
    """Every view module's ``VIEW``, by experiment name."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        view = getattr(importlib.import_module(f"{__name__}.{info.name}"), "VIEW", None)
        if isinstance(view, View):
            found[view.name] = view
    return found


def in_order(experiments: Iterable[str]) -> dict[str, View]:
    """The views of ``experiments`` (their names, in order: the registry's, :func:`bench.experiments.registry`,
    handed down from the top), in that order; an experiment without a view is left out."""
    known = views()
    return {name: known[name] for name in experiments if name in known}


def counts(rows: pd.DataFrame) -> pd.DataFrame:
    """The headline of an experiment without a view (a test's): how many configurations, how many of them ok."""
    return pd.DataFrame({"configurations": [len(rows)], "ok": [int((rows["status"] == Status.OK).sum())]})


# --- what several views share ----------------------------------------------------------------------------------

def ok_rows(rows: pd.DataFrame, *columns: str) -> list[dict]:
    """The ok rows' ``columns``, each row a dict of values as :func:`bench.analysis.selection.records` has them (a missing
    integer or flag None): a headline of a few rows made without a pandas operation a value."""
    ok = rows["status"].to_numpy(dtype=object, na_value=None) == Status.OK
    values = [compress(natives(rows[column]), ok) for column in columns]
    return [dict(zip(columns, row)) for row in zip(*values)]


def grouped(rows: list[dict], *keys: str) -> dict[tuple, list[dict]]:
    """``rows`` (dicts) by their values of ``keys``, in the order each first appears, as ``DataFrame.groupby(keys,
    sort=False)`` groups them: a row missing one is left out."""
    found: dict[tuple, list[dict]] = {}
    for row in rows:
        key = tuple(row[name] for name in keys)
        if not any(pd.isna(value) for value in key):
            found.setdefault(key, []).append(row)
    return found


def firsts(rows: list[dict], index: str, columns: str, values: str) -> dict[tuple, object]:
    """(``index``, ``columns``) -> the first of ``values`` of the rows that have them, as ``pivot_table(...,
    aggfunc="first")`` takes it: a row missing any of the three is left out."""
    found: dict[tuple, object] = {}
    for row in rows:
        key = (row[index], row[columns])
        if not any(pd.isna(value) for value in (*key, row[values])):
            found.setdefault(key, row[values])
    return found


def peak(rows: list[dict], column: str) -> dict:
    """The first of ``rows`` with the largest ``column``, a missing value left out (as ``Series.idxmax`` picks it);
    ValueError where every one is missing."""
    return max((row for row in rows if not pd.isna(row[column])), key=lambda row: row[column])


def listed(names: Sequence[str], limit: int = 6) -> str:
    """'a, b, c and 4 more': names in a sentence, the first ``limit`` of them ('none' for no names)."""
    names = list(names)
    if len(names) <= limit:
        return ", ".join(names) or "none"
    return f"{', '.join(names[:limit])} and {len(names) - limit} more"


def span(values) -> str:
    """'2.7–5' for numbers from 2.7 to 5, '95' where they are all 95."""
    low, high = min(values), max(values)
    return f"{low:g}" if low == high else f"{low:g}–{high:g}"


def numbers(texts):
    """A headline column's texts as numbers: '1.5×' and '91.3%' read as 1.5 and 91.3, '—' as NaN."""
    return pd.to_numeric(pd.Series(list(texts), dtype=object).astype(str).str.rstrip("×%"), errors="coerce")


def catalog_answer(rows: pd.DataFrame, table: pd.DataFrame, verdict: str, what: str) -> str | None:
    """The answer of an experiment over a call catalog (with ``functools.partial``): the calls with ``verdict`` in
    some placement, which do ``what``."""
    ok = rows[rows["status"] == Status.OK]
    if not len(ok):
        return None
    calls = list(dict.fromkeys(ok.loc[ok["verdict"] == verdict, "call"]))
    return f"{len(calls)} of {ok['call'].nunique()} calls {what}: {listed(calls)}"
