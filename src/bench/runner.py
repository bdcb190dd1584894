"""The sweep: plan, check, run each experiment in its own process, save as it goes, resume, summarise.

:class:`Runner` owns a sweep from a :class:`Request` (what the user asked for) to an :class:`Outcome`:

1. **plan** (:mod:`bench.plan`): configurations, stop rules and the expected time;
2. **check**: the output path (never an existing results file, unless resuming it), the GPU, the memory the plan
   needs; a problem is a :class:`bench.errors.UsageError` and nothing is written;
3. **run**: each experiment in a child process, so that a CUDA error that poisons its context (or a crash) ends
   only that experiment, whose unmeasured configurations become failed (or, out of memory, skipped) rows;
4. **save**: every row checked against the schema and written atomically at least every ``save_every_s``, so an
   interrupted sweep (Ctrl-C, SIGTERM) keeps what it finished; ``--resume`` runs only what a file lacks. A new
   sweep's file never replaces another's (two sweeps of one second get two files), and a save that fails (a full
   disk) ends the sweep with a :class:`bench.errors.WriteError`, its file as last saved.

The runner prints nothing: it reports to a :class:`Reporter` (the command line draws a progress bar from it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import multiprocessing
import os
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from queue import Empty, Queue

import pandas as pd

from bench import plan as planning
from bench import store
from bench.env import over_interval
from bench.errors import UsageError, WriteError
from bench.plan import Plan, config_key
from bench.schema import SchemaError, check_row
from bench.timing import Stopwatch
from bench.units import format_size


@dataclass(frozen=True)
class Request:
    """What the user asked for."""

    experiments: Sequence[str] | None = None  # None: all
    mode: str = "default"  # quick, default or full
    sizes: Sequence[int] | None = None
    axes: Mapping[str, Sequence[str]] = field(default_factory=dict)
    out: Path = Path("results")  # a directory, or a .parquet file that does not exist yet
    device: int = 0
    resume: Path | None = None  # an interrupted sweep's file: run what it lacks, into it
    budget_s: float | None = None
    command: str = ""
    devices: Sequence[int] | str = ()  # several GPUs, or "all" (empty: just ``device``)
    concurrent: bool = False  # the selected GPUs run each one-GPU experiment at the same time
    started_s: float = 0.0  # seconds the command had run before it made the request: they count against the budget


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
    concurrent: bool = False  # the GPUs ran each experiment at once: wall_s of one experiment's GPUs overlap
    warm_s: float = 0.0  # compiling a fresh machine's kernel caches before measuring (0: they were warm)


class Reporter:
    """What a sweep tells its user; the default tells nothing."""

    def planned(self, plans: Sequence[Plan], estimate_s: float) -> None: ...

    def started(self, experiment: str) -> None: ...

    def row(self, plan: Plan, row: dict, seconds_planned: float) -> None: ...

    def stopped(self, plan: Plan, why: str, seconds_planned: float) -> None: ...

    def finished(self, experiment: str, wall_s: float) -> None: ...

    def warmed(self, seconds: float, experiments: Sequence[str], failed: Mapping[str, str]) -> None: ...


# --- messages from an experiment's process ---------------------------------------------------------------------

@dataclass(frozen=True)
class RowMessage:
    row: dict


@dataclass(frozen=True)
class FailedMessage:
    why: str


@dataclass(frozen=True)
class ReadyMessage:
    """The process has started and selected its GPU: what came before is start-up, not measurement."""


@dataclass(frozen=True)
class DoneMessage:
    pass


def _processes():
    """Experiment processes are forked from a server that has done, once, what each would do first
    (:mod:`bench.preload`, and importing every experiment); each still creates a CUDA context of its own."""
    # Experiments never use NVLink multicast; a library they call (NCCL under PyTorch) must not choose it either.
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["bench.preload"] + [f"bench.experiments.{name}" for name in _experiment_modules()])
    return context


def start_processes() -> None:
    """Start the fork server now: its imports then run while the sweep sets up (the monitor, the warm-up plan)."""
    from multiprocessing import forkserver

    _processes()
    forkserver.ensure_running()


@functools.cache
def _experiment_modules() -> list[str]:
    import pkgutil

    import bench.experiments

    return [info.name for info in pkgutil.iter_modules(bench.experiments.__path__)]


def _child(sender, experiment, configs, rules, device: int | None, cpus: Sequence[int], warming: bool,
           pace: planning.Pace | None) -> None:
    """The body of an experiment's process: move to the GPU's CPUs, select the GPU, measure, send each row as it
    comes; ``warming`` (the warm-up): then the experiment's ``warm`` hook. ``pace``: keep to the plan's time."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what an interrupt ends
    try:
        if cpus:
            os.sched_setaffinity(0, cpus)
        if experiment.process_axis:  # this process's value of it, set before CUDA reads its settings
            experiment.before_cuda(configs[0][experiment.process_axis], device or 0)
        if device is not None:
            use_device(device)
        sender.send(ReadyMessage())
        for row in paced(experiment, configs, rules, pace):
            sender.send(RowMessage(row))
        if warming and experiment.warm is not None:
            experiment.warm()
        sender.send(DoneMessage())
    except BaseException as error:
        sender.send(FailedMessage(f"{type(error).__name__}: {error}"))
    finally:
        sender.close()
        # No interpreter teardown: libraries that share the CUDA context (PyTorch's tensors freed after the context
        # went away) can abort a process that has already sent everything it measured.
        os._exit(0)


