"""Choosing rows to analyse: the newest measurement of each configuration on each GPU, and one GPU of many; rows
by configuration and their raw samples; and reading the verdict rows of the call catalogs (the report's truth tables
and their figures). pandas only; never imports CUDA, and never an experiment: what identifies a configuration comes
in with the experiments' descriptions (``experiments``: name -> description, :func:`bench.experiments.registry`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import NamedTuple

import numpy as np
import pandas as pd

from bench.platform.errors import UsageError

MACHINE = ("hostname", "gpu_uuid")  # what tells GPUs apart across a fleet


class Gpu(NamedTuple):
    """One GPU of a fleet: its host, its UUID and its name."""

    host: str
    uuid: str
    name: str

    def __str__(self) -> str:
        return f"{self.name} {self.uuid} on {self.host}"

    @property
    def tag(self) -> str:
        """'0ae58127': the start of the UUID."""
        return self.uuid.removeprefix("GPU-")[:8]

    @property
    def short(self) -> str:
        """'NVIDIA H200 0ae58127': the name and the start of the UUID."""
        return f"{self.name} {self.tag}".strip()


def config_columns(experiment: str, experiments: Mapping) -> list[str]:
    """The axes that identify a configuration of ``experiment`` (none for an experiment not in ``experiments``)."""
    known = experiments.get(experiment)
    return list(known.axes) if known else []


def key_frame(rows: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Those of ``columns`` that ``rows`` has, as Python objects, every kind of missing value as "": keys to group
    or match rows by."""
    present = [column for column in columns if column in rows]
    values = rows[present].to_numpy(dtype=object, copy=True)
    values[pd.isna(values)] = ""
    return pd.DataFrame(values, index=rows.index, columns=present, dtype=object)


def keyed(rows: pd.DataFrame, axes: list[str]) -> dict[tuple, dict]:
    """Each row as a dict (:func:`records`), by its values of ``axes`` (missing values as "")."""
    keys = key_frame(rows, axes)
    return dict(zip(map(tuple, keys.itertuples(index=False)), records(rows)))


def records(rows: pd.DataFrame) -> list[dict]:
    """Each row as a dict, as ``rows.to_dict("records")`` makes them of the columns results hold (numbers and flags
    as Python's, a missing integer or flag as None, a missing text as NaN, lists as they are; dates and times are
    not among them), a column at a time rather than a cell at a time."""
    columns = [natives(rows.iloc[:, index]) for index in range(len(rows.columns))]
    names = rows.columns.tolist()
    return [dict(zip(names, row)) for row in zip(*columns)] if columns else [{} for _ in range(len(rows))]


def row_dicts(rows: pd.DataFrame) -> list[dict]:
    """Each row as a dict of the very values ``rows.iterrows()`` gives it, of one conversion of the frame rather than
    a Series a row."""
    names = rows.columns.tolist()
    return [dict(zip(names, values)) for values in rows.values]


def natives(column: pd.Series) -> list:
    """A column's values as :func:`records` has them."""
    if isinstance(column.dtype, np.dtype) and column.dtype != object:
        return column.to_numpy().tolist()
    if isinstance(column.dtype, pd.api.extensions.ExtensionDtype) and column.dtype.kind in "iub":  # Int64, boolean
        return column.to_numpy(dtype=object, na_value=None).tolist()
    if isinstance(column.dtype, pd.StringDtype):  # texts: Python's, a missing one NaN (or None for pd.NA)
        return column.to_numpy(dtype=object, na_value=None if column.dtype.na_value is pd.NA else np.nan).tolist()
    return [_native(value) for value in column.to_numpy(dtype=object)]


def _native(value):
    if isinstance(value, np.generic):
        return value.item()
    return None if value is pd.NA else value


def samples_of(row: Mapping) -> list[float]:
    """A row's raw samples (none where it has no samples column or kept none)."""
    values = row.get("samples")
    if values is None or (isinstance(values, float) and math.isnan(values)):
        return []
    return [float(value) for value in values]


def only(rows: pd.DataFrame, columns: Iterable[str]) -> pd.DataFrame:
    """``rows`` with only those of ``columns`` they have (in the frame's order, the same index): a reader that
    declares the columns it reads copies only those when it selects rows."""
    wanted = set(columns)
    return rows[[column for column in rows.columns if column in wanted]]


