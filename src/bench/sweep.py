"""Expand axes into configurations, run the experiments under a progress bar, keep every finished row on disk."""

from __future__ import annotations

import dataclasses
import itertools
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bench import env, store
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
    rows: list[dict]  # this run's rows (a resumed run's earlier rows are in the file, not here)
    planned: int
    interrupted: bool
    stopped_in: str = ""  # the experiment running when the sweep was interrupted


def describe(experiment: Experiment, config: Mapping) -> str:
    """A configuration in a few words, for the progress bar: 'bandwidth pinned H2D 16 MiB'."""
    values = [config[axis] for axis in experiment.axes]
    words = [format_size(value) if axis == experiment.size_axis else str(value)
             for axis, value in zip(experiment.axes, values)]
    return " ".join([experiment.name, *words])


def config_key(experiment: str, config: Mapping, axes: Sequence[str]) -> tuple:
    """What identifies a configuration across runs and files (numbers compared as numbers: parquet may hand an
    integer axis back as a float)."""
    def norm(value):
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)

    return (experiment, *(norm(config[axis]) for axis in axes))


DONE_STATUSES = ("ok", "unsupported", "skipped")


def without_done(plans: Sequence[Plan], previous: pd.DataFrame) -> list[Plan]:
    """The plans minus the configurations ``previous`` rows finished (status ok, unsupported or skipped); failed
    ones run again."""
    if previous is None or not len(previous):
        return list(plans)
    finished = previous[previous["status"].isin(DONE_STATUSES)]
    remaining = []
    for item in plans:
        axes = list(item.experiment.axes)
        mine = finished[finished["experiment"] == item.experiment.name]
        done = {config_key(item.experiment.name, row, axes) for _, row in mine.iterrows()
                if all(axis in row and row[axis] == row[axis] for axis in axes)}
        remaining.append(Plan(item.experiment, [config for config in item.configs
                                                if config_key(item.experiment.name, config, axes) not in done]))
    return remaining


def _timer_for(timer, experiment: Experiment):
    """The sweep's timer, or one whose stop rule carries the experiment's overrides."""
    if not experiment.stop_rule:
        return timer
    from bench.timing import Timer

    return Timer(dataclasses.replace(timer.rule, **experiment.stop_rule))


def _inline(item: Plan, timer) -> Iterator[tuple[str, object]]:
    """Run an experiment in this process: ("row", row) messages; its exceptions propagate."""
    for row in item.experiment.run(item.configs, _timer_for(timer, item.experiment)):
        yield "row", row


def _isolated(item: Plan, timer, device: int | None) -> Iterator[tuple[str, object]]:
    """Run an experiment in a child process, so that a sticky CUDA error (or a crash) ends only this experiment:
    ("row", row) messages, then ("failed", why) if the child could not finish."""
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    rule = _timer_for(timer, item.experiment).rule
    child = context.Process(target=_child, daemon=True,
                            args=(sender, item.experiment.run.__module__, item.experiment.name, item.configs, rule,
                                  device, os.environ.get(FAULT_VARIABLE, "")))
    child.start()
    sender.close()
    try:
        while True:
            if receiver.poll(0.2):
                try:
                    kind, payload = receiver.recv()
                except EOFError:
                    child.join(5)
                    yield "failed", f"the {item.experiment.name} process ended (exit code {child.exitcode})"
                    return
                if kind == "done":
                    return
                yield kind, payload
                if kind == "failed":
                    return
            elif not child.is_alive() and not receiver.poll(0):
                yield "failed", f"the {item.experiment.name} process ended (exit code {child.exitcode})"
                return
    finally:
        receiver.close()
        if child.is_alive():
            child.terminate()
        child.join(10)


FAULT_VARIABLE = "BENCH_INJECT_FAULT"  # "EXPERIMENT:N": after N rows that experiment's process makes an illegal access


def find_experiment(module: str, name: str) -> Experiment:
    """An experiment by name: from the registry, else from ``module`` (experiments outside it, as in tests; a
    registered experiment's ``run`` may live in another module than its definition)."""
    import importlib

    known = registry()
    if name in known:
        return known[name]
    return next(value for value in vars(importlib.import_module(module)).values()
                if isinstance(value, Experiment) and value.name == name)