def paced(experiment, configs, rules, pace: planning.Pace | None) -> Iterator[dict]:
    """The experiment's rows, each with the stop-rule scale it was measured under (``stop_scale``); with a
    ``pace``, the rules of what is left shrink whenever the configurations so far ran slower than planned."""
    from bench.timing import RuleBoundSampling, Context

    context = Context(rules)
    watch, bound_before_s = Stopwatch(), RuleBoundSampling.seconds
    for row in experiment.measure(configs, context):
        row["stop_scale"] = context.scale
        yield row
        if pace is not None:
            context.rescale(pace.finished(watch.seconds(), RuleBoundSampling.seconds - bound_before_s))


def isolated(item: Plan, device: int | None, cpus: Sequence[int] = (), stop: threading.Event | None = None,
             warming: bool = False, pace: planning.Pace | None = None) -> Iterator[ReadyMessage | RowMessage |
                                                                                 FailedMessage]:
    """Run a plan in a child process: ready, its rows, then a FailedMessage if the child could not finish, or if
    it went ``Experiment.row_timeout_s`` without a row (a hung call: the watchdog ends the process). Once ``stop``
    is set (nobody listens any more), it ends the process and returns. ``warming``: a warm-up part (see
    :func:`warm_parts`); ``pace``: see :func:`paced`."""
    context = _processes()
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_child, daemon=True,
                            args=(sender, item.experiment, item.configs, item.rules, device, list(cpus), warming,
                                  pace))
    child.start()
    sender.close()
    ended = f"the {item.experiment.name} process ended"
    waiting = Stopwatch()
    try:
        while stop is None or not stop.is_set():
            if waiting.seconds() > item.experiment.row_timeout_s:
                yield FailedMessage(f"no row for {item.experiment.row_timeout_s:g} s: the {item.experiment.name} "
                                    "process hung and was stopped")
                return
            if receiver.poll(0.2):
                waiting = Stopwatch()
                try:
                    message = receiver.recv()
                except EOFError:
                    child.join(5)
                    yield FailedMessage(f"{ended} (exit code {child.exitcode})")
                    return
                if isinstance(message, DoneMessage):
                    return
                yield message
                if isinstance(message, FailedMessage):
                    return
            elif not child.is_alive() and not receiver.poll(0):
                yield FailedMessage(f"{ended} (exit code {child.exitcode})")
                return
    finally:
        receiver.close()
        if child.is_alive():
            child.terminate()
        child.join(10)


WARM_CONTEXT_BYTES = 2 << 30  # device memory a warm-up process may take: its CUDA context and first configuration


def warm_parts(plans: Sequence[Plan]) -> list[Plan]:
    """Each experiment's first configuration under the quick stop rules, in a process of its own, which then runs
    the experiment's ``warm`` hook: enough to compile the kernels its processes build (numba-cuda's and CuPy's
    on-disk caches) on a fresh machine."""
    parts, seen = [], set()
    for item in plans:
        if item.experiment.name in seen or not item.configs:
            continue
        seen.add(item.experiment.name)
        first = item.parts()[0]
        parts.append(dataclasses.replace(first, configs=first.configs[:1],
                                         rules=planning.rules_for(item.experiment, "quick")))
    return parts


