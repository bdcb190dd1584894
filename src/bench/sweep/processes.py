"""An experiment's configurations running in a process of its own, and what comes back: the messages
(:class:`ReadyMessage`, :class:`RowMessage`, :class:`FailedMessage`, :class:`DoneMessage`), the fork server the
processes start from (preloaded by :mod:`bench.sweep.preload`), the child's body, :func:`start` (a child process
started ahead of its turn: :class:`Started`), :func:`isolated` (its turn, with a watchdog) and :func:`inline` (this
process), :func:`paced` (the rows, rescaled to keep to a :class:`Pace`),
and :class:`Drains` (several message sources drained at once, joining as they start).

It imports :mod:`bench.sweep.plan`, :mod:`bench.platform.env` (the device helpers), :mod:`bench.platform.libraries` (the
records: which keep compiled code on disk when told) and :mod:`bench.timing`; nothing CUDA until a child measures.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from queue import Empty, Queue

from bench.platform.env import use_device
from bench.platform.libraries import LIBRARIES
from bench.sweep.plan import Pace, Plan
from bench.timing import Stopwatch

PRELOAD = "bench.sweep.preload"  # what the fork server imports once, before the experiments


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


@dataclass(frozen=True)
class RaisedMessage:
    """A message source raised ``error`` (its drain's thread caught it; the thread that reads the messages decides
    what it ends)."""

    error: BaseException


@dataclass(frozen=True)
class Warming:
    """What a warm-up process compiles after its configurations: its shard of the experiment's ``warm`` hook over
    the configurations of the sweep's plan (see :func:`bench.sweep.warmup.warm_parts`)."""

    configs: list  # the plan's, all of them
    shard: int
    shards: int


def cache_directory() -> Path:
    """Where a sweep keeps what outlives it on this machine: warm-up markers, libraries' compiled code."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bench"


def _processes():
    """Experiment processes are forked from a server that has done, once, what each would do first
    (:mod:`bench.sweep.preload`, and importing every experiment); each still creates a CUDA context of its own."""
    # Experiments never use NVLink multicast; a library they call (NCCL under PyTorch) must not choose it either.
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    for library in LIBRARIES:  # what a library compiles outlives the process that compiled it (unless set already)
        for key, value in library.loading.disk_cache_settings(str(cache_directory() / library.name)).items():
            os.environ.setdefault(key, value)
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([PRELOAD] + [f"bench.experiments.{name}" for name in _experiment_modules()])
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


def _child(sender, starter, experiment, configs, rules, device: int | None, cpus: Sequence[int],
           warming: Warming | None, sees: str | None) -> None:
    """The body of an experiment's process: show CUDA only ``sees`` (None: what the sweep sees), move to the GPU's
    CPUs, do what the experiment does ahead of its turn, wait for the turn (``starter`` brings the pace to keep, or
    None), select the GPU, measure, send each row as it comes; ``warming``: then that shard of the experiment's
    ``warm`` hook."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what an interrupt ends
    try:
        if sees:  # before anything starts CUDA in this process (the fork server never does)
            os.environ["CUDA_VISIBLE_DEVICES"] = sees
        if cpus:
            os.sched_setaffinity(0, cpus)
        if experiment.processes.process_axis:  # this process's value of it, set before CUDA reads its settings
            experiment.processes.before_cuda(configs[0][experiment.processes.process_axis], device or 0)
        if experiment.processes.ahead is not None:
            experiment.processes.ahead(configs)
        pace = starter.recv()  # EOFError: the sweep ended first
        if device is not None:
            use_device(device)
        sender.send(ReadyMessage())
        for row in paced(experiment, configs, rules, pace):
            sender.send(RowMessage(row))
        if warming is not None and experiment.processes.warm is not None:
            experiment.processes.warm(warming.configs, warming.shard, warming.shards)
        sender.send(DoneMessage())
    except BaseException as error:
        sender.send(FailedMessage(f"{type(error).__name__}: {error}"))
    finally:
        sender.close()
        # No interpreter teardown: libraries that share the CUDA context (PyTorch's tensors freed after the context
        # went away) can abort a process that has already sent everything it measured.
        os._exit(0)


def paced(experiment, configs, rules, pace: Pace | None) -> Iterator[dict]:
    """The experiment's rows, each with the stop-rule scale it was measured under (``stop_scale``) and whether its
    samples meet the experiment's accuracy floor (``floor_met``; None for a row that measured nothing); with a
    ``pace``, the time caps of what is left shrink whenever the configurations so far ran slower than planned."""
    from bench.timing import Context, RuleBoundSampling

    context = Context(rules)
    watch, bound_before_s = Stopwatch(), RuleBoundSampling.seconds
    for row in experiment.measure(configs, context):
        row["stop_scale"] = context.scale
        samples = row.get("samples")
        row["floor_met"] = experiment.accuracy.floor.met(samples) if samples is not None and len(samples) else None
        yield row
        if pace is not None:
            context.rescale(pace.finished(watch.seconds(), RuleBoundSampling.seconds - bound_before_s))