def _child(sender, module: str, name: str, configs, rule, device, fault: str) -> None:
    """The body of an isolated experiment's process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what an interrupt ends
    try:
        experiment = find_experiment(module, name)
        if device is not None:
            from cupy.cuda import runtime
            from numba import cuda

            runtime.setDevice(device)
            cuda.select_device(device)
        from bench.timing import Timer

        fault_name, _, fault_after = fault.partition(":")
        for index, row in enumerate(experiment.run(configs, Timer(rule)), start=1):
            sender.send(("row", row))
            if fault_name == name and str(index) == fault_after:
                _illegal_access()
        sender.send(("done", None))
    except BaseException as error:
        sender.send(("failed", f"{type(error).__name__}: {error}"))
    finally:
        sender.close()


def _illegal_access() -> None:
    """Fault injection for testing isolation: a kernel that writes to an invalid address, then a synchronization,
    which raises the sticky cudaErrorIllegalAddress."""
    import cupy

    from bench.kernels import MixKernel

    stream = cupy.cuda.Stream(non_blocking=True)
    MixKernel().launch(stream, 8, 1 << 20, 1)
    stream.synchronize()


def _not_run(item: Plan, received: set, why: str) -> list[dict]:
    """Rows for the configurations an experiment's failure left unmeasured: skipped when it ran out of memory."""
    out_of_memory = "MemoryAllocation" in why or "out of memory" in why.lower()
    axes = list(item.experiment.axes)
    return [{**config, "status": "skipped" if out_of_memory else "failed",
             "error": f"{'skipped' if out_of_memory else 'not measured'}: the {item.experiment.name} experiment "
                      f"stopped: {why}"}
            for config in item.configs if config_key(item.experiment.name, config, axes) not in received]


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
    isolate: bool = False,
    device: int | None = None,
    previous: pd.DataFrame | None = None,
    previous_tables: Mapping[str, pd.DataFrame] | None = None,
    monitor: Callable[[], dict] | None = None,
) -> Outcome:
    """Run every plan; rows carry the environment columns. The results file is rewritten atomically every
    ``save_every_s`` and at the end, so an interrupted or failed sweep keeps what it finished.

    ``isolate`` runs each experiment in its own process on ``device``: a CUDA error that poisons its context ends
    only that experiment, whose unmeasured configurations become failed rows with the error, and the sweep goes on.
    ``previous`` (and its side tables) are rows of an earlier run of the same file being resumed: written back with
    the new ones. ``monitor()`` is read before the first and after every configuration (NVML clocks, throttling,
    other processes; see :mod:`bench.env`); each row gets what was seen over its configuration.
    """
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
    earlier = previous.to_dict("records") if previous is not None else []
    earlier_tables = {name: table.to_dict("records") for name, table in (previous_tables or {}).items()}

    def save(complete: bool) -> None:
        if rows:
            stamp = {**metadata, "complete": complete, "planned": planned}
            for name in {*tables, *earlier_tables}:
                entries = earlier_tables.get(name, []) + tables.get(name, [])
                store.write(store.side_table_path(path, name), entries, {**stamp, "table": name})
            store.write(path, earlier + rows, stamp)

    last_save = time.monotonic()
    progress = Progress(
        TextColumn("{task.description:<40}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console,
    )
    current = ""
    try:
        with progress:
            task = progress.add_task("starting", total=planned)
            reading = monitor() if monitor else {}
            for item in plans:
                name, current = item.experiment.name, item.experiment.name
                axes = list(item.experiment.axes)
                received: set = set()
                source = _isolated(item, timer, device) if isolate else _inline(item, timer)
                for kind, payload in source:
                    if kind == "failed":
                        for row in _not_run(item, received, payload):
                            rows.append({"experiment": name, **row, **environment, "run_id": run_id})
                        progress.update(task, advance=len(item.configs) - len(received),
                                        description=f"{name}: stopped")
                        break
                    row = payload
                    config = {axis: row[axis] for axis in axes}
                    received.add(config_key(name, config, axes))
                    for key in [key for key in row if key.startswith("_")]:
                        tables.setdefault(key[1:], []).extend(
                            {"experiment": name, **config, **entry, "run_id": run_id} for entry in row.pop(key))
                    if monitor:
                        before, reading = reading, monitor()
                        row.update(env.over_interval(before, reading))
                    rows.append({"experiment": name, **row, **environment, "run_id": run_id})
                    progress.update(task, advance=1, description=describe(item.experiment, row))
                    if time.monotonic() - last_save >= save_every_s:
                        save(complete=False)
                        last_save = time.monotonic()
    except KeyboardInterrupt:
        save(complete=False)
        return Outcome(path if rows else None, rows, planned, interrupted=True, stopped_in=current)
    except BaseException:
        save(complete=False)
        raise
    save(complete=True)
    return Outcome(path if rows else None, rows, planned, interrupted=False)