def inline(item: Plan, pace: planning.Pace | None = None) -> Iterator[ReadyMessage | RowMessage]:
    """Run a plan in this process (tests, and code that owns the GPU already); its exceptions propagate. A
    ``process_axis`` hook runs too, though CUDA may have read its settings already."""
    if item.experiment.process_axis and item.configs:
        item.experiment.before_cuda(item.configs[0][item.experiment.process_axis], 0)
    yield ReadyMessage()
    for row in paced(item.experiment, item.configs, item.rules, pace):
        yield RowMessage(row)


def not_run(item: Plan, received: set, why: str) -> list[dict]:
    """Rows for the configurations an experiment's failure left unmeasured: skipped when it ran out of memory."""
    out_of_memory = "MemoryAllocation" in why or "out of memory" in why.lower()
    status = "skipped" if out_of_memory else "failed"
    axes = list(item.experiment.axes)
    return [{**config, "status": status,
             "error": f"{'skipped' if out_of_memory else 'not measured'}: the {item.experiment.name} experiment "
                      f"stopped: {why}"}
            for config in item.configs if config_key(item.experiment.name, config, axes) not in received]


# --- checks ---------------------------------------------------------------------------------------------------

class Gpu:
    """The GPU a sweep checks and runs on (tests hand the runner a stand-in)."""

    def select(self, device: int):
        """The :class:`bench.env.Environment` of ``device``. UsageError when there is none."""
        return gpu_environment(device)

    def count(self) -> int:
        """How many GPUs are visible. UsageError when there is none."""
        return gpu_count()

    def free_bytes(self, environment) -> int:
        from bench import env

        return env.free_memory_bytes(environment.pci_bus_id)

    def child_device(self, device: int) -> int | None:
        """The device an experiment's process selects (None: leave it alone)."""
        return device

    def warm_markers(self, environment) -> Path | None:
        """A directory of one file per experiment whose existence says that this machine's kernel caches
        (numba-cuda's beside this source tree, CuPy's in the home directory) hold that experiment's kernels, of this
        bench, for this GPU architecture (None: never warm up)."""
        import hashlib

        import bench

        tree = hashlib.sha1(str(Path(bench.__file__).resolve().parent).encode()).hexdigest()[:8]
        key = "-".join([environment.bench_version, environment.git_commit[:12], environment.cupy_version,
                        environment.numba_cuda_version, f"sm{environment.compute_capability}", tree])
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        return cache / "bench" / ("warm-" + "".join(c if c.isalnum() or c in ".-" else "_" for c in key))

    def child_cpus(self, environment) -> list[int]:
        """The CPUs an experiment's process runs on (empty: leave it alone): those local to the GPU, as its
        environment read them."""
        from bench import env

        return env.parse_cpu_ranges(environment.host_cpus)


def use_device(device: int) -> None:
    """Make ``device`` current for CuPy and numba-cuda in this process."""
    from bench.cuda import numba_cuda, runtime

    runtime.setDevice(device)
    numba_cuda.select_device(device)


def gpu_count() -> int:
    """How many GPUs are visible, counted without creating a CUDA context in this process (the sweep's parent
    leaves the GPU to its experiments' processes). UsageError when there is none, saying why and what works
    without one."""
    from bench import env

    reason = env.no_gpu_reason()
    if reason:
        raise UsageError(f"{reason}; {env.WITHOUT_GPU}")
    from bench.cuda import runtime

    return runtime.getDeviceCount()


def gpu_environment(device: int):
    """The environment of ``device``, read without creating a CUDA context in this process. UsageError when there
    is no such GPU."""
    from bench import env

    count = gpu_count()
    if not 0 <= device < count:
        raise UsageError(f"--device {device}: {count} GPU(s) visible, ordinals 0..{count - 1}")
    return env.collect(device)


