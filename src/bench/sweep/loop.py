"""The running sweep: :class:`Runner` takes a :class:`~bench.sweep.plan.Request` through three steps, each taking
what the one before returned, to an :class:`Outcome`:

1. :meth:`Runner.plan` → :class:`~bench.sweep.plan.Planned` (the plans, their GPUs, what was left out);
2. :meth:`Runner.check` → :class:`~bench.sweep.preflight.Checked` (the plans left to run, the results path, the
   GPUs' environments, a resumed file's rows); a problem is a :class:`bench.platform.errors.UsageError`, nothing written;
3. :meth:`Runner.run` → :class:`Outcome`: each experiment in a child process (:mod:`bench.sweep.processes`), so that
   a CUDA error that poisons its context (or a crash) ends only that experiment, whose unmeasured configurations
   become failed (or, out of memory, skipped) rows; every row checked against the schema and saved atomically at
   least every ``save_every_s``, so an interrupted sweep (Ctrl-C, SIGTERM) keeps what it finished; ``--resume``
   runs only what a file lacks. A new sweep's file never replaces another's (two sweeps of one second get two
   files), and a save that fails (a full disk) ends the sweep with a :class:`bench.platform.errors.WriteError`, its file as
   last saved.

The runner prints nothing: it reports to a :class:`Reporter` (the command line draws a progress bar from it).

It imports the rest of :mod:`bench.sweep`, :mod:`bench.results.store`, :mod:`bench.results.schema`, :mod:`bench.platform.env` and
:mod:`bench.timing`; nothing CUDA (the experiments' processes measure).
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
from bench.experiments import Experiment
from bench.results.schema import RowCheck, SchemaError
from bench.sweep import plan as planning
from bench.sweep import preflight
from bench.sweep.output import Output
from bench.sweep.plan import AtOnce, Plan, Planned, Request, config_key
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


@dataclass(frozen=True)
class _Work:
    """What a sweep runs: its plans that have configurations (in the sweep's order), their experiments, which of them
    run beside other GPUs' plans, how many configurations in all, and the time it aims at (None: as planned)."""

    plans: list[Plan]
    experiments: dict[str, Experiment]
    at_once: AtOnce
    planned: int
    budget_s: float | None

    @classmethod
    def of(cls, checked: Checked, request: Request) -> _Work:
        plans = [item for item in checked.plans if item.configs]
        budget_s = planning.budget_for(request.mode, request.budget_s)
        return cls(plans, planning.experiments_of(plans), request.at_once, sum(len(item.configs) for item in plans),
                   None if budget_s is None else planning.KEEP_TO * budget_s)


@dataclass
class _Progress:
    """How long a sweep's parts took: each plan's wall time and its processes' start, the warm-up's, and each finished
    plan's estimate against its wall time."""

    wall_s: dict[str, float] = field(default_factory=dict)  # per plan (experiment, and GPU), its processes' start-up
    # included
    startup_s: dict[str, float] = field(default_factory=dict)  # per plan: process start and GPU selection
    warm_s: float = 0.0
    warm_each_s: dict[str, float] = field(default_factory=dict)  # each experiment's warm-up process, start to end
    finished_estimates: list[tuple[float, float]] = field(default_factory=list)  # (estimate, wall time) of each
    # finished plan


@dataclass
class _Processes:
    """A sweep's plans as they take their turns: those waiting (in the sweep's order), those running, the processes
    started ahead of their turn, and the most plans that ran at the same time."""

    waiting: list[Plan]
    running: dict[int, _PlanRun] = field(default_factory=dict)  # by its source's index in the drains
    ahead: dict[str, Started] = field(default_factory=dict)  # by plan name: the process of its first part
    most_at_once: int = 0


class _Sweep:
    """The running part of a :class:`Runner`: receives rows, keeps them, saves them, reports them. Its parts: the work
    it runs, the output it writes, its progress and its plans' processes."""

    def __init__(self, runner: Runner, checked: Checked, monitors: Mapping[int, Callable[[], dict] | None]) -> None:
        self.runner, self.checked, self.monitors = runner, checked, monitors
        self.readings: dict[int, dict] = {}  # the monitor's last reading, per device
        self.work = work = _Work.of(checked, runner.request)
        earlier, request, schema = checked.earlier, runner.request, store.suite_schema(work.experiments)
        metadata = {
            "run_id": checked.run_id,
            "started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": request.command, "mode": request.mode, "budget_s": request.budget_s,
            "devices": list(checked.devices), "concurrent": request.concurrent, "one_at_a_time": request.one_at_a_time,
            "stop_rules": {item.experiment.name: {purpose: dataclasses.asdict(rule)
                                                  for purpose, rule in item.rules.items()} for item in work.plans},
            "floors": {item.experiment.name: dataclasses.asdict(item.experiment.accuracy.floor) for item in work.plans},
            "estimate_s": planning.estimate_s(work.plans, work.at_once),
            "least_s": planning.least_s(work.plans, work.at_once),
            "environment": dict(checked.environment),
            "environments": {str(device): dict(values) for device, values in checked.environments.items()},
        }
        earlier_rows = store.records(earlier.rows) if earlier is not None else []
        self.output = Output(
            checked.path, schema, metadata, earlier_rows,
            {name: store.records(table) for name, table in earlier.tables.items()} if earlier is not None else {},
            own_file=request.resume is not None, saved=len(earlier_rows))
        self.check_row = RowCheck(schema)
        self.progress = _Progress()
        self.processes = _Processes(list(work.plans))

    def save(self, complete: bool) -> None:
        """Write the rows so far, then their side tables (:meth:`bench.sweep.output.Output.save`), stamped with the
        run's metadata and times."""
        output, progress = self.output, self.progress
        if not output.rows:
            return
        stamp = {**output.metadata, "complete": complete, "planned": self.work.planned, "wall_s": progress.wall_s,
                 "startup_s": progress.startup_s, "warm_s": progress.warm_s, "warm_each_s": progress.warm_each_s}
        output.save(stamp, self.work.experiments)

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
                self.output.tables.setdefault(key[1:], []).extend(
                    {"experiment": name, **config, **entry, "run_id": self.checked.run_id, **gpu} for entry in entries)
        run = {**reading, **environment, "run_id": self.checked.run_id, "wall_s": wall_s,
               "concurrent_gpus": alongside}
        row = {"experiment": name, **row, **run}
        try:
            self.check_row(row)
        except SchemaError as error:  # the experiment's bug: keep the configuration as a failed row, go on
            row = {"experiment": name, **config, "status": Status.FAILED,
                   "error": f"row does not fit the schema: {error}", **run}
        self.output.rows.append(row)

    def run(self) -> Outcome:
        runner, reporter, output, progress = self.runner, self.runner.reporter, self.output, self.progress
        reporter.planned(self.work.plans, output.metadata["estimate_s"], output.metadata["least_s"])
        previous_handler = signal.signal(signal.SIGTERM, _raise_interrupt)
        caught, stopped_in = 0, ""
        try:
            self.warm_up()
            self.readings = {device: self.read_monitor(device) for device in self.checked.devices}
            self.measure()
        except KeyboardInterrupt as interrupt:
            caught = interrupt.args[0] if interrupt.args else signal.SIGINT
            stopped_in = ", ".join(run.item.name for run in self.processes.running.values())
            self.save(complete=False)
        except WriteError:  # saving again would fail the same way
            raise
        except BaseException:
            self.save(complete=False)
            raise
        finally:
            signal.signal(signal.SIGTERM, previous_handler)
            for started in self.processes.ahead.values():
                started.end()
        if not caught:
            self.save(complete=True)
        path = output.path if output.rows else None
        return Outcome(path, output.rows, self.work.planned, interrupted=bool(caught), stopped_in=stopped_in,
                       signal=int(caught), wall_s=progress.wall_s, startup_s=progress.startup_s,
                       estimate_s=output.metadata["estimate_s"], concurrent=self.processes.most_at_once > 1,
                       warm_s=progress.warm_s, mode=runner.request.mode)

    def measure(self) -> None:
        """Run every plan: each starts as soon as all it holds is free (:func:`bench.sweep.plan.holds`), as
        :func:`bench.sweep.plan.schedule` expects, its processes' messages drained by a thread of its own, until
        every plan has ended."""
        running, progress = self.processes.running, self.progress
        with contextlib.closing(Drains()) as drains:
            self.start_free(drains)  # with nothing running, the first waiting plan finds all it holds free
            while running:
                index, message = drains.next()
                if isinstance(message, RaisedMessage):  # inline, the experiment's own; isolated, the harness's
                    raise message.error
                if message is not None:
                    running[index].handle(message)
                    continue
                plan_run = running.pop(index)
                name = plan_run.item.name
                progress.wall_s[name] = plan_run.watch.seconds()
                progress.finished_estimates.append((plan_run.item.estimate_s, progress.wall_s[name]))
                self.runner.reporter.finished(name, progress.wall_s[name])
                self.start_free(drains)  # what it held is free now

    def start_free(self, drains: Drains) -> None:
        """Start the waiting plans that find all they hold free (:func:`bench.sweep.plan.starting`); then start
        ahead the processes of those expected next."""
        processes, at_once = self.processes, self.work.at_once
        taken = set().union(*(plan_run.holds for plan_run in processes.running.values()))
        for item in [processes.waiting[index] for index in planning.starting(processes.waiting, at_once, taken)]:
            plan_run = _PlanRun(self, item, planning.holds(item, at_once), self.slack())
            processes.waiting.remove(item)
            self.runner.reporter.started(item.name)
            processes.running[drains.add(plan_run.messages)] = plan_run
        for plan_run in processes.running.values():
            plan_run.alongside = max(plan_run.alongside, len(processes.running))
        processes.most_at_once = max(processes.most_at_once, len(processes.running))
        self.start_ahead()

    def warm_up(self) -> None:
        """Compile the kernels of the experiments whose caches are cold on this machine first
        (:func:`bench.sweep.warmup.warm_up`): only where experiments run in processes of their own."""
        runner, device = self.runner, self.checked.devices[0]
        environment = self.checked.selected.get(device)
        if runner.isolate and environment is not None:
            self.progress.warm_s, self.progress.warm_each_s = warm_up(self.work.plans, runner.gpu, environment, device,
                                                                      runner.reporter)

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
        for plan_run in self.processes.running.values():
            left_s = max(0.0, plan_run.item.estimate_s - plan_run.watch.seconds())
            busy.update(dict.fromkeys(plan_run.holds, left_s))
        return busy

    def start_ahead(self) -> None:
        """Start the processes of the waiting plans expected to start next (their first parts), one per GPU of the
        sweep, while the running ones measure: what they do before their turn (``Experiment.processes.ahead``,
        importing their libraries) is then done by their turn."""
        waiting, ahead = self.processes.waiting, self.processes.ahead
        if not self.runner.isolate or not waiting:
            return
        starts = planning.schedule(waiting, self.work.at_once, self.busy_s())
        for index in sorted(range(len(waiting)), key=starts.__getitem__)[:len(self.checked.devices)]:
            item = waiting[index]
            if item.name not in ahead:
                device, cpus, sees = self.where(item)
                ahead[item.name] = start(item.parts()[0], device, cpus, sees=sees)

    def slack(self) -> float | None:
        """How much of its estimate each process of the waiting plan about to start may take (its pace's allowance:
        :meth:`bench.sweep.plan.Plan.pace`; None: unpaced), so that all plans are expected to end within the
        sweep's budget, counted from the command's start: the warm-up and every plan so far spent what they spent,
        and the plans still to run are expected to take as much longer than estimated as the finished ones did
        (never less). Above 1 where time is left over, below 1 where the budget is short. Unbudgeted sweeps
        (``--full``, ``--quick``) run as planned."""
        budget_s, finished = self.work.budget_s, self.progress.finished_estimates
        if budget_s is None:
            return None
        estimated = sum(estimate for estimate, _ in finished)
        spent = sum(wall for _, wall in finished)
        slowness = max(1.0, spent / estimated) if estimated > 0 else 1.0
        left_s = (budget_s - self.runner.started.seconds()) / slowness
        expected_s = planning.makespan_s(self.processes.waiting, self.work.at_once, self.busy_s())
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
        sweep.progress.startup_s[item.name] = 0.0

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
                started = self.sweep.processes.ahead.pop(self.item.name, None) if number == 0 else None
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
            sweep.progress.startup_s[item.name] += self.part_watch.seconds()
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
        self.config_watch, self.alongside = Stopwatch(), len(sweep.processes.running)
        reporter.row(item, sweep.output.rows[-1], item.seconds(row))
        if sweep.output.last_save.seconds() >= sweep.runner.save_every_s:
            sweep.save(complete=False)
            sweep.output.last_save = Stopwatch()


def _raise_interrupt(number, frame):
    raise KeyboardInterrupt(number)