def newest(rows: pd.DataFrame, experiments: Mapping) -> pd.DataFrame:
    """Of several measurements of a configuration on one GPU, the newest (run ids are UTC timestamps); every GPU
    and host keeps its own. Runs that measured different configurations (a 256 MiB and a 1 GiB overlap run) both
    stay. A configuration is its experiment's axes (of ``experiments``)."""
    if not len(rows) or "run_id" not in rows or "experiment" not in rows:
        return rows
    kept = np.zeros(len(rows), dtype=bool)
    for name, positions in rows.groupby("experiment", sort=False).indices.items():
        columns = [column for column in (*MACHINE, *config_columns(name, experiments), "run_id") if column in rows]
        group = rows.iloc[positions, [rows.columns.get_loc(column) for column in columns]]  # a few columns, not all
        runs = group["run_id"]
        if runs.notna().all() and runs.nunique() == 1:  # one run measured them all: each is its own newest
            kept[positions] = True
            continue
        keys = key_frame(group, columns[:-1])
        if not len(keys.columns):
            kept[positions] = True
            continue
        runs = pd.Series(pd.factorize(runs, sort=True)[0], index=group.index)  # run ids in order, missing ones -1
        latest = runs.groupby([keys[column] for column in keys.columns]).transform("max")
        kept[positions] = ((runs == latest) & (runs >= 0)).to_numpy(dtype=bool)
    return rows[kept].sort_index().reset_index(drop=True)


def gpus(rows: pd.DataFrame) -> list[Gpu]:
    """Every GPU in the rows, sorted by host and UUID."""
    columns = [*MACHINE, "gpu_name"]
    if not len(rows) or not set(columns) <= set(rows.columns):
        return []
    return sorted({Gpu(*map(str, values)) for values in key_frame(rows, columns).itertuples(index=False)})


def rows_of(rows: pd.DataFrame, *machines: Gpu) -> pd.DataFrame:
    """The rows measured on any of ``machines``."""
    keys = key_frame(rows, list(MACHINE))
    chosen = pd.MultiIndex.from_frame(keys).isin([(gpu.host, gpu.uuid) for gpu in machines])
    return rows[chosen].reset_index(drop=True)


def by_gpu(rows: pd.DataFrame) -> list[tuple[Gpu, pd.DataFrame]]:
    """Each GPU with its rows, in a stable order (rows that name no GPU form one group of their own)."""
    found = gpus(rows)
    if not found:
        return [(Gpu("", "", ""), rows)] if len(rows) else []
    positions: dict[tuple, list[int]] = {}
    for index, machine in enumerate(key_frame(rows, list(MACHINE)).itertuples(index=False)):
        positions.setdefault(tuple(machine), []).append(index)
    return [(gpu, rows.take(positions.get((gpu.host, gpu.uuid), [])).reset_index(drop=True)) for gpu in found]


def select_gpu(rows: pd.DataFrame, gpu: str | None) -> pd.DataFrame:
    """Only the rows of the GPUs ``gpu`` names: a hostname names every GPU on that host; otherwise one GPU, by its
    UUID or the start of it, or its name. UsageError when none matches, or when a UUID or name matches several
    GPUs."""
    if gpu is None:
        return rows
    wanted = gpu.lower()
    found = gpus(rows)
    on_host = [machine for machine in found if machine.host.lower() == wanted]
    if on_host:
        return rows_of(rows, *on_host)
    matching = [machine for machine in found
                if machine.uuid.lower().startswith(wanted) or machine.uuid.lower().removeprefix("gpu-").startswith(
                    wanted) or wanted == machine.name.lower()]
    if not matching:
        known = "; ".join(map(str, found)) or "none"
        raise UsageError(f"--gpu {gpu}: no such GPU in the results (they hold: {known})")
    if len(matching) > 1:
        raise UsageError(f"--gpu {gpu}: matches {len(matching)} GPUs ({'; '.join(map(str, matching))}); give "
                         "more of a UUID, or a hostname")
    return rows_of(rows, matching[0])


# --- reading verdict rows --------------------------------------------------------------------------------------

def contradicts_docs(row) -> bool:
    """Whether a row's measurement contradicts the documentation (False where the docs say nothing)."""
    value = row["matches_docs"]
    return value is not None and value is not pd.NA and not bool(value)