def writable_directory(directory: Path, option: str) -> Path:
    """``directory`` (or its nearest existing parent) must take a new file; UsageError naming ``option`` if not."""
    existing = Path(directory)
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{option}: {existing} is {store.kind_of(existing)}, not a directory")
    try:
        with tempfile.TemporaryFile(dir=existing):  # a real probe: permission bits do not tell root's story
            pass
    except OSError as error:
        raise UsageError(f"{option}: cannot write to {directory}/ ({existing}: {error.strerror})") from None
    return Path(directory)


def host_memory_available() -> int:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def memory_problem(plans: Sequence[Plan], gpu_name: str, device_free: int, host_available: int) -> str | None:
    """Why the plans cannot run in this much device and host memory, or None."""
    for item in plans:
        if not item.configs:
            continue
        device_bytes, host_bytes = item.experiment.memory_needed(item.configs)
        if device_bytes > device_free:
            return (f"--sizes: {item.experiment.name} needs {format_size(device_bytes)} of device memory; "
                    f"{gpu_name} has {format_size(device_free)} free")
        if host_bytes > host_available:
            return (f"--sizes: {item.experiment.name} needs {format_size(host_bytes)} of host memory; "
                    f"{format_size(host_available)} is available")
    return None


def results_path(out: Path, run_id: str, gpu_name: str) -> Path:
    """Where a new sweep writes: ``out`` itself if it names a .parquet file, else ``out/<run_id>-<gpu>.parquet``
    (where another run took that name first, its first save takes the next free one: see
    :func:`bench.store.write_table`)."""
    if out.suffix == ".parquet":
        return out
    slug = "".join(c if c.isalnum() else "-" for c in gpu_name).strip("-")
    return out / f"{run_id}-{slug}.parquet"


def refuse_existing(path: Path) -> None:
    """A sweep never overwrites a results file."""
    if path.exists():
        raise UsageError(f"--out: {path} already exists; bench never overwrites results (finish an interrupted "
                         f"sweep with --resume {path}, or choose another --out)")


# --- the sweep -------------------------------------------------------------------------------------------------

