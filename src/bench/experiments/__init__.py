"""Experiments: one module each, found by :func:`registry`; adding one is one module defining ``EXPERIMENT`` and its
view (:mod:`bench.views`). A module's top is its *description* (name, axes, typed columns, side tables, cost), which
imports no CUDA; its *measuring code* (``measure(configs, context)``, one row per configuration) reaches CuPy and
numba-cuda on first use and runs only in the sweep's processes. An experiment never times, writes or shows: the
timing, the sweep and its view do.

May import the measuring tools (:mod:`bench.measure`, :mod:`bench.timing`, :mod:`bench.catalogs`),
:mod:`bench.results.schema` and :mod:`bench.platform`; never another experiment, a view or the analysis side
(``tests/test_layout.py``). More: docs/reference/packages.md.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from bench.results.schema import Column
from bench.timing.stats import Floor

Config = dict[str, object]  # one configuration: axis name -> value
Row = dict[str, object]  # one result row: column name -> value (see bench.results.schema), side tables under "_<table>"


def no_memory(configs: Sequence[Config]) -> tuple[int, int]:
    return 0, 0


def always(config: Config) -> bool:
    return True


@dataclass(frozen=True)
class Sweeps:
    """Which configurations each sweep of an experiment runs, beyond the default sweep's axes (``Experiment.axes``):
    the axis values of ``--quick`` and ``--full``, the combinations that make sense and those the default and quick
    sweeps keep, and the axes the command line replaces."""

    quick: Mapping[str, tuple] = field(default_factory=dict)  # axis values for --quick (a smoke test)
    full: Mapping[str, tuple] = field(default_factory=dict)  # axis values for --full (the exhaustive grid)
    valid: Callable = always  # (configuration) -> bool: drops combinations that make no sense
    lean: Callable = always  # (configuration) -> bool: what the default and quick sweeps keep (--full keeps all)
    size_axis: str = "bytes"  # the axis --sizes replaces ("" for none)
    device_axes: tuple[str, ...] = ()  # axes whose values are GPU ordinals: the sweep's --devices replace them


@dataclass(frozen=True)
class Cost:
    """What an experiment costs: the time model its plan and the sweep's budget read, and the memory the sweep checks
    is free before it starts."""

    seconds: Callable  # (configuration, stop rule) -> expected wall time, for the plan and its budget
    memory_needed: Callable = no_memory  # (configurations) -> (device bytes, host bytes) at peak
    setup_s: float = 0.0  # per process, before the first row: compiling its kernels, allocating, calibrating
    share_s: float = 5.0  # its share of the default sweep's budget (bench.sweep.plan.DEFAULT_BUDGET_S), process
    # included


@dataclass(frozen=True)
class Accuracy:
    """How long an experiment samples, and the accuracy its rows meet."""

    stop_rules: Mapping[str, Mapping[str, object]] = field(default_factory=dict)  # purpose -> StopRule changes
    floor: Floor = Floor()  # the accuracy every measured row meets, or says it does not (its floor_met column);
    # no stop rule of a default or full sweep asks for fewer samples


@dataclass(frozen=True)
class Processes:
    """How an experiment's processes run: on how many GPUs, beside what, one per value of which axis, how long one
    may go without a row, and what the sweep's warm-up and the time before its turn do in them."""

    gpus: int = 1  # 1: measures one GPU, run once per GPU the sweep selects; 2: needs two or more, and its one
    # process sees every selected GPU (peer copies, shared links); it is left out of a sweep of fewer GPUs
    own_gpu: bool = False  # it neither loads nor measures what GPUs share (the host's links and memory): a sweep of
    # several GPUs runs it beside anything on the other GPUs; the others hold the host, one at a time (unless
    # --concurrent; bench.sweep.plan.holds). Shown by a sweep so against one GPU after another on the same machine
    # (docs/findings): no verdict changed, no figure moved more than between two runs of one mode
    process_axis: str = ""  # an axis whose every value needs a process of its own (an environment variable or a
    # device flag that CUDA reads once, when the process first touches the GPU)
    before_cuda: Callable | None = None  # (that axis's value, device ordinal): run in the new process before CUDA
    row_timeout_s: float = 300.0  # the runner stops a process that yields no row for this long (a hung call)
    warm: Callable | None = None  # (configurations, shard, shards) -> None: compiles, untimed, its shard of what
    # the sweep's configurations beyond the first would compile (the sweep's warm-up runs it on a machine whose caches
    # are cold, each shard in a process of its own; see bench.sweep.warmup.warm_parts)
    warm_shards: int = 1  # how many processes share the warm hook's compiling
    ahead: Callable | None = None  # (configurations) -> None: what its process does before its turn, while the
    # experiment before it measures (a sweep starts each process ahead): nothing that touches a GPU or loads a CPU
    # for long, such as importing the libraries it calls


@dataclass(frozen=True)
class Experiment:
    """An experiment's description: its name and what it measures, the default sweep's axes, its typed columns and
    side tables, its measuring code; and its parts: the other sweeps (:class:`Sweeps`), its cost (:class:`Cost`),
    its accuracy (:class:`Accuracy`) and how its processes run (:class:`Processes`)."""

    name: str
    description: str
    axes: Mapping[str, tuple]  # the default sweep, axis by axis, in expansion order
    columns: tuple[Column, ...]  # the axes' and the experiment's own columns, typed
    measure: Callable  # (configurations, bench.timing.Context) -> rows; the only part that touches CUDA
    cost: Cost
    tables: Mapping[str, tuple[Column, ...]] = field(default_factory=dict)  # side tables by name
    outcome: tuple[str, ...] = ()  # columns whose changes compare reports (a verdict, wrong results)
    order: int = 100  # position in the default sweep
    sweeps: Sweeps = Sweeps()
    accuracy: Accuracy = Accuracy()
    processes: Processes = Processes()

    def __post_init__(self) -> None:
        declared = {item.name for item in self.columns}
        sweeps, processes = self.sweeps, self.processes
        for axes in (self.axes, sweeps.quick, sweeps.full):
            missing = set(axes) - declared
            if missing:
                raise ValueError(f"{self.name}: axes {sorted(missing)} have no column")
        if set(sweeps.quick) - set(self.axes) or set(sweeps.full) - set(self.axes):
            raise ValueError(f"{self.name}: quick/full name an axis the default sweep lacks")
        if processes.process_axis and (processes.process_axis not in self.axes or processes.before_cuda is None):
            raise ValueError(f"{self.name}: process_axis must be an axis, with a before_cuda hook")
        if set(sweeps.device_axes) - set(self.axes):
            raise ValueError(f"{self.name}: device_axes must be axes")

    def axes_for(self, mode: str) -> dict[str, tuple]:
        """The axes of a ``quick``, ``default`` or ``full`` sweep."""
        return {**self.axes, **{"quick": self.sweeps.quick, "full": self.sweeps.full}.get(mode, {})}


@functools.cache
def registry() -> dict[str, Experiment]:
    """Every experiment module's ``EXPERIMENT``, in sweep order."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        experiment = getattr(module, "EXPERIMENT", None)
        if isinstance(experiment, Experiment):
            found.append(experiment)
    return {experiment.name: experiment for experiment in sorted(found, key=lambda e: (e.order, e.name))}

