"""What changed between two results, configuration by configuration, for every experiment. pandas only; never
imports CUDA.

Configurations are matched by experiment, axis values and GPU (when each side holds one GPU, those two are compared
whatever their UUIDs; with several, GPUs pair up by host and UUID). For each pair:

- the **outcome** columns an experiment declares (a blocking verdict, wrong results, a runtime error) or the row's
  status differ: ``changed``, with "old → new" beside it;
- otherwise, where both rows carry samples, a **noise-aware verdict** on the samples (GPU ms, host µs, whatever
  the row measured): ``unclear`` with fewer than 3 samples on either side; ``same`` when the medians differ by at
  most ``max(1%, 3 × the combined standard error of the two medians)``; otherwise ``faster`` or ``slower`` (less
  or more time), unless each median lies inside the other run's range of samples, which is ``unclear`` too;
- rows without samples and with the same outcome are ``same``.

The headlines are what a team reads after a driver update: outcome changes ("blocking cudaFree none non-blocking:
waits-for-device → returns"), configurations slower or faster beyond noise, and claims whose verdict changed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from bench import analysis
from bench.timing import Summary

ENVIRONMENT_COLUMNS = ("gpu_name", "driver_version", "cuda_driver", "cuda_runtime", "pcie_gen", "pcie_width",
                       "cupy_version", "numba_cuda_version")
SAME_WITHIN = 0.01
HEADLINE_TIMED = 12  # slower/faster configurations listed in the headlines, largest change first


def verdict(old: list[float], new: list[float]) -> str:
    """``same``, ``faster``, ``slower`` or ``unclear`` for two lists of samples of a time."""
    if len(old) < 3 or len(new) < 3:
        return "unclear"
    before, after = Summary.of(old), Summary.of(new)
    change = after.median / before.median - 1
    noise = 3 * math.hypot(before.median_relerr, after.median_relerr)
    if abs(change) <= max(SAME_WITHIN, noise):
        return "same"
    if before.min <= after.median <= before.max and after.min <= before.median <= after.max:
        return "unclear"
    return "slower" if change > 0 else "faster"


@dataclass(frozen=True)
class Comparison:
    table: pd.DataFrame  # experiment, gpu, configuration, unit, old, new, new/old, verdict, change; _ratio
    warnings: list[str] = field(default_factory=list)
    headlines: list[str] = field(default_factory=list)

    def slower_than(self, percent: float) -> pd.DataFrame:
        """Configurations judged slower by more than ``percent``."""
        table = self.table
        return table[(table["verdict"] == "slower") & (table["_ratio"] - 1 > percent / 100)]


def _environment_warnings(old: pd.DataFrame, new: pd.DataFrame) -> list[str]:
    warnings = []
    for column in ENVIRONMENT_COLUMNS:
        if column in old and column in new:
            before, after = set(old[column].dropna().astype(str)), set(new[column].dropna().astype(str))
            if before != after:
                warnings.append(f"{column} differs: {', '.join(sorted(before))} → {', '.join(sorted(after))}")
    return warnings


def _pairs(old: pd.DataFrame, new: pd.DataFrame) -> tuple[list[tuple[str, pd.DataFrame, pd.DataFrame]], list[str]]:
    """(label, old rows, new rows) per GPU pair, and warnings about GPUs only one side has."""
    old_gpus, new_gpus = analysis.gpus(old), analysis.gpus(new)
    if len(old_gpus) <= 1 and len(new_gpus) <= 1:
        label = new_gpus[0][2] if new_gpus else (old_gpus[0][2] if old_gpus else "")
        return [(label, old, new)], []
    pairs, warnings = [], []
    for host, uuid, name in sorted(set(old_gpus) | set(new_gpus)):
        if (host, uuid, name) not in old_gpus or (host, uuid, name) not in new_gpus:
            side = "old" if (host, uuid, name) in old_gpus else "new"
            warnings.append(f"{name} {uuid} on {host} is only in the {side} results")
            continue
        pick = [analysis.select_gpu(side, uuid) for side in (old, new)]
        pairs.append((f"{name} {uuid[:12]} ({host})", *pick))
    return pairs, warnings


def _describe(experiment: str, row: pd.Series, axes: list[str]) -> str:
    from bench.units import format_size

    words = []
    for axis in axes:
        value = row[axis]
        words.append(format_size(int(value)) if axis in ("bytes", "total_bytes") and pd.notna(value) else str(value))
    return " ".join(words)


def _samples(row: pd.Series) -> list[float]:
    values = row.get("samples")
    if values is None or (isinstance(values, float) and math.isnan(values)):
        return []
    return [float(value) for value in values]


def _outcome(row: pd.Series, columns: tuple[str, ...]) -> tuple:
    def plain(value):
        if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
            return None
        return value.item() if isinstance(value, np.generic) else value

    return tuple(plain(row.get(column)) for column in ("status", *columns))


def _compare_gpu(label: str, old: pd.DataFrame, new: pd.DataFrame) -> list[dict]:
    from bench.experiments import registry

    known = registry()
    lines = []
    for name in [name for name in known if name in set(old["experiment"]) & set(new["experiment"])]:
        experiment = known[name]
        axes = list(experiment.axes)

        def keyed(rows: pd.DataFrame) -> dict:
            mine = rows[rows["experiment"] == name]
            return {tuple(analysis.key_frame(mine, axes).loc[index]): row for index, row in mine.iterrows()}

        before, after = keyed(old), keyed(new)
        for key in [key for key in before if key in after]:
            first, second = before[key], after[key]
            line = {"experiment": name, "gpu": label, "configuration": _describe(name, second, axes),
                    "unit": second.get("unit") if isinstance(second.get("unit"), str) else "", "old": "", "new": "",
                    "new/old": "", "verdict": "same", "change": "", "_ratio": math.nan}
            old_samples, new_samples = _samples(first), _samples(second)
            if old_samples and new_samples:
                old_median, new_median = float(np.median(old_samples)), float(np.median(new_samples))
                line.update({"old": f"{old_median:.4g}", "new": f"{new_median:.4g}",
                             "new/old": f"{new_median / old_median:.3f}" if old_median else "",
                             "verdict": verdict(old_samples, new_samples),
                             "_ratio": new_median / old_median if old_median else math.nan})
            was, now = _outcome(first, experiment.outcome), _outcome(second, experiment.outcome)
            if was != now:
                columns = ("status", *experiment.outcome)
                line["change"] = "; ".join(f"{column}: {a} → {b}" for column, a, b in zip(columns, was, now)
                                           if a != b)
                line["verdict"] = "changed"
            lines.append(line)
    return lines


def _claims_changes(old: pd.DataFrame, new: pd.DataFrame) -> list[str]:
    from bench import claims

    before, after = claims.table(old), claims.table(new)
    changes = []
    for (_, a), (_, b) in zip(before.iterrows(), after.iterrows()):
        if a["verdict"] != b["verdict"] and "not measured" not in (a["verdict"], b["verdict"]):
            changes.append(f"claim \"{a['claim']}\": {a['verdict']} → {b['verdict']} ({b['measured']})")
    return changes


def compare(old: pd.DataFrame, new: pd.DataFrame, gpu: str | None = None) -> Comparison:
    """Match the configurations of two results (the newest measurement of each per GPU) and judge each."""
    old, new = analysis.newest(old), analysis.newest(new)
    old, new = analysis.select_gpu(old, gpu), analysis.select_gpu(new, gpu)
    columns = ["experiment", "gpu", "configuration", "unit", "old", "new", "new/old", "verdict", "change", "_ratio"]
    if not len(old) or not len(new) or "experiment" not in old or "experiment" not in new:
        return Comparison(pd.DataFrame(columns=columns))
    pairs, warnings = _pairs(old, new)
    lines = [line for label, before, after in pairs for line in _compare_gpu(label, before, after)]
    table = pd.DataFrame(lines, columns=columns)
    if table["gpu"].nunique() <= 1:
        table = table.drop(columns=["gpu"])
    headlines = [f"{line['experiment']} {line['configuration']}: {line['change']}"
                 for _, line in table[table["verdict"] == "changed"].iterrows()]
    timed = table[table["verdict"].isin(["slower", "faster"])].copy()
    timed["_size"] = (timed["_ratio"] - 1).abs()
    for _, line in timed.sort_values("_size", ascending=False).head(HEADLINE_TIMED).iterrows():
        headlines.append(f"{line['experiment']} {line['configuration']}: {line['verdict']}, {line['old']} → "
                         f"{line['new']} {line['unit']} ({line['_ratio'] - 1:+.1%})")
    if len(timed) > HEADLINE_TIMED:
        headlines.append(f"... and {len(timed) - HEADLINE_TIMED} more slower or faster configurations")
    headlines += _claims_changes(old, new)
    return Comparison(table, warnings + _environment_warnings(old, new), headlines)
