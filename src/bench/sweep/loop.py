"""The running sweep: :class:`Runner` takes a :class:`~bench.sweep.plan.Request` through three steps, each taking what
the one before returned, to an :class:`Outcome`: :meth:`Runner.plan` → :class:`~bench.sweep.plan.Planned`,
:meth:`Runner.check` → :class:`~bench.sweep.preflight.Checked` (a problem is a
:class:`bench.platform.errors.UsageError`, nothing written), :meth:`Runner.run` → :class:`Outcome` (each experiment in
a child process, every row checked and saved as it goes; a save that fails ends the sweep with a
:class:`bench.platform.errors.WriteError`). The runner prints nothing: it reports to a :class:`Reporter`.

It imports the rest of :mod:`bench.sweep`, :mod:`bench.results.store`, :mod:`bench.results.schema`,
:mod:`bench.platform.env` and :mod:`bench.timing`; nothing CUDA (the experiments' processes measure). The steps in
full: docs/reference/packages.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from bench.results import store
from bench.platform.env import over_interval
from bench.platform.errors import WriteError
from bench.results.schema import RowCheck, SchemaError
from bench.sweep import plan as planning
from bench.sweep import preflight
from bench.sweep.plan import Plan, Planned, Request, config_key
from bench.sweep.preflight import Checked, Gpu
from bench.sweep.processes import (Drains, FailedMessage, RaisedMessage, ReadyMessage, RowMessage, Started, inline,
                                   isolated, start, start_processes)
from bench.sweep.warmup import warm_up
from bench.timing import Stopwatch
from bench.platform.vocabulary import Status


@dataclass(frozen=True)
class Outcome:
    path: Path | None  # None when no row finished, so nothing was written
    rows: list[dict]  # this run's rows (a resumed run's earlier rows are in the file, not here)
    planned: int
    interrupted: bool
    stopped_in: str = ""  # the experiment running when the sweep was interrupted
    signal: int = 0  # the signal that interrupted it (SIGINT or SIGTERM)
    wall_s: dict[str, float] = field(default_factory=dict)  # per experiment (and GPU: Plan.name)
    startup_s: dict[str, float] = field(default_factory=dict)  # likewise: its processes' start and GPU setup
    estimate_s: float = 0.0
    concurrent: bool = False  # GPUs ran some experiment at once: wall_s of that experiment's GPUs overlap
    warm_s: float = 0.0  # compiling a fresh machine's kernel caches before measuring (0: they were warm)
    mode: str = "default"  # quick, default or full


class Reporter:
    """What a sweep tells its user; the default tells nothing."""

    def planned(self, plans: Sequence[Plan], estimate_s: float, least_s: float) -> None: ...

    def started(self, experiment: str) -> None: ...

    def row(self, plan: Plan, row: dict, seconds_planned: float) -> None: ...

    def stopped(self, plan: Plan, why: str, seconds_planned: float) -> None: ...

    def finished(self, experiment: str, wall_s: float) -> None: ...

    def warmed(self, seconds: float, experiments: Mapping[str, float], failed: Mapping[str, str]) -> None: ...


def not_run(item: Plan, received: set, why: str) -> list[dict]:
    """Rows for the configurations an experiment's failure left unmeasured: skipped when it ran out of memory."""
    out_of_memory = "MemoryAllocation" in why or "out of memory" in why.lower()
    status = Status.SKIPPED if out_of_memory else Status.FAILED
    axes = list(item.experiment.axes)
    return [{**config, "status": status,
             "error": f"{'skipped' if out_of_memory else 'not measured'}: the {item.experiment.name} experiment "
                      f"stopped: {why}"}
            for config in item.configs if config_key(item.experiment.name, config, axes) not in received]


