"""Two results, configuration by configuration: the ratio of medians and a noise-aware verdict from both runs' raw
samples. Pure pandas; never imports CUDA.

A configuration is matched by experiment and axis values. Its verdict: ``unclear`` with fewer than 3 samples on
either side; ``same`` when the medians differ by at most ``max(1%, 3 × the combined standard error of the two
medians)`` (each from its samples' median absolute deviation); otherwise ``faster`` or ``slower`` (less or more
time), unless each median lies inside the other run's range of samples, which is ``unclear`` too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bench.timing import Summary

ENVIRONMENT_COLUMNS = ("gpu_name", "driver_version", "cuda_runtime", "pcie_gen", "pcie_width", "cupy_version",
                       "numba_cuda_version")
SAME_WITHIN = 0.01


def verdict(old: list[float], new: list[float]) -> str:
    if len(old) < 3 or len(new) < 3:
        return "unclear"
    before, after = Summary.of(old), Summary.of(new)
    change = after.median_ms / before.median_ms - 1
    noise = 3 * math.hypot(before.median_relerr, after.median_relerr)
    if abs(change) <= max(SAME_WITHIN, noise):
        return "same"
    if before.min_ms <= after.median_ms <= before.max_ms and after.min_ms <= before.median_ms <= after.max_ms:
        return "unclear"
    return "slower" if change > 0 else "faster"


@dataclass(frozen=True)
class Comparison:
    table: pd.DataFrame  # experiment, configuration, old ms, new ms, new/old, verdict
    warnings: list[str]

    def slower_than(self, percent: float) -> pd.DataFrame:
        """Configurations judged slower by more than ``percent``."""
        table = self.table
        return table[(table["verdict"] == "slower") & (table["_ratio"] - 1 > percent / 100)]


def _timed(rows: pd.DataFrame) -> pd.DataFrame:
    if "samples_ms" not in rows or "status" not in rows:
        return rows.iloc[0:0]
    ok = rows[(rows["status"] == "ok") & rows["samples_ms"].map(lambda s: s is not None and len(s) > 0)]
    return ok.sort_values("run_id") if "run_id" in ok else ok


def _environment_warnings(old: pd.DataFrame, new: pd.DataFrame) -> list[str]:
    warnings = []
    for column in ENVIRONMENT_COLUMNS:
        if column in old and column in new:
            before, after = set(old[column].dropna().astype(str)), set(new[column].dropna().astype(str))
            if before != after:
                warnings.append(f"{column} differs: {', '.join(sorted(before))} → {', '.join(sorted(after))}")
    return warnings


def compare(old: pd.DataFrame, new: pd.DataFrame) -> Comparison:
    """Match the timed configurations of two results (the newest run of each where a side holds several)."""
    from bench.experiments import registry
    from bench.sweep import config_key, describe

    experiments = registry()
    old_timed, new_timed = _timed(old), _timed(new)
    lines = []
    for name in sorted(set(old_timed.get("experiment", [])) & set(new_timed.get("experiment", []))):
        experiment = experiments.get(name)
        if experiment is None:
            continue
        axes = list(experiment.axes)

        def keyed(rows: pd.DataFrame) -> dict:
            mine = rows[rows["experiment"] == name]
            return {config_key(name, row, axes): row for _, row in mine.iterrows()}  # newest run wins

        before, after = keyed(old_timed), keyed(new_timed)
        for key in [key for key in before if key in after]:
            old_samples = list(np.asarray(before[key]["samples_ms"], dtype=float))
            new_samples = list(np.asarray(after[key]["samples_ms"], dtype=float))
            old_ms, new_ms = float(np.median(old_samples)), float(np.median(new_samples))
            lines.append({"configuration": describe(experiment, before[key]), "old ms": f"{old_ms:.4g}",
                          "new ms": f"{new_ms:.4g}", "new/old": f"{new_ms / old_ms:.3f}",
                          "verdict": verdict(old_samples, new_samples), "_ratio": new_ms / old_ms})
    table = pd.DataFrame(lines, columns=["configuration", "old ms", "new ms", "new/old", "verdict", "_ratio"])
    return Comparison(table, _environment_warnings(old, new))