class Runner:
    """One sweep: :meth:`plan`, :meth:`check`, then :meth:`run`."""

    def __init__(self, request: Request, reporter: Reporter | None = None, *, gpu: Gpu | None = None,
                 isolate: bool = True, save_every_s: float = 2.0) -> None:
        self.request = request
        self.reporter = reporter or Reporter()
        self.gpu = gpu or Gpu()
        self.isolate = isolate
        self.save_every_s = save_every_s
        self.plans: list[Plan] = []
        self.devices: tuple[int, ...] = (request.device,)
        self.left_out: dict[str, str] = {}  # experiments this sweep has too few GPUs for, with why
        self.path: Path | None = None
        self.environment: dict = {}  # the first GPU's: the file's metadata and name
        self.environments: dict[int, dict] = {}  # by device ordinal: the columns its rows carry
        self.selected: dict[int, object] = {}  # by device ordinal: its bench.env.Environment
        self.previous: pd.DataFrame | None = None
        self.previous_tables: dict[str, pd.DataFrame] = {}
        self.started = Stopwatch(request.started_s)  # the command's time: a budget counts from its start
        # the start second (so names sort by time), then the process: two sweeps of one second differ
        self.run_id = f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{os.getpid()}"

    def plan(self) -> list[Plan]:
        """The configurations to run (UsageError for an unknown experiment, axis or value, or a budget that cannot
        be met)."""
        request = self.request
        self.devices = self._selected_devices()
        try:
            self.plans = planning.make(request.experiments, mode=request.mode, sizes=request.sizes,
                                       axes=request.axes, budget_s=request.budget_s, devices=self.devices,
                                       concurrent=request.concurrent)
        except ValueError as error:
            raise UsageError(f"--experiments/--axis/--budget/--devices: {error}") from None
        if request.experiments is None:
            self.left_out = planning.too_few_gpus(None, self.devices)
        return self.plans

    def _selected_devices(self) -> tuple[int, ...]:
        """The GPUs of ``--devices`` (all visible ones for "all"), else ``--device``; UsageError for one that
        does not exist, or for --concurrent with fewer than two."""
        request = self.request
        devices: tuple[int, ...] = (request.device,)
        chosen = request.devices
        if not chosen and request.resume is not None:  # a sweep of several GPUs resumes on the same GPUs
            chosen = store.read_metadata(request.resume).get("devices") or ()
        if chosen:
            count = self.gpu.count()
            if chosen == "all":
                devices = tuple(range(count))
            else:
                devices = tuple(sorted(set(chosen)))  # in order: a multi-GPU plan's rows carry its first GPU
                for device in devices:
                    if not 0 <= device < count:
                        raise UsageError(f"--devices {device}: {count} GPU(s) visible, ordinals 0..{count - 1}")
        if request.concurrent and len(devices) < 2:
            raise UsageError("--concurrent runs several GPUs at once: select two or more with --devices")
        return devices

    def check(self) -> None:
        """Output path, GPU, resume file and memory; UsageError for the first problem, with nothing written."""
        request = self.request
        if request.resume is not None:
            version = store.read_metadata(request.resume).get("schema_version", 1)
            if version != store.SCHEMA_VERSION:
                raise UsageError(f"--resume: {request.resume} was written by an older bench (schema version "
                                 f"{version}); start a new sweep")
            self.previous = store.read(request.resume)
            self.previous_tables = store.side_tables(request.resume)
            writable_directory(request.resume.parent, "--resume")
        else:
            writable_directory(request.out.parent if request.out.suffix == ".parquet" else request.out, "--out")
            if request.out.suffix == ".parquet":
                refuse_existing(request.out)
        chosen = {device: self.gpu.select(device) for device in self.devices}
        self.selected = chosen
        self.environments = {device: environment.as_dict() for device, environment in chosen.items()}
        environment = chosen[self.devices[0]]
        self.environment = self.environments[self.devices[0]]
        uuids = {device: chosen[device].gpu_uuid for device in self.devices}
        if self.previous is not None:
            measured_on = set(self.previous["gpu_uuid"].dropna()) if "gpu_uuid" in self.previous else set()
            if measured_on and not measured_on <= set(uuids.values()):
                raise UsageError(f"--resume: {request.resume} was measured on another GPU "
                                 f"({', '.join(sorted(measured_on - set(uuids.values())))}); a sweep of several "
                                 "GPUs resumes with the same --devices")
            self.plans = planning.without_done(self.plans, self.previous, uuids)
            self.path = request.resume
        else:
            self.path = results_path(request.out, self.run_id, environment.gpu_name)
        host_available = host_memory_available()
        if request.concurrent:  # every GPU's buffers at once
            host_available //= len(chosen)
        for device, selected in chosen.items():
            mine = [item for item in self.plans if device in item.devices]
            problem = memory_problem(mine, selected.gpu_name, self.gpu.free_bytes(selected), host_available)
            if problem:
                raise UsageError(problem if len(chosen) == 1 else f"{problem} (GPU {device})")
        if self.isolate and any(item.configs for item in self.plans):  # checked: its processes' server starts
            start_processes()

    def run(self, monitor=None) -> Outcome:
        """Run the checked plans into :attr:`path`. ``monitor()`` (NVML clocks, throttling, other processes; see
        :mod:`bench.env`) is read before the first and after every configuration."""
        monitors = {}
        for device, environment in self.environments.items():
            if monitor is not None:
                monitors[device] = monitor
            elif environment.get("pci_bus_id"):
                from bench import env

                monitors[device] = env.monitor(environment["pci_bus_id"])
        return _Sweep(self, monitors).run()