class Runner:
    """One sweep: :meth:`plan`, :meth:`check`, then :meth:`run`, each taking what the one before returned. The
    runner itself holds only how it runs: the request, the reporter, the GPU, whether experiments run in processes
    of their own, how often it saves, the command's clock and the run's id."""

    def __init__(self, request: Request, reporter: Reporter | None = None, *, gpu: Gpu | None = None,
                 isolate: bool = True, save_every_s: float = 2.0) -> None:
        self.request = request
        self.reporter = reporter or Reporter()
        self.gpu = gpu or preflight.Gpu()
        self.isolate = isolate
        self.save_every_s = save_every_s
        self.started = Stopwatch(request.started_s)  # the command's time: a budget counts from its start
        # the start second (so names sort by time), then the process: two sweeps of one second differ
        self.run_id = f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{os.getpid()}"

    def plan(self) -> Planned:
        """The configurations to run, on which GPUs (UsageError for an unknown experiment, axis, value or GPU, or a
        budget that cannot be met)."""
        return planning.for_request(self.request, preflight.selected_devices(self.request, self.gpu))

    def check(self, planned: Planned) -> Checked:
        """Output path, GPU, resume file and memory (:func:`bench.sweep.preflight.check`); UsageError for the first
        problem, with nothing written. Once checked, the experiments' fork server starts."""
        checked = preflight.check(self.request, planned, self.gpu, self.run_id)
        if self.isolate and any(item.configs for item in checked.plans):
            start_processes()
        return checked

    def run(self, checked: Checked, monitor=None) -> Outcome:
        """Run the checked plans into ``checked.path``. ``monitor()`` (NVML clocks, throttling, other processes; see
        :mod:`bench.platform.env`) is read before the first and after every configuration."""
        monitors = {}
        for device, environment in checked.environments.items():
            if monitor is not None:
                monitors[device] = monitor
            elif environment.get("pci_bus_id"):
                from bench.platform import env

                monitors[device] = env.monitor(environment["pci_bus_id"])
        return _Sweep(self, checked, monitors).run()


