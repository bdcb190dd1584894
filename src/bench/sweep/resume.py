"""Resuming an interrupted sweep: what its file holds (:class:`Earlier`), the GPUs it ran on, the checks that it
can be finished here, and what it still lacks.

It imports :mod:`bench.results.store` and :mod:`bench.sweep.plan`; nothing CUDA.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow as pa

from bench.results import store, writes
from bench.platform.errors import ResultsError, UsageError
from bench.sweep.plan import Plan, config_key
from bench.platform.vocabulary import Status


@dataclass(frozen=True)
class Earlier:
    """An interrupted sweep's file, read before anything runs: its rows and side tables."""

    path: Path
    rows: pd.DataFrame
    tables: Mapping[str, pd.DataFrame] = field(default_factory=dict)


def devices_of(path: Path) -> Sequence[int]:
    """The GPUs the sweep of ``path`` ran on, as its metadata names them (empty: one, ``--device``'s); ResultsError
    where they are not GPU ordinals."""
    devices = store.read_metadata(path).get("devices") or []
    if not isinstance(devices, list) or not all(isinstance(device, int) and device >= 0 for device in devices):
        raise ResultsError(f"--resume: {path} names its GPUs as {str(devices)[:40]!r}, not as GPU ordinals")
    return tuple(devices)


def read(path: Path, schema: pa.Schema) -> Earlier:
    """The file to resume, its rows typed by ``schema`` (the suite's); UsageError for one of an older schema version,
    or one whose directory takes no file (ResultsError for one that cannot be read)."""
    version = store.read_metadata(path).get("schema_version", 1)
    if version != store.SCHEMA_VERSION:
        raise UsageError(f"--resume: {path} was written by an older bench (schema version {version}); start a new "
                         "sweep")
    earlier = Earlier(path, store.read(path, schema), store.side_tables(path))
    writes.write_target(path, "--resume")
    writes.writable_directory(path.parent, "--resume")
    return earlier


def check_gpus(earlier: Earlier, uuids: Mapping[int, str]) -> None:
    """UsageError unless the file was measured on the GPUs selected now (``uuids``: device ordinal -> GPU UUID)."""
    rows = earlier.rows
    measured_on = set(rows["gpu_uuid"].dropna()) if "gpu_uuid" in rows else set()
    if measured_on and not measured_on <= set(uuids.values()):
        raise UsageError(f"--resume: {earlier.path} was measured on another GPU "
                         f"({', '.join(sorted(measured_on - set(uuids.values())))}); a sweep of several GPUs resumes "
                         "with the same --devices")


def remaining(plans: Sequence[Plan], earlier: Earlier, uuids: Mapping[int, str]) -> list[Plan]:
    """The plans minus what the file finished on each plan's GPU (:func:`without_done`)."""
    return without_done(plans, earlier.rows, uuids)


DONE_STATUSES = (Status.OK, Status.UNSUPPORTED, Status.SKIPPED)


def without_done(plans: Sequence[Plan], previous, uuids: Mapping[int, str] | None = None) -> list[Plan]:
    """The plans minus the configurations ``previous`` rows (a DataFrame) finished (status ok, unsupported or
    skipped); failed ones run again. ``uuids`` (device ordinal -> GPU UUID): a plan counts only rows of its own
    GPU (a multi-GPU plan's rows carry its first GPU)."""
    if previous is None or not len(previous):
        return list(plans)
    finished = previous[previous["status"].isin(DONE_STATUSES)]
    left = []
    for item in plans:
        axes = list(item.experiment.axes)
        mine = finished[finished["experiment"] == item.experiment.name]
        if uuids and "gpu_uuid" in mine:
            mine = mine[mine["gpu_uuid"] == uuids[item.devices[0]]]
        done = {config_key(item.experiment.name, row, axes) for _, row in mine.iterrows()
                if all(axis in row and row[axis] is not None and row[axis] == row[axis] for axis in axes)}
        left.append(dataclasses.replace(item, configs=[
            config for config in item.configs if config_key(item.experiment.name, config, axes) not in done]))
    return left
