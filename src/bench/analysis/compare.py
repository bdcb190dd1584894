"""What changed between two results, configuration by configuration, for every experiment (``bench compare``). pandas
only; never imports CUDA.

Both sides keep the newest measurement of each configuration per GPU; GPUs pair up by host and UUID (or, one left on
each side, with each other) and configurations by their axis values. An outcome that differs is ``changed``;
otherwise the samples are judged (:func:`verdict`: ``same``, ``faster``, ``slower`` or ``unclear``, beyond both rows'
uncertainty and :data:`SAME_WITHIN`), and a change between two machines of one kind against the machine-to-machine
spread on record (:mod:`bench.analysis.noise`, :func:`spread_bounds`). The headlines: outcome changes, configurations
slower or faster beyond noise, claims whose verdict changed. The rules in full: docs/compare.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
import pandas as pd

from bench.analysis import selection, noise
from bench.analysis.numbers import change_percent, decimals, number
from bench.analysis.selection import Gpu
from bench.platform.errors import UsageError
from bench.platform.libraries import LIBRARIES
from bench.timing import Floor, median, median_interval
from bench.platform.units import format_size
from bench.platform.vocabulary import Change, Status, values

ENVIRONMENT_COLUMNS = ("driver_version", "cuda_driver", "cuda_runtime", "pcie_gen", "pcie_width",
                       *(library.version_column for library in LIBRARIES))  # a change is said where both sides have it
SAME_WITHIN = 0.01  # medians closer than this (relative) are the same, however well the samples pin them down
HEADLINES_PER_EXPERIMENT = 8  # slower/faster configurations named per experiment, largest change first
RATES = {"bandwidth": ("gbps", "GB/s")}  # experiments whose changes read better as a rate than as a time
SIZE_AXES = ("bytes", "total_bytes")
NAMED_AXES = ("placement", "spin_stream", "release_threshold", "launch")  # text axes whose values need their name
TO_MS = {"ms": 1.0, "us": 1e-3}
COLUMNS = ["experiment", "gpu", "configuration", "unit", "old", "new", "ratio", "verdict", "change", "note",
           "machine_spread", "machine_spread_low", "machine_spread_high", "beyond_machine_spread"]
UNSPREAD = {"machine_spread": math.nan, "machine_spread_low": math.nan, "machine_spread_high": math.nan,
            "beyond_machine_spread": None}  # a line with no machine-to-machine spread
VERDICTS = values(Change)
JUDGED = ("status", "error", "unit", "samples", "floor_met")  # what judging rows reads beside axes, outcome, rate


def verdict(old: list[float], new: list[float]) -> str:
    """``same``, ``faster``, ``slower`` or ``unclear`` for two lists of samples of a time (docs/compare.md's rules; the
    accuracy floor aside, which needs the rows)."""
    if not len(old) or not len(new):
        return Change.UNCLEAR
    before, after = median(old), median(new)
    if before == after:
        return Change.SAME
    if before <= 0:
        return Change.UNCLEAR
    if abs(after / before - 1) <= SAME_WITHIN:
        return Change.SAME
    intervals = median_interval(old), median_interval(new)
    if None in intervals:
        return Change.UNCLEAR
    (old_low, old_high), (new_low, new_high) = intervals
    if new_low <= old_high and old_low <= new_high:
        return Change.SAME
    return Change.SLOWER if after > before else Change.FASTER


@dataclass(frozen=True)
class Pair:
    """One experiment measured on ``old`` (in the old results) and ``new`` (in the new ones)."""

    experiment: str
    old: Gpu
    new: Gpu
    hosts: bool = False  # name the hosts in the label (the results span several)

    @property
    def label(self) -> str:
        """'NVIDIA H200 0ae58127', 'NVIDIA H200 0ae58127 → 1b2c3d4e'; with hosts 'NVIDIA H200 0ae58127 on node-a',
        'NVIDIA H200 0ae58127 on node-a → 1b2c3d4e on node-b'."""
        def on(gpu: Gpu) -> str:
            return f" on {gpu.host}" if self.hosts else ""

        if self.old == self.new:
            return self.new.short + on(self.new)
        old = self.old.short + (on(self.old) if self.old.host != self.new.host else "")
        new = self.new.tag if self.old.name == self.new.name else self.new.short
        return f"{old} → {new}{on(self.new)}"


@dataclass(frozen=True)
class Comparison:
    table: pd.DataFrame  # COLUMNS: old/new are median times in unit, ratio new/old; change says what changed
    warnings: list[str] = field(default_factory=list)
    headlines: list[str] = field(default_factory=list)

    @cached_property  # asked of every line a listing shows
    def several_gpus(self) -> bool:
        return self.table["gpu"].nunique() > 1

    def slower_than(self, percent: float) -> pd.DataFrame:
        """Configurations judged slower by more than ``percent``."""
        table = self.table
        return table[(table["verdict"] == Change.SLOWER) & (table["ratio"] - 1 > percent / 100)]

    def counts(self) -> dict[str, int]:
        """How many configurations got each verdict (verdicts none got are left out)."""
        counts = self.table["verdict"].value_counts()
        return {name: int(counts[name]) for name in VERDICTS if name in counts}


def compare(old: pd.DataFrame, new: pd.DataFrame, experiments: Mapping, gpu: str | None = None,
            record: pd.DataFrame | None = None) -> Comparison:
    """Match the configurations of two results (the newest measurement of each per GPU) and judge each, the
    experiments of ``experiments`` (name -> description: the registry, :func:`bench.experiments.registry`) in its
    order, a configuration by its experiment's axes. ``record``: more results, whose machines join the two results'
    in the machine-to-machine spread of a kind compared across two machines (:mod:`bench.analysis.noise`)."""
    if not len(old) or not len(new):
        return Comparison(pd.DataFrame(columns=COLUMNS))
    read = _read(experiments)
    old, new = (selection.newest(selection.only(rows, read), experiments) for rows in (old, new))
    record = noise.Record([old, new, *([] if record is None else [record])], experiments)
    old, new = _select(old, gpu, "old"), _select(new, gpu, "new")
    sides = _by_gpu_and_experiment(old, experiments), _by_gpu_and_experiment(new, experiments)
    pairs, warnings = _pairs(*sides, old, new, experiments)
    hosts = len({gpu.host for rows in (old, new) for gpu in selection.gpus(rows)}) > 1
    pairs = [replace(pair, hosts=hosts) for pair in pairs]
    lines, headlines = [], []
    for pair in pairs:
        mine = [side[gpu][pair.experiment] for side, gpu in zip(sides, (pair.old, pair.new))]
        spreads = record.spreads(pair.experiment, pair.old, pair.new)
        found, missing = _compare_pair(pair, experiments[pair.experiment], *mine, spreads)
        lines += found
        warnings += missing
    table = pd.DataFrame(lines, columns=COLUMNS)
    gpu_pairs = list(dict.fromkeys((pair.old, pair.new) for pair in pairs))
    for before, after in gpu_pairs:
        prefix = f"{Pair('', before, after, hosts).label}: " if len(gpu_pairs) > 1 else ""
        if before != after:
            warnings.append(f"{prefix}different GPUs: old {before}, new {after}")
        warnings += [prefix + text for text in _environment_changes(selection.rows_of(old, before),
                                                                       selection.rows_of(new, after))]
        headlines += [prefix + text for text in _claims_changes(selection.rows_of(old, before),
                                                                  selection.rows_of(new, after))]
    return Comparison(table, warnings, _machine_headlines(table, pairs, record) + _headlines(table) + headlines)


def _read(experiments: Mapping) -> set[str]:
    """Every column comparing reads: what tells GPUs and runs apart, every experiment's axes, outcome and rate,
    :data:`JUDGED`, :data:`ENVIRONMENT_COLUMNS` and the claims' columns."""
    from bench.analysis import claims

    configurations = {column for experiment in experiments.values() for column in (*experiment.axes,
                                                                                    *experiment.outcome)}
    return {*selection.MACHINE, "gpu_name", "experiment", "run_id", *configurations, *JUDGED, *ENVIRONMENT_COLUMNS,
            *claims.COLUMNS, *(column for column, _ in RATES.values())}