@dataclass(frozen=True)
class Started:
    """An experiment's process, started: it does what its experiment does ahead of its turn
    (``Experiment.processes.ahead``), then waits for :func:`isolated` to give it the turn."""

    process: object
    receiver: object  # the process's messages
    starter: object  # the turn goes through it: the pace to keep, or None

    def end(self) -> None:
        """End a process that never got its turn (or ended with it)."""
        self.starter.close()
        self.receiver.close()
        if self.process.is_alive():
            self.process.terminate()
        self.process.join(10)


def start(item: Plan, device: int | None, cpus: Sequence[int] = (),
          warming: Warming | None = None, sees: str | None = None) -> Started:
    """Start the process of a plan (a part of one: ``Plan.parts``), ahead of its turn. ``warming``: a warm-up
    part's (see :func:`bench.sweep.warmup.warm_parts`); ``sees``: the GPUs CUDA shows it (``CUDA_VISIBLE_DEVICES``;
    None: the sweep's), ``device`` its ordinal among them."""
    context = _processes()
    receiver, sender = context.Pipe(duplex=False)
    waiting, starter = context.Pipe(duplex=False)
    child = context.Process(target=_child, daemon=True,
                            args=(sender, waiting, item.experiment, item.configs, item.rules, device, list(cpus),
                                  warming, sees))
    child.start()
    sender.close()
    waiting.close()
    return Started(child, receiver, starter)


def isolated(item: Plan, device: int | None, cpus: Sequence[int] = (), stop: threading.Event | None = None,
             warming: Warming | None = None, pace: Pace | None = None,
             started: Started | None = None,
             sees: str | None = None) -> Iterator[ReadyMessage | RowMessage | FailedMessage]:
    """Run a plan in a child process (``started``: the one :func:`start` started for it ahead; else a new one):
    ready, its rows, then a FailedMessage if the child could not finish, or if it went
    ``Experiment.processes.row_timeout_s`` without a row (a hung call: the watchdog ends the process). Once ``stop``
    is set (nobody listens any more), it ends the process and returns. ``warming``, ``sees``: see :func:`start`;
    ``pace``: see :func:`paced`."""
    started = started or start(item, device, cpus, warming, sees)
    child, receiver = started.process, started.receiver
    ended = f"the {item.experiment.name} process ended"
    try:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # it ended before its turn: see below why
            started.starter.send(pace)
        waiting = Stopwatch()
        while stop is None or not stop.is_set():
            if waiting.seconds() > item.experiment.processes.row_timeout_s:
                yield FailedMessage(f"no row for {item.experiment.processes.row_timeout_s:g} s: the "
                                    f"{item.experiment.name} process hung and was stopped")
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
        started.end()


def inline(item: Plan, pace: Pace | None = None) -> Iterator[ReadyMessage | RowMessage]:
    """Run a plan in this process (tests, and code that owns the GPU already); its exceptions propagate. A
    ``process_axis`` hook runs too, though CUDA may have read its settings already."""
    if item.experiment.processes.process_axis and item.configs:
        item.experiment.processes.before_cuda(item.configs[0][item.experiment.processes.process_axis], 0)
    yield ReadyMessage()
    for row in paced(item.experiment, item.configs, item.rules, pace):
        yield RowMessage(row)


STOP_WAIT_S = 15.0  # how long a stopped source may take to end its process (isolated waits 10 s for one)


class Drains:
    """Message sources drained at once, each by a thread of its own, as the messages come; a source may join at any
    time (:meth:`add`). Each source is called with an event that is set when the drains close before it ends (an
    interrupt): a source should end then (:func:`isolated` ends its process), within :data:`STOP_WAIT_S`. A source's
    exception ends it with a :class:`RaisedMessage`."""

    def __init__(self) -> None:
        self.queue: Queue = Queue()
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def add(self, source: Callable[[threading.Event], Iterator]) -> int:
        """Start draining ``source``: its messages come from :meth:`next` with the index returned."""
        index = len(self.threads)
        self.threads.append(threading.Thread(target=self._drain, args=(index, source), daemon=True))
        self.threads[-1].start()
        return index

    def _drain(self, index: int, source: Callable[[threading.Event], Iterator]) -> None:
        try:
            for message in source(self.stop):
                if self.stop.is_set():
                    break
                self.queue.put((index, message))
        except BaseException as error:
            self.queue.put((index, RaisedMessage(error)))
        finally:
            self.queue.put((index, None))

    def next(self) -> tuple[int, object | None]:
        """(index of its source, message) as it comes; the message None: that source has ended."""
        while True:
            try:
                return self.queue.get(timeout=0.2)  # a timeout, so that Ctrl-C reaches this thread
            except Empty:
                continue

    def close(self) -> None:
        """Tell the sources still running to end, and wait for them."""
        self.stop.set()
        for thread in self.threads:
            thread.join(STOP_WAIT_S)


def interleaved(sources: Sequence[Callable[[threading.Event], Iterator]]) -> Iterator[tuple[int, object]]:
    """(index of its source, message) from several message sources drained at once (:class:`Drains`), until every
    source has ended; a source's exception ends it with a FailedMessage."""
    with contextlib.closing(Drains()) as drains:
        for source in sources:
            drains.add(source)
        running = len(sources)
        while running:
            index, message = drains.next()
            if message is None:
                running -= 1
            elif isinstance(message, RaisedMessage):
                yield index, FailedMessage(f"{type(message.error).__name__}: {message.error}")
            else:
                yield index, message
