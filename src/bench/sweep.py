"""Expand axes into configurations, run the experiments under a progress bar, keep every finished row on disk."""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bench import store
from bench.experiments import Config, Experiment, registry
from bench.units import format_size, parse_size


def expand(axes: Mapping[str, Sequence], valid: Callable[[Config], bool] = lambda config: True) -> list[Config]:
    """Every combination of the axes' values, the first axis varying slowest, minus those ``valid`` rejects."""
    names = list(axes)
    combinations = (dict(zip(names, values)) for values in itertools.product(*axes.values()))
    return [config for config in combinations if valid(config)]


@dataclass(frozen=True)
class Plan:
    experiment: Experiment
    configs: list[Config]


def _axis_values(experiment: Experiment, axis: str, texts: Sequence[str]) -> tuple:
    """``--axis`` values in the axis's own type: numbers (sizes for the size axis) or one of the known words."""
    defaults = experiment.axes[axis]
    values = []
    for text in texts:
        if axis == experiment.size_axis:
            values.append(parse_size(text))
        elif isinstance(defaults[0], (int, float)):
            try:
                value = type(defaults[0])(text)
            except ValueError:
                raise ValueError(f"{axis}={text!r} is not a number") from None
            if value <= 0:
                raise ValueError(f"{axis}={text!r} must be positive")
            values.append(value)
        elif text in defaults:
            values.append(text)
        else:
            raise ValueError(f"{axis}={text!r} is not a value of {axis}; choose from {', '.join(map(str, defaults))}")
    return tuple(values)


def plan(
    names: Sequence[str],
    *,
    quick: bool = False,
    sizes: Sequence[int] | None = None,
    axes: Mapping[str, Sequence[str]] | None = None,
) -> list[Plan]:
    """The configurations each named experiment will run. ``axes`` replaces axes' values by name (as the user
    typed them). Raises ValueError for an unknown experiment, axis or value."""
    known = registry()
    overrides = dict(axes or {})
    unused = set(overrides)
    plans = []
    for name in names:
        if name not in known:
            raise ValueError(f"unknown experiment {name!r}; choose from {', '.join(known)}")
        experiment = known[name]
        chosen = {**experiment.axes, **(experiment.quick_axes if quick else {})}
        if sizes and experiment.size_axis:
            chosen[experiment.size_axis] = tuple(sizes)
        for axis, texts in overrides.items():
            if axis in experiment.axes:
                chosen[axis] = _axis_values(experiment, axis, texts)
                unused.discard(axis)
        plans.append(Plan(experiment, expand(chosen, experiment.valid)))
    if unused:
        known_axes = sorted({axis for item in plans for axis in item.experiment.axes})
        raise ValueError(f"unknown axis {sorted(unused)[0]!r}; the selected experiments have {', '.join(known_axes)}")
    return plans


@dataclass(frozen=True)
class Outcome:
    path: Path | None  # None when no row finished, so nothing was written
    rows: list[dict]
    planned: int
    interrupted: bool


def describe(experiment: Experiment, config: Mapping) -> str:
    """A configuration in a few words, for the progress bar: 'bandwidth pinned H2D 16 MiB'."""
    values = [config[axis] for axis in experiment.axes]
    words = [format_size(value) if axis == experiment.size_axis else str(value)
             for axis, value in zip(experiment.axes, values)]
    return " ".join([experiment.name, *words])


def _timer_for(timer, experiment: Experiment):
    """The sweep's timer, or one whose stop rule carries the experiment's overrides."""
    if not experiment.stop_rule:
        return timer
    from bench.timing import Timer

    return Timer(dataclasses.replace(timer.rule, **experiment.stop_rule))


def run(
    plans: Sequence[Plan],
    timer,
    environment: Mapping,
    path: Path,
    *,
    run_id: str,
    command: str = "",
    save_every_s: float = 2.0,
    console: Console | None = None,
) -> Outcome:
    """Run every plan; rows carry the environment columns. The results file is rewritten atomically every
    ``save_every_s`` and at the end, so an interrupted or failed sweep keeps what it finished."""
    metadata = {
        "run_id": run_id,
        "started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "stop_rule": dataclasses.asdict(timer.rule),
        "stop_rule_overrides": {item.experiment.name: dict(item.experiment.stop_rule) for item in plans},
        "environment": dict(environment),
    }
    planned = sum(len(item.configs) for item in plans)
    rows: list[dict] = []
    tables: dict[str, list[dict]] = {}

    def save(complete: bool) -> None:
        if rows:
            stamp = {**metadata, "complete": complete, "planned": planned}
            for name, entries in tables.items():
                store.write(store.side_table_path(path, name), entries, {**stamp, "table": name})
            store.write(path, rows, stamp)

    last_save = time.monotonic()
    progress = Progress(
        TextColumn("{task.description:<40}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console,
    )
    try:
        with progress:
            task = progress.add_task("starting", total=planned)
            for item in plans:
                name = item.experiment.name
                for row in item.experiment.run(item.configs, _timer_for(timer, item.experiment)):
                    config = {axis: row[axis] for axis in item.experiment.axes}
                    for key in [key for key in row if key.startswith("_")]:
                        tables.setdefault(key[1:], []).extend(
                            {"experiment": name, **config, **entry, "run_id": run_id} for entry in row.pop(key))
                    rows.append({"experiment": name, **row, **environment, "run_id": run_id})
                    progress.update(task, advance=1, description=describe(item.experiment, row))
                    if time.monotonic() - last_save >= save_every_s:
                        save(complete=False)
                        last_save = time.monotonic()
    except KeyboardInterrupt:
        save(complete=False)
        return Outcome(path if rows else None, rows, planned, interrupted=True)
    except BaseException:
        save(complete=False)
        raise
    save(complete=True)
    return Outcome(path if rows else None, rows, planned, interrupted=False)