class _Sweep:
    """The running part of a :class:`Runner`: receives rows, keeps them, saves them, reports them."""

    def __init__(self, runner: Runner, checked: Checked, monitors: Mapping[int, Callable[[], dict] | None]) -> None:
        self.runner, self.checked, self.monitors = runner, checked, monitors
        self.path = checked.path  # where it saves: a new run's first save may take the next free name
        self.plans = [item for item in checked.plans if item.configs]
        self.rows: list[dict] = []
        self.tables: dict[str, list[dict]] = {}
        earlier = checked.earlier
        self.earlier = store.records(earlier.rows) if earlier is not None else []
        self.earlier_tables = ({name: store.records(table) for name, table in earlier.tables.items()}
                               if earlier is not None else {})
        self.experiments = planning.experiments_of(self.plans)
        self.at_once = runner.request.at_once
        self.schema = store.suite_schema(self.experiments)
        self.check_row = RowCheck(self.schema)
        request = runner.request
        self.metadata = {
            "run_id": checked.run_id,
            "started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": request.command, "mode": request.mode, "budget_s": request.budget_s,
            "devices": list(checked.devices), "concurrent": request.concurrent, "one_at_a_time": request.one_at_a_time,
            "stop_rules": {item.experiment.name: {purpose: dataclasses.asdict(rule)
                                                  for purpose, rule in item.rules.items()} for item in self.plans},
            "floors": {item.experiment.name: dataclasses.asdict(item.experiment.accuracy.floor) for item in self.plans},
            "estimate_s": planning.estimate_s(self.plans, self.at_once),
            "least_s": planning.least_s(self.plans, self.at_once),
            "environment": dict(checked.environment),
            "environments": {str(device): dict(values) for device, values in checked.environments.items()},
        }
        self.planned = sum(len(item.configs) for item in self.plans)
        self.wall_s: dict[str, float] = {}  # per plan (experiment, and GPU), its processes' start-up included
        self.startup_s: dict[str, float] = {}  # per plan: process start and GPU selection
        self.readings: dict[int, dict] = {}  # the monitor's last reading, per device
        self.warm_s = 0.0
        self.warm_each_s: dict[str, float] = {}  # each experiment's warm-up process, from its start to its end
        self.last_save = Stopwatch()
        self.own_file = request.resume is not None  # self.path is this run's: resumed, or saved once
        self.saved = len(self.earlier)  # rows in self.path as last saved
        budget_s = planning.budget_for(request.mode, request.budget_s)
        self.budget_s = None if budget_s is None else planning.KEEP_TO * budget_s  # what it aims at
        self.finished_estimates: list[tuple[float, float]] = []  # (estimate, wall time) of each finished plan
        self.ahead: dict[str, Started] = {}  # by plan name: the process of its first part, started ahead of its turn
        self.waiting: list[Plan] = list(self.plans)  # in the sweep's order
        self.running: dict[int, _PlanRun] = {}  # by its source's index in the drains
        self.most_at_once = 0  # the most plans that ran at the same time

    def save(self, complete: bool) -> None:
        """Write the rows so far, then their side tables. A new run's first save takes a name no other run has
        (:func:`bench.results.store.write_table`); later saves rewrite that file. WriteError (a full disk) names the
        file that failed and what the results file kept."""
        if not self.rows:
            return
        stamp = {**self.metadata, "complete": complete, "planned": self.planned, "wall_s": self.wall_s,
                 "startup_s": self.startup_s, "warm_s": self.warm_s,
                 "warm_each_s": self.warm_each_s}
        rows = self.earlier + self.rows
        try:
            self.path = store.write(self.path, rows, self.schema, stamp, new=not self.own_file)
            self.own_file, self.saved = True, len(rows)
            for name in {*self.tables, *self.earlier_tables}:
                entries = self.earlier_tables.get(name, []) + self.tables.get(name, [])
                store.write(store.side_table_path(self.path, name), entries, store.table_schema(name, self.experiments),
                            {**stamp, "table": name})
        except WriteError as error:
            raise WriteError(f"{error}; {self.kept()}") from None

    def kept(self) -> str:
        """What the results file holds after a failed save, for its message."""
        measured = f"{len(self.rows)} configurations measured in this run"
        if not self.own_file:
            return f"nothing was written ({measured})"
        path = self.path
        return f"{path} keeps its last save, {self.saved} configurations ({measured}); --resume {path} finishes it"

    def read_monitor(self, device: int) -> dict:
        monitor = self.monitors.get(device)
        return monitor() if monitor else {}

    def keep(self, item: Plan, row: dict, wall_s: float, reading: dict, alongside: int = 1) -> None:
        """Add the run's columns to a row from an experiment, move its side-table rows aside, check it."""
        name = item.experiment.name
        config = {axis: row.get(axis) for axis in item.experiment.axes}
        environment = self.checked.environments.get(item.devices[0], self.checked.environment)
        gpu = {"gpu_uuid": environment.get("gpu_uuid"), "hostname": environment.get("hostname")}
        for key in [key for key in row if key.startswith("_")]:
            entries = row.pop(key)
            if key[1:] in item.experiment.tables:
                self.tables.setdefault(key[1:], []).extend(
                    {"experiment": name, **config, **entry, "run_id": self.checked.run_id, **gpu} for entry in entries)
        run = {**reading, **environment, "run_id": self.checked.run_id, "wall_s": wall_s,
               "concurrent_gpus": alongside}
        row = {"experiment": name, **row, **run}
        try:
            self.check_row(row)
        except SchemaError as error:  # the experiment's bug: keep the configuration as a failed row, go on
            row = {"experiment": name, **config, "status": Status.FAILED,
                   "error": f"row does not fit the schema: {error}", **run}
        self.rows.append(row)

    def run(self) -> Outcome:
        runner, reporter = self.runner, self.runner.reporter
        reporter.planned(self.plans, self.metadata["estimate_s"], self.metadata["least_s"])
        previous_handler = signal.signal(signal.SIGTERM, _raise_interrupt)
        caught, stopped_in = 0, ""
        try:
            self.warm_up()
            self.readings = {device: self.read_monitor(device) for device in self.checked.devices}
            self.measure()
        except KeyboardInterrupt as interrupt:
            caught = interrupt.args[0] if interrupt.args else signal.SIGINT
            stopped_in = ", ".join(run.item.name for run in self.running.values())
            self.save(complete=False)
        except WriteError:  # saving again would fail the same way
            raise
        except BaseException:
            self.save(complete=False)
            raise
        finally:
            signal.signal(signal.SIGTERM, previous_handler)
            for started in self.ahead.values():
                started.end()
        if not caught:
            self.save(complete=True)
        path = self.path if self.rows else None
        return Outcome(path, self.rows, self.planned, interrupted=bool(caught), stopped_in=stopped_in,
                       signal=int(caught), wall_s=self.wall_s, startup_s=self.startup_s,
                       estimate_s=self.metadata["estimate_s"], concurrent=self.most_at_once > 1,
                       warm_s=self.warm_s, mode=runner.request.mode)

    def measure(self) -> None:
        """Run every plan: each starts as soon as all it holds is free (:func:`bench.sweep.plan.holds`), as
        :func:`bench.sweep.plan.schedule` expects, its processes' messages drained by a thread of its own, until
        every plan has ended."""
        with contextlib.closing(Drains()) as drains:
            self.start_free(drains)  # with nothing running, the first waiting plan finds all it holds free
            while self.running:
                index, message = drains.next()
                if isinstance(message, RaisedMessage):  # inline, the experiment's own; isolated, the harness's
                    raise message.error
                if message is not None:
                    self.running[index].handle(message)
                    continue
                plan_run = self.running.pop(index)
                name = plan_run.item.name
                self.wall_s[name] = plan_run.watch.seconds()
                self.finished_estimates.append((plan_run.item.estimate_s, self.wall_s[name]))
                self.runner.reporter.finished(name, self.wall_s[name])
                self.start_free(drains)  # what it held is free now

    def start_free(self, drains: Drains) -> None:
        """Start the waiting plans that find all they hold free (:func:`bench.sweep.plan.starting`); then start
        ahead the processes of those expected next."""
        taken = set().union(*(plan_run.holds for plan_run in self.running.values()))
        for item in [self.waiting[index] for index in planning.starting(self.waiting, self.at_once, taken)]:
            plan_run = _PlanRun(self, item, planning.holds(item, self.at_once), self.slack())
            self.waiting.remove(item)
            self.runner.reporter.started(item.name)
            self.running[drains.add(plan_run.messages)] = plan_run
        for plan_run in self.running.values():
            plan_run.alongside = max(plan_run.alongside, len(self.running))
        self.most_at_once = max(self.most_at_once, len(self.running))
        self.start_ahead()

    def warm_up(self) -> None:
        """Compile the kernels of the experiments whose caches are cold on this machine first
        (:func:`bench.sweep.warmup.warm_up`): only where experiments run in processes of their own."""
        runner, device = self.runner, self.checked.devices[0]
        environment = self.checked.selected.get(device)
        if runner.isolate and environment is not None:
            self.warm_s, self.warm_each_s = warm_up(self.plans, runner.gpu, environment, device, runner.reporter)

    def where(self, item: Plan) -> tuple[int | None, list[int], str | None]:
        """The device a plan's processes select, the CPUs they run on (none: leave them alone) and the GPUs CUDA
        shows them (None: the sweep's): a one-GPU plan's see their GPU alone, as device 0, so that no library they
        load starts on a GPU where another plan measures."""
        runner = self.runner
        environment = self.checked.selected.get(item.devices[0])
        if not runner.isolate or environment is None:
            return runner.gpu.child_device(item.devices[0]), [], None
        sees = runner.gpu.child_sees(environment) if item.experiment.processes.gpus == 1 else None
        device = runner.gpu.child_device(0 if sees else item.devices[0])
        return device, runner.gpu.child_cpus(environment), sees

    def busy_s(self) -> dict[object, float]:
        """What the running plans hold, and for how much longer each is expected to hold it."""
        busy: dict[object, float] = {}
        for plan_run in self.running.values():
            left_s = max(0.0, plan_run.item.estimate_s - plan_run.watch.seconds())
            busy.update(dict.fromkeys(plan_run.holds, left_s))
        return busy

    def start_ahead(self) -> None:
        """Start the processes of the waiting plans expected to start next (their first parts), one per GPU of the
        sweep, while the running ones measure: what they do before their turn (``Experiment.processes.ahead``,
        importing their libraries) is then done by their turn."""
        if not self.runner.isolate or not self.waiting:
            return
        starts = planning.schedule(self.waiting, self.at_once, self.busy_s())
        for index in sorted(range(len(self.waiting)), key=starts.__getitem__)[:len(self.checked.devices)]:
            item = self.waiting[index]
            if item.name not in self.ahead:
                device, cpus, sees = self.where(item)
                self.ahead[item.name] = start(item.parts()[0], device, cpus, sees=sees)

    def slack(self) -> float | None:
        """How much of its estimate each process of the waiting plan about to start may take (its pace's allowance:
        :meth:`bench.sweep.plan.Plan.pace`; None: unpaced), so that all plans are expected to end within the
        sweep's budget, counted from the command's start: the warm-up and every plan so far spent what they spent,
        and the plans still to run are expected to take as much longer than estimated as the finished ones did
        (never less). Above 1 where time is left over, below 1 where the budget is short. Unbudgeted sweeps
        (``--full``, ``--quick``) run as planned."""
        if self.budget_s is None:
            return None
        estimated = sum(estimate for estimate, _ in self.finished_estimates)
        spent = sum(wall for _, wall in self.finished_estimates)
        slowness = max(1.0, spent / estimated) if estimated > 0 else 1.0
        left_s = (self.budget_s - self.runner.started.seconds()) / slowness
        expected_s = planning.makespan_s(self.waiting, self.at_once, self.busy_s())
        return max(0.0, left_s / expected_s) if expected_s > 0 else 1.0


