"""How far results move by themselves, for :mod:`bench.analysis.compare`: whether a row is below its accuracy floor
(:func:`below_floor`: its ``floor_met``, or its samples against the floor), and the machine-to-machine spread of a GPU
kind (:class:`Record`: each machine's newest row at its floor, over the results handed in). pandas only; never
imports CUDA. The rules: docs/compare.md.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from bench.analysis import selection
from bench.analysis.selection import Gpu
from bench.timing import UNITS, Floor, median

MEASURED = ("unit", "samples", "floor_met")  # what a configuration's median and floor are read from


def below_floor(row: Mapping, samples: list[float], floor: Floor) -> bool:
    """Whether ``row`` (its ``samples`` in any one unit) was measured below ``floor``, its experiment's: as the row
    recorded it (``floor_met``), else as its samples say."""
    met = row.get("floor_met")
    if met is not None and not pd.isna(met):
        return not bool(met)
    return bool(len(samples)) and not floor.met(samples)


def one_kind(old: Gpu, new: Gpu) -> bool:
    """Whether ``old`` and ``new`` are two machines of one kind: the same GPU name, different UUIDs."""
    return bool(new.name) and old.name == new.name and old.uuid != new.uuid


def kinds_across_machines(old: pd.DataFrame, new: pd.DataFrame) -> set[str]:
    """The GPU names both results hold on different machines: the kinds whose spread a comparison may need."""
    uuids = [{}, {}]
    for found, rows in zip(uuids, (old, new)):
        for gpu in selection.gpus(rows):
            found.setdefault(gpu.name, set()).add(gpu.uuid)
    return {name for name in uuids[0].keys() & uuids[1].keys() if name and uuids[0][name] != uuids[1][name]}


class Record:
    """The newest medians at their floor of every GPU in ``frames`` (results of any machines), by GPU kind and
    experiment, worked out on the first question about that kind and experiment."""

    def __init__(self, frames: list[pd.DataFrame], experiments: Mapping) -> None:
        self.frames, self.experiments = frames, experiments
        self.kinds: dict[str, pd.DataFrame] = {}
        self.found: dict[tuple[str, str], dict[Gpu, dict[tuple, float]]] = {}

    def spreads(self, experiment: str, old: Gpu, new: Gpu) -> dict[tuple, tuple[float, int]]:
        """For two machines of one kind, each configuration of ``experiment`` (by its axis values) with its spread
        and how many machines it is over, where at least two measured it; nothing for any other two GPUs."""
        if not one_kind(old, new):
            return {}
        medians: dict[tuple, list[float]] = {}
        for gpu, found in self._medians(new.name, experiment).items():
            if gpu.uuid != new.uuid:
                for key, median in found.items():
                    medians.setdefault(key, []).append(median)
        return {key: (max(values) / min(values) - 1, len(values)) for key, values in medians.items()
                if len(values) > 1 and min(values) > 0}

    def machines(self, experiment: str, new: Gpu) -> int:
        """How many machines of ``new``'s kind measured ``experiment`` on record, ``new`` left out."""
        return sum(gpu.uuid != new.uuid for gpu in self._medians(new.name, experiment))

    def _medians(self, kind: str, experiment: str) -> dict[Gpu, dict[tuple, float]]:
        """Each GPU of ``kind`` with the median of each configuration of ``experiment``: its newest row, at its
        floor."""
        if (kind, experiment) in self.found:
            return self.found[kind, experiment]
        rows = self._kind(kind)
        rows = selection.newest(rows[rows["experiment"] == experiment], self.experiments)
        axes, floor = list(self.experiments[experiment].axes), self.experiments[experiment].accuracy.floor
        self.found[kind, experiment] = {
            gpu: {key: median(samples) for key, row in selection.keyed(mine, axes).items()
                  if (samples := _in_ms(row)) and not below_floor(row, samples, floor)}
            for gpu, mine in selection.by_gpu(rows)}
        return self.found[kind, experiment]

    def _kind(self, kind: str) -> pd.DataFrame:
        """The rows of ``frames`` of GPUs named ``kind``, of the columns a median reads (any experiment's)."""
        if kind not in self.kinds:
            axes = {axis for experiment in self.experiments.values() for axis in experiment.axes}
            wanted = {"experiment", "gpu_name", "run_id", *MEASURED, *selection.MACHINE, *axes}
            frames = [rows.loc[rows["gpu_name"] == kind, [column for column in rows.columns if column in wanted]]
                      for rows in self.frames if {"experiment", "gpu_name"} <= set(rows.columns)]
            self.kinds[kind] = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
                columns=["experiment", "gpu_name"])
        return self.kinds[kind]


def _in_ms(row: dict) -> list[float]:
    """A row's samples in ms where its unit is a time, else as they are."""
    scale = UNITS["ms"] / UNITS[row["unit"]] if row.get("unit") in UNITS else 1.0
    return [value * scale for value in selection.samples_of(row)]
