"""Experiments. Each module declares its axes and yields one tidy row per configuration; it never times
(``bench.timing`` does) and never writes files (``bench.sweep`` and ``bench.store`` do).

A new experiment is one new module defining ``EXPERIMENT`` plus one line in :func:`registry`. A row may carry side
tables under keys that start with ``_`` (``_timeline``: a list of dicts); the sweep writes each beside the results.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

Config = dict
Row = dict


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str
    axes: Mapping[str, tuple]  # the default sweep, axis by axis, in expansion order
    run: Callable[[Sequence[Config], object], Iterator[Row]]  # (configurations, bench.timing.Timer) -> rows
    memory_needed: Callable[[Sequence[Config]], tuple[int, int]]  # -> (device bytes, host bytes) at peak
    headline: Callable[[pd.DataFrame], pd.DataFrame]  # the few numbers a summary shows, from this run's rows
    quick_axes: Mapping[str, tuple] = field(default_factory=dict)  # overrides for --quick
    valid: Callable[[Config], bool] = lambda config: True  # drops combinations that make no sense
    size_axis: str = "bytes"  # the axis --sizes replaces ("" for none)
    stop_rule: Mapping[str, object] = field(default_factory=dict)  # StopRule fields this experiment overrides


def registry() -> dict[str, Experiment]:
    from bench.experiments import alloc, bandwidth, blocking, graphs, launch, overlap, serialization

    experiments = (
        bandwidth.EXPERIMENT,
        launch.EXPERIMENT,
        overlap.EXPERIMENT,
        blocking.EXPERIMENT,
        serialization.EXPERIMENT,
        alloc.EXPERIMENT,
        graphs.EXPERIMENT,
    )
    return {experiment.name: experiment for experiment in experiments}