@dataclass(frozen=True)
class _PartStarted:
    """A plan's next part starts (its process, or inline): the messages that follow are that part's."""

    part: Plan
    watch: Stopwatch  # started with the part


class _PlanRun:
    """One plan running: its processes' messages become rows, failures become failed rows for what is left."""

    def __init__(self, sweep: _Sweep, item: Plan, holds: frozenset, slack: float | None) -> None:
        self.sweep, self.item, self.holds = sweep, item, holds  # holds: its GPUs, and the host where it holds it
        self.slack = slack  # the part of their estimates its processes may take (None: unpaced)
        self.alongside = 1  # the most plans (its own included) running at once since its last row
        self.device = item.devices[0]
        self.axes = list(item.experiment.axes)
        self.received: set = set()
        self.watch = Stopwatch()
        self.config_watch = self.part_watch = Stopwatch()
        self.part = item
        sweep.startup_s[item.name] = 0.0

    def messages(self, stop: threading.Event | None = None) -> Iterator[_PartStarted | ReadyMessage | RowMessage |
                                                                         FailedMessage]:
        """Every part's messages, a process each (a failure ends only its own part), each part's after a
        :class:`_PartStarted`: another thread may be draining them, so only :meth:`handle` changes this run.
        ``stop``: see :func:`isolated`."""
        runner = self.sweep.runner
        device, cpus, sees = self.sweep.where(self.item)
        for number, part in enumerate(self.item.parts()):
            pace = part.pace(self.slack) if self.slack is not None else None
            yield _PartStarted(part, Stopwatch())
            if runner.isolate:
                started = self.sweep.ahead.pop(self.item.name, None) if number == 0 else None
                yield from isolated(part, device, cpus, stop, pace=pace, started=started, sees=sees)
            else:
                yield from inline(part, pace)

    def handle(self, message) -> None:
        sweep, item, name = self.sweep, self.item, self.item.experiment.name
        reporter = sweep.runner.reporter
        if isinstance(message, _PartStarted):
            self.part, self.part_watch = message.part, message.watch
            return
        if isinstance(message, ReadyMessage):
            sweep.startup_s[item.name] += self.part_watch.seconds()
            self.config_watch = Stopwatch()
            return
        if isinstance(message, FailedMessage):
            for row in not_run(self.part, self.received, message.why):
                sweep.keep(item, row, 0.0, {}, self.alongside)
            left = [c for c in self.part.configs if config_key(name, c, self.axes) not in self.received]
            reporter.stopped(item, message.why, sum(item.seconds(c) for c in left))
            return
        row = message.row
        self.received.add(config_key(name, row, self.axes))
        before = sweep.readings.get(self.device, {})
        sweep.readings[self.device] = reading = sweep.read_monitor(self.device)
        sweep.keep(item, row, self.config_watch.seconds(), over_interval(before, reading), self.alongside)
        self.config_watch, self.alongside = Stopwatch(), len(sweep.running)
        reporter.row(item, sweep.rows[-1], item.seconds(row))
        if sweep.last_save.seconds() >= sweep.runner.save_every_s:
            sweep.save(complete=False)
            sweep.last_save = Stopwatch()


def _raise_interrupt(number, frame):
    raise KeyboardInterrupt(number)