def _select(rows: pd.DataFrame, gpu: str | None, side: str) -> pd.DataFrame:
    try:
        return selection.select_gpu(rows, gpu)
    except UsageError as error:
        raise UsageError(f"{side} results: {error}") from None


def _by_gpu_and_experiment(rows: pd.DataFrame, experiments: Mapping) -> dict[Gpu, dict[str, pd.DataFrame]]:
    """Each GPU's rows (:func:`bench.analysis.selection.by_gpu`) of each experiment of ``experiments`` it measured, of
    only the columns judging them reads: its axes, outcome and rate, and :data:`JUDGED`."""
    found = {}
    for gpu, mine in selection.by_gpu(rows):
        found[gpu] = {}
        for name in set(mine["experiment"]) & set(experiments):
            experiment = experiments[name]
            read = [*experiment.axes, *JUDGED, *experiment.outcome, *RATES.get(name, ())[:1]]
            found[gpu][name] = selection.only(mine, read)[mine["experiment"] == name]
    return found


def _pairs(old_gpus: Mapping[Gpu, Mapping], new_gpus: Mapping[Gpu, Mapping], old: pd.DataFrame, new: pd.DataFrame,
           experiments: Mapping) -> tuple[list[Pair], list[str]]:
    """The (experiment, old GPU, new GPU) pairs to compare, and warnings about GPUs left without a partner. The GPUs
    of each side come with their experiments (:func:`_by_gpu_and_experiment`)."""
    pairs, alone = [], {"old": {}, "new": {}}
    for name in experiments:
        holding = {side: [gpu for gpu, measured in gpus.items() if name in measured]
                   for side, gpus in (("old", old_gpus), ("new", new_gpus))}
        if not holding["old"] or not holding["new"]:
            continue
        both = [gpu for gpu in holding["old"] if gpu in holding["new"]]
        pairs += [Pair(name, gpu, gpu) for gpu in both]
        rest = {side: [gpu for gpu in gpus if gpu not in both] for side, gpus in holding.items()}
        if len(rest["old"]) == 1 and len(rest["new"]) == 1:
            pairs.append(Pair(name, rest["old"][0], rest["new"][0]))
            continue
        for side, gpus in rest.items():
            for gpu in gpus:
                alone[side].setdefault(gpu, []).append(name)
    warnings = [f"{gpu} is only in the {side} results ({', '.join(names)}); not compared"
                for side, found in alone.items() for gpu, names in found.items()]
    for side, frame, other in (("old", old, new), ("new", new, old)):
        only = [name for name in experiments if (frame["experiment"] == name).any()
                and not (other["experiment"] == name).any()]
        if only:
            warnings.append(f"only in the {side} results, not compared: {', '.join(only)}")
    return pairs, warnings