class _Sweep:
    """The running part of a :class:`Runner`: receives rows, keeps them, saves them, reports them."""

    def __init__(self, runner: Runner, monitors: Mapping[int, Callable[[], dict] | None]) -> None:
        self.runner, self.monitors = runner, monitors
        self.plans = [item for item in runner.plans if item.configs]
        self.rows: list[dict] = []
        self.tables: dict[str, list[dict]] = {}
        self.earlier = store.records(runner.previous) if runner.previous is not None else []
        self.earlier_tables = {name: store.records(table) for name, table in runner.previous_tables.items()}
        self.schema = store.suite_schema([item.experiment for item in self.plans])
        request = runner.request
        self.metadata = {
            "run_id": runner.run_id,
            "started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": request.command, "mode": request.mode, "budget_s": request.budget_s,
            "devices": list(runner.devices), "concurrent": request.concurrent,
            "stop_rules": {item.experiment.name: {purpose: dataclasses.asdict(rule)
                                                  for purpose, rule in item.rules.items()} for item in self.plans},
            "estimate_s": planning.estimate_s(self.plans, request.concurrent),
            "environment": dict(runner.environment),
            "environments": {str(device): dict(values) for device, values in runner.environments.items()},
        }
        self.planned = sum(len(item.configs) for item in self.plans)
        self.wall_s: dict[str, float] = {}  # per plan (experiment, and GPU), its processes' start-up included
        self.startup_s: dict[str, float] = {}  # per plan: process start and GPU selection
        self.readings: dict[int, dict] = {}  # the monitor's last reading, per device
        self.warm_s = 0.0
        self.last_save = Stopwatch()
        self.own_file = request.resume is not None  # runner.path is this run's: resumed, or saved once
        self.saved = len(self.earlier)  # rows in runner.path as last saved
        budget_s = planning.budget_for(request.mode, request.budget_s)
        self.budget_s = None if budget_s is None else planning.KEEP_TO * budget_s  # what it aims at
        self.finished_estimates: list[tuple[float, float]] = []  # (estimate, wall time) of each finished plan

    def save(self, complete: bool) -> None:
        """Write the rows so far, then their side tables. A new run's first save takes a name no other run has
        (:func:`bench.store.write_table`); later saves rewrite that file. WriteError (a full disk) names the file
        that failed and what the results file kept."""
        if not self.rows:
            return
        runner = self.runner
        stamp = {**self.metadata, "complete": complete, "planned": self.planned, "wall_s": self.wall_s,
                 "startup_s": self.startup_s, "warm_s": self.warm_s}
        rows = self.earlier + self.rows
        try:
            runner.path = store.write(runner.path, rows, self.schema, stamp, new=not self.own_file)
            self.own_file, self.saved = True, len(rows)
            for name in {*self.tables, *self.earlier_tables}:
                entries = self.earlier_tables.get(name, []) + self.tables.get(name, [])
                store.write(store.side_table_path(runner.path, name), entries, store.table_schema(name),
                            {**stamp, "table": name})
        except WriteError as error:
            raise WriteError(f"{error}; {self.kept()}") from None

    def kept(self) -> str:
        """What the results file holds after a failed save, for its message."""
        measured = f"{len(self.rows)} configurations measured in this run"
        if not self.own_file:
            return f"nothing was written ({measured})"
        path = self.runner.path
        return f"{path} keeps its last save, {self.saved} configurations ({measured}); --resume {path} finishes it"

    def read_monitor(self, device: int) -> dict:
        monitor = self.monitors.get(device)
        return monitor() if monitor else {}

    def keep(self, item: Plan, row: dict, wall_s: float, reading: dict, at_once: int = 1) -> None:
        """Add the run's columns to a row from an experiment, move its side-table rows aside, check it."""
        name = item.experiment.name
        config = {axis: row.get(axis) for axis in item.experiment.axes}
        environment = self.runner.environments.get(item.devices[0], self.runner.environment)
        gpu = {"gpu_uuid": environment.get("gpu_uuid"), "hostname": environment.get("hostname")}
        for key in [key for key in row if key.startswith("_")]:
            entries = row.pop(key)
            if key[1:] in item.experiment.tables:
                self.tables.setdefault(key[1:], []).extend(
                    {"experiment": name, **config, **entry, "run_id": self.runner.run_id, **gpu} for entry in entries)
        run = {**reading, **environment, "run_id": self.runner.run_id, "wall_s": wall_s, "concurrent_gpus": at_once}
        row = {"experiment": name, **row, **run}
        try:
            check_row(row, self.schema)
        except SchemaError as error:  # the experiment's bug: keep the configuration as a failed row, go on
            row = {"experiment": name, **config, "status": "failed", "error": f"row does not fit the schema: {error}",
                   **run}
        self.rows.append(row)

    def run(self) -> Outcome:
        runner, reporter = self.runner, self.runner.reporter
        reporter.planned(self.plans, self.metadata["estimate_s"])
        current = ""
        previous_handler = signal.signal(signal.SIGTERM, _raise_interrupt)
        caught = 0
        try:
            self.warm_up()
            self.readings = {device: self.read_monitor(device) for device in runner.devices}
            groups = self.groups()
            for index in range(len(groups)):
                group, slack = groups[index], self.slack(groups[index:])
                current = ", ".join(item.name for item in group)
                runs = [_PlanRun(self, item, len(group), slack) for item in group]
                for plan_run in runs:
                    reporter.started(plan_run.item.name)
                if len(runs) == 1:
                    for message in runs[0].messages():
                        runs[0].handle(message)
                else:
                    with contextlib.closing(_interleaved([plan_run.messages for plan_run in runs])) as messages:
                        for index, message in messages:
                            runs[index].handle(message)
                for plan_run in runs:
                    self.wall_s[plan_run.item.name] = plan_run.watch.seconds()
                    self.finished_estimates.append((plan_run.item.estimate_s, self.wall_s[plan_run.item.name]))
                    reporter.finished(plan_run.item.name, self.wall_s[plan_run.item.name])
        except KeyboardInterrupt as interrupt:
            caught = interrupt.args[0] if interrupt.args else signal.SIGINT
            self.save(complete=False)
        except WriteError:  # saving again would fail the same way
            raise
        except BaseException:
            self.save(complete=False)
            raise
        finally:
            signal.signal(signal.SIGTERM, previous_handler)
        if not caught:
            self.save(complete=True)
        path = runner.path if self.rows else None
        return Outcome(path, self.rows, self.planned, interrupted=bool(caught), stopped_in=current if caught else "",
                       signal=int(caught), wall_s=self.wall_s, startup_s=self.startup_s,
                       estimate_s=self.metadata["estimate_s"], concurrent=runner.request.concurrent,
                       warm_s=self.warm_s)

    def warm_up(self) -> None:
        """Where the kernel caches are cold for some experiments (no warm marker), compile their kernels at once, a
        process per experiment (fewer at a time only if the GPU lacks :data:`WARM_CONTEXT_BYTES` of free memory for
        each), before measuring anything: what they measure is dropped. Done once per experiment, machine, bench
        version and GPU architecture; an experiment whose warm-up process failed stays cold."""
        runner = self.runner
        environment = runner.selected.get(runner.devices[0])
        markers = runner.gpu.warm_markers(environment) if runner.isolate and environment is not None else None
        if markers is None:
            return
        parts = [part for part in warm_parts(self.plans) if not (markers / part.experiment.name).exists()]
        if not parts:
            return
        watch = Stopwatch()
        device = runner.gpu.child_device(runner.devices[0])
        cpus = runner.gpu.child_cpus(environment)
        at_once = max(1, min(len(parts), runner.gpu.free_bytes(environment) // WARM_CONTEXT_BYTES))
        markers.mkdir(parents=True, exist_ok=True)
        failed: dict[str, str] = {}
        for start in range(0, len(parts), at_once):
            batch = parts[start:start + at_once]
            warming = [functools.partial(isolated, part, device, cpus, warming=True) for part in batch]
            for index, message in _interleaved(warming):
                if isinstance(message, FailedMessage):
                    failed[batch[index].experiment.name] = message.why
            for part in batch:  # a process that failed may not have compiled everything
                if part.experiment.name not in failed:
                    (markers / part.experiment.name).touch()
        self.warm_s = watch.seconds()
        runner.reporter.warmed(self.warm_s, [part.experiment.name for part in parts], failed)

    def slack(self, groups: Sequence[Sequence[Plan]]) -> float | None:
        """How much of its estimate each process of the first of the groups still to run may take (its pace's
        allowance: :meth:`bench.plan.Plan.pace`; None: unpaced), so that all of them are expected to end within
        the sweep's budget, counted from the command's start: the warm-up and every plan so far spent what they
        spent, and the plans still to run are expected to take as much longer than estimated as the finished ones
        did (never less). Above 1 where time is left over, below 1 where the budget is short. Unbudgeted sweeps
        (``--full``, ``--quick``) run as planned."""
        if self.budget_s is None:
            return None
        estimated = sum(estimate for estimate, _ in self.finished_estimates)
        spent = sum(wall for _, wall in self.finished_estimates)
        slowness = max(1.0, spent / estimated) if estimated > 0 else 1.0
        left_s = (self.budget_s - self.runner.started.seconds()) / slowness
        expected_s = planning.estimate_s([item for later in groups for item in later], self.runner.request.concurrent,
                                         startup_s=0.0)
        return max(0.0, left_s / expected_s) if expected_s > 0 else 1.0

    def groups(self) -> list[list[Plan]]:
        """The plans in the order they run: one at a time, or (--concurrent) an experiment's per-GPU plans
        together."""
        groups: list[list[Plan]] = []
        for item in self.plans:
            together = (self.runner.request.concurrent and groups and item.experiment.gpus == 1
                        and groups[-1][0].experiment is item.experiment)
            if together:
                groups[-1].append(item)
            else:
                groups.append([item])
        return groups


@dataclass(frozen=True)
class _PartStarted:
    """A plan's next part starts (its process, or inline): the messages that follow are that part's."""

    part: Plan
    watch: Stopwatch  # started with the part


class _PlanRun:
    """One plan running: its processes' messages become rows, failures become failed rows for what is left."""

    def __init__(self, sweep: _Sweep, item: Plan, at_once: int, slack: float | None = None) -> None:
        self.sweep, self.item, self.at_once = sweep, item, at_once
        self.slack = slack  # the part of their estimates its processes may take (None: unpaced)
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
        environment = runner.selected.get(self.device)
        cpus = runner.gpu.child_cpus(environment) if runner.isolate and environment is not None else []
        device = runner.gpu.child_device(self.device)
        for part in self.item.parts():
            pace = part.pace(self.slack) if self.slack is not None else None
            yield _PartStarted(part, Stopwatch())
            yield from isolated(part, device, cpus, stop, pace=pace) if runner.isolate else inline(part, pace)

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
                sweep.keep(item, row, 0.0, {}, self.at_once)
            left = [c for c in self.part.configs if config_key(name, c, self.axes) not in self.received]
            reporter.stopped(item, message.why, sum(item.seconds(c) for c in left))
            return
        row = message.row
        self.received.add(config_key(name, row, self.axes))
        before = sweep.readings.get(self.device, {})
        sweep.readings[self.device] = reading = sweep.read_monitor(self.device)
        sweep.keep(item, row, self.config_watch.seconds(), over_interval(before, reading), self.at_once)
        self.config_watch = Stopwatch()
        reporter.row(item, sweep.rows[-1], item.seconds(row))
        if sweep.last_save.seconds() >= sweep.runner.save_every_s:
            sweep.save(complete=False)
            sweep.last_save = Stopwatch()


STOP_WAIT_S = 15.0  # how long a stopped source may take to end its process (isolated waits 10 s for one)


def _interleaved(sources: Sequence[Callable[[threading.Event], Iterator]]) -> Iterator[tuple[int, object]]:
    """(index of its source, message) from several message sources drained at once, each by a thread of its own,
    as the messages come. Each source is called with an event that is set when this generator ends before they
    do (an interrupt, or it was closed): a source should end then (:func:`isolated` ends its process), within
    :data:`STOP_WAIT_S`. A source's exception ends it with a FailedMessage."""
    queue: Queue = Queue()
    stop = threading.Event()

    def drain(index: int, source: Callable[[threading.Event], Iterator]) -> None:
        try:
            for message in source(stop):
                if stop.is_set():
                    break
                queue.put((index, message))
        except BaseException as error:
            queue.put((index, FailedMessage(f"{type(error).__name__}: {error}")))
        finally:
            queue.put((index, None))

    threads = [threading.Thread(target=drain, args=(index, source), daemon=True)
               for index, source in enumerate(sources)]
    for thread in threads:
        thread.start()
    running = len(threads)
    try:
        while running:
            try:
                index, message = queue.get(timeout=0.2)  # a timeout, so that Ctrl-C reaches this thread
            except Empty:
                continue
            if message is None:
                running -= 1
            else:
                yield index, message
    finally:
        stop.set()
        for thread in threads:
            thread.join(STOP_WAIT_S)


def _raise_interrupt(number, frame):
    raise KeyboardInterrupt(number)