def describe(experiment, row) -> str:
    """A configuration in a few words: 'pinned H2D 16 MiB', 'cudaFree placement=none spin_stream=blocking'."""
    words = []
    for axis in experiment.axes:
        value = _plain(row[axis])
        if value is None:
            words.append(f"{axis}=?")
        elif axis in SIZE_AXES:
            words.append(format_size(int(value)))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            words.append(f"{axis}={value:g}")
        else:
            words.append(f"{axis}={value}" if axis in NAMED_AXES else str(value))
    return " ".join(words)


def _plain(value):
    """A cell as plain Python: None for every kind of missing, numpy scalars as Python numbers."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if isinstance(value, np.generic) else value


def _compare_pair(pair: Pair, experiment, old: pd.DataFrame, new: pd.DataFrame,
                  spreads: Mapping[tuple, tuple[float, int]]) -> tuple[list[dict], list[str]]:
    """One line per configuration both sides measured (of ``experiment``, its description), and a warning if either
    side has configurations the other lacks. ``spreads``: the machine-to-machine spread of each configuration
    (:meth:`bench.analysis.noise.Record.spreads`)."""
    before, after = selection.keyed(old, list(experiment.axes)), selection.keyed(new, list(experiment.axes))
    lines = [_judge(pair, experiment, before[key], after[key], spreads.get(key)) for key in before if key in after]
    only = {side: sum(key not in other for key in mine) for side, mine, other in
            (("old", before, after), ("new", after, before))}
    warnings = []
    if only["old"] or only["new"]:
        warnings.append(f"{pair.experiment} on {pair.label}: {only['old']} configurations only in the old results, "
                        f"{only['new']} only in the new")
    return lines, warnings


def _judge(pair: Pair, experiment, first: dict, second: dict, spread: tuple[float, int] | None) -> dict:
    unit = second.get("unit") if isinstance(second.get("unit"), str) else ""
    old_samples, new_samples = selection.samples_of(first), selection.samples_of(second)
    if old_samples and first.get("unit") in TO_MS and unit in TO_MS:
        old_samples = [value * TO_MS[first["unit"]] / TO_MS[unit] for value in old_samples]
    line = {"experiment": pair.experiment, "gpu": pair.label, "configuration": describe(experiment, second),
            "unit": unit, "old": math.nan, "new": math.nan, "ratio": math.nan, "verdict": Change.SAME, "change": "",
            "note": "", **UNSPREAD}
    if old_samples and new_samples:
        old_median, new_median = median(old_samples), median(new_samples)
        line.update(old=old_median, new=new_median, ratio=new_median / old_median if old_median else math.nan)
        line.update(_timing_verdict(line["ratio"], (first, old_samples), (second, new_samples), spread,
                                    experiment.accuracy.floor))
        if line["verdict"] != Change.SAME:
            line["change"] = _timing_change(pair.experiment, first, second, line)
    columns = ("status", *experiment.outcome)
    was, now = ([_plain(row.get(column)) for column in columns] for row in (first, second))
    if was != now:
        changes = [f"{'' if column == 'verdict' else column + ' '}{a} → {b}"
                   for column, a, b in zip(columns, was, now) if a != b]
        error = _plain(second.get("error"))
        if now[0] != Status.OK and error:
            changes.append(str(error).splitlines()[0][:80])
        line.update(verdict=Change.CHANGED, change="; ".join(changes), note="", **UNSPREAD)
    return line


def _timing_verdict(ratio: float, old: tuple[dict, list[float]], new: tuple[dict, list[float]],
                    spread: tuple[float, int] | None, floor: Floor) -> dict:
    """The verdict on two rows' samples (each side: the row and its samples in one unit), with the note that says
    why a change is unclear (a row below its experiment's ``floor``, too few samples) or how it stands against the
    machine-to-machine ``spread`` (spread, machines)."""
    judged = verdict(old[1], new[1])
    low = [f"{side} ({len(samples)} samples; its floor: {floor})"
           for side, (row, samples) in (("old", old), ("new", new)) if noise.below_floor(row, samples, floor)]
    if low and math.isfinite(ratio) and abs(ratio - 1) > SAME_WITHIN:
        return {"verdict": Change.UNCLEAR, "note": f"below the floor: {', '.join(low)}"}
    if judged == Change.SAME:
        return {"verdict": judged}
    if judged == Change.UNCLEAR:
        counts = " and ".join(str(len(samples)) for _, samples in (old, new))
        return {"verdict": judged, "note": f"{counts} samples: too few to bound a median"
                if math.isfinite(ratio) else ""}
    if spread is None:
        return {"verdict": judged}
    low, high = spread_bounds(spread[0])
    beyond = not low <= ratio - 1 <= high
    digits = decimals(ratio - 1, (low, high))
    return {"verdict": judged, "machine_spread": spread[0], "machine_spread_low": low, "machine_spread_high": high,
            "beyond_machine_spread": beyond, "note": f"{'beyond' if beyond else 'within'} the {low:+.{digits}%} to "
                                                     f"{high:+.{digits}%} spread of {spread[1]} machines"}


def spread_bounds(spread: float) -> tuple[float, float]:
    """A machine-to-machine ``spread`` (largest median over smallest, less 1) as the lowest and highest change (new
    median over old, less 1) that machines differ by: -8.3% to +9.1% for 0.091."""
    return -spread / (1 + spread), spread


def _timing_change(experiment: str, first: dict, second: dict, line: dict) -> str:
    percent = change_percent(line)
    column, unit = RATES.get(experiment, (None, None))
    rates = [_plain(row.get(column)) for row in (first, second)] if column else [None]
    if None not in rates:
        return f"{number(rates[0])} → {number(rates[1])} {unit} (time {percent})"
    return f"{number(line['old'])} → {number(line['new'])} {line['unit']} ({percent})"


def _environment_changes(old: pd.DataFrame, new: pd.DataFrame) -> list[str]:
    changes = []
    for column in ENVIRONMENT_COLUMNS:
        before, after = (sorted(set(rows[column].dropna().astype(str))) if column in rows else []
                         for rows in (old, new))
        if before and after and before != after:  # a run before a column was added recorded none
            changes.append(f"{column} differs: {', '.join(before) or '?'} → {', '.join(after) or '?'}")
    return changes


def _claims_changes(old: pd.DataFrame, new: pd.DataFrame) -> list[str]:
    from bench.analysis import claims

    before, after = claims.table(old), claims.table(new)
    changes = []
    for (_, a), (_, b) in zip(before.iterrows(), after.iterrows()):
        if a["verdict"] != b["verdict"] and "not measured" not in (a["verdict"], b["verdict"]):
            changes.append(f"claim \"{a['claim']}\": {claims.LABELS[a['verdict']]} → {claims.LABELS[b['verdict']]} "
                           f"({b['measured']})")
    return changes


def _headlines(table: pd.DataFrame) -> list[str]:
    """Outcome changes, then the largest slower/faster changes of each experiment."""
    several = table["gpu"].nunique() > 1

    def where(line) -> str:
        return f"{line['experiment']} {line['configuration']}" + (f" on {line['gpu']}" if several else "")

    lines = [f"{where(line)}: {line['change']}" for _, line in table[table["verdict"] == Change.CHANGED].iterrows()]
    for name, group in table.groupby("experiment", sort=False):
        timed = group[group["verdict"].isin([Change.SLOWER, Change.FASTER])]
        timed = timed.assign(_size=(timed["ratio"] - 1).abs()).sort_values("_size", ascending=False)
        lines += [f"{where(line)}: {line['verdict']}, {line['change']}" + (f"; {line['note']}" if line["note"] else "")
                  for _, line in timed.head(HEADLINES_PER_EXPERIMENT).iterrows()]
        if len(timed) > HEADLINES_PER_EXPERIMENT:
            lines.append(f"{name}: {len(timed) - HEADLINES_PER_EXPERIMENT} more configurations slower or faster "
                         "beyond noise")
    return lines


def _machine_headlines(table: pd.DataFrame, pairs: list[Pair], record: noise.Record) -> list[str]:
    """For each two machines of one kind: how many of their changes beyond noise exceed the machine-to-machine
    spread on record for that kind, or that none is on record."""
    lines, seen = [], set()
    for pair in pairs:
        if not noise.one_kind(pair.old, pair.new) or pair.label in seen:
            continue
        seen.add(pair.label)
        mine = [other for other in pairs if other.label == pair.label]
        timed = table[(table["gpu"] == pair.label) & table["verdict"].isin([Change.SLOWER, Change.FASTER])]
        if not len(timed):
            continue
        known = timed["beyond_machine_spread"].notna()
        machines = max(record.machines(other.experiment, other.new) for other in mine)
        if not known.any():
            lines.append(f"{pair.label}: two machines of one kind; no other {pair.new.name} on record to measure "
                         "the machine-to-machine spread by (compare --spread-from names results that hold some)")
            continue
        beyond = int(timed["beyond_machine_spread"].eq(True).sum())
        unknown = f"; {int((~known).sum())} with no spread on record" if not known.all() else ""
        lines.append(f"{pair.label}: {beyond} of {len(timed)} changes beyond noise exceed the spread between the "
                     f"{machines} {pair.new.name} machines on record{unknown}")
    return lines
