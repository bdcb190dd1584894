"""What a sweep will run: experiments × axes → configurations, the stop rules they are timed under, and how long
it should take; the request a sweep starts from (:class:`Request`) and what the plan step answers (:class:`Planned`).
Pure Python; nothing here touches CUDA.

Three sweeps: ``quick`` (a smoke test of every experiment), ``default`` (the axis points that carry the headline
answers, within :data:`DEFAULT_BUDGET_S`) and ``full`` (the exhaustive grid). Each experiment estimates the wall
time of a configuration under a stop rule (``Experiment.cost.seconds``); a ``budget`` shrinks the stop rules' time caps
(never their minimum samples: the experiments' accuracy floors) until the whole plan fits, or says it cannot.
:class:`Pace` keeps one experiment's process to its share of the time while it runs.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping, Sequence, Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path

from bench.platform.errors import UsageError
from bench.experiments import Config, Experiment, registry
from bench.timing.stats import StopRule
from bench.platform.units import format_size, parse_size

MODES = ("quick", "default", "full")
DEFAULT_BUDGET_S = 120.0  # process start to summary, on an H200
QUICK_BUDGET_S = 20.0
STARTUP_S = 3.0  # the parent's imports, NVML, the fork server's imports (measured: scripts/startup.py)
PROCESS_S = 0.2  # per process: forked from the server, its CUDA context (0.12–0.16 s in the H200 default sweep)
QUICK_CAPS = {"time_cap_s": 0.05, "min_samples": 5}
SMALLEST_SCALE = 0.05
KEEP_TO = 0.85  # a budgeted sweep aims at this part of its budget: what no stop rule shortens (process start,
# compiling, allocation, verification, sampling that converged) may still overrun the estimate


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
    concurrent: bool = False  # the selected GPUs run every one-GPU experiment at the same time, host copies too
    one_at_a_time: bool = False  # the selected GPUs run every experiment one GPU after another
    started_s: float = 0.0  # seconds the command had run before it made the request: they count against the budget

    def at_once(self, experiment: Experiment) -> bool:
        """Whether this sweep runs ``experiment``'s per-GPU plans beside other GPUs' plans (else one at a time, the
        host theirs alone: :func:`holds`): by default an experiment that neither loads nor measures what another
        GPU's run shares (``Experiment.processes.own_gpu``); --concurrent every one-GPU experiment; --one-at-a-time
        none."""
        if experiment.processes.gpus != 1 or self.one_at_a_time:
            return False
        return self.concurrent or experiment.processes.own_gpu


def budget_for(mode: str, budget_s: float | None) -> float | None:
    """The time a sweep keeps within, from the command's start: ``--budget``, else :data:`DEFAULT_BUDGET_S` for
    the default sweep; None (``--quick``, ``--full``): it runs as planned."""
    return budget_s if budget_s is not None else (DEFAULT_BUDGET_S if mode == "default" else None)


def expand(axes: Mapping[str, Sequence], keep: Callable[[Config], bool] = lambda config: True) -> list[Config]:
    """Every combination of the axes' values, the first axis varying slowest, minus those ``keep`` rejects."""
    names = list(axes)
    combinations = (dict(zip(names, values)) for values in itertools.product(*axes.values()))
    return [config for config in combinations if keep(config)]


@dataclass(frozen=True)
class Plan:
    """One experiment's part of a sweep."""

    experiment: Experiment
    configs: list[Config]
    rules: dict[str, StopRule]  # by purpose: "default", and any the experiment declares
    devices: tuple[int, ...] = (0,)  # the GPUs its process uses: one, or all of a multi-GPU experiment's
    label: str = ""  # how the sweep names this part ("bandwidth on GPU 1"); the experiment's name by default

    @property
    def name(self) -> str:
        return self.label or self.experiment.name

    def seconds(self, config: Config) -> float:
        return self.experiment.cost.seconds(config, self.rules["default"])

    def parts(self) -> list[Plan]:
        """The plan split into the parts that each run in a process of their own: one per value of the
        experiment's ``process_axis``, in order of first appearance; else the whole plan."""
        axis = self.experiment.processes.process_axis
        if not axis:
            return [self]
        values = dict.fromkeys(config[axis] for config in self.configs)
        return [dataclasses.replace(self, configs=[config for config in self.configs if config[axis] == value])
                for value in values]

    @property
    def estimate_s(self) -> float:
        if not self.configs:
            return 0.0
        processes = len(self.parts())
        setup_s = self.experiment.cost.setup_s
        return (PROCESS_S + setup_s) * processes + sum(self.seconds(config) for config in self.configs)

    def scaled(self, scale: float) -> Plan:
        """This plan with every stop rule scaled down by ``scale`` (:meth:`StopRule.scaled`)."""
        if scale >= 1:
            return self
        return dataclasses.replace(self, rules={purpose: rule.scaled(scale) for purpose, rule in self.rules.items()})

    def pace(self, slack: float = 1.0) -> Pace:
        """The pace that holds this plan's process (one part: :meth:`parts`) to ``slack`` × its estimate."""
        planned = [self.seconds(config) for config in self.configs]
        if planned:
            planned[0] += self.experiment.cost.setup_s
        return Pace(planned, slack * sum(planned))


class Pace:
    """Keeps an experiment's process to its allowance on a GPU or host slower than the time model, by scaling the
    stop rules of what is left (:meth:`StopRule.scaled`: their time caps).

    After each configuration the process reports the seconds it has spent and how many of them went to sampling
    loops whose length the rule decided (:class:`bench.timing.RuleBoundSampling`). From the configurations after
    the first (the first also pays the process's setup: compiling, allocating its largest buffers), it projects
    both over what is left (in proportion to the planned seconds) and scales the rules so that the rest fits what
    is left of ``allowance_s``. Time that no rule bounds (compiling, allocating, verifying, sampling that converged
    later) is never a reason to scale. It only ever shrinks the planned rules, never below :data:`SMALLEST_SCALE`;
    a machine as fast as the model keeps them whole.
    """

    def __init__(self, planned_s: Sequence[float], allowance_s: float) -> None:
        self.planned_s = list(planned_s)  # each configuration's expected seconds under the planned rules, in order
        self.allowance_s = allowance_s
        self.done = 0
        self.bound_at_full_s = 0.0  # rule-bound sampling so far, each configuration's divided by its scale
        self.bound_s = 0.0  # rule-bound sampling so far, as spent
        self.first = (0.0, 0.0, 0.0)  # the first configuration's elapsed, bound and bound-at-full seconds
        self.scale = 1.0

    def finished(self, elapsed_s: float, bound_s: float) -> float:
        """One more configuration finished, ``elapsed_s`` after the first began, ``bound_s`` of it in rule-bound
        sampling: the scale for the next."""
        if self.done < len(self.planned_s):
            self.done += 1
        self.bound_at_full_s += (bound_s - self.bound_s) / self.scale
        self.bound_s = bound_s
        if self.done == 1:
            self.first = (elapsed_s, bound_s, self.bound_at_full_s)
            return self.scale
        first_s, first_bound_s, first_bound_at_full_s = self.first
        done_s, remaining_s = sum(self.planned_s[1:self.done]), sum(self.planned_s[self.done:])
        bound_at_full_s = self.bound_at_full_s - first_bound_at_full_s
        if remaining_s <= 0 or done_s <= 0 or bound_at_full_s <= 0:
            return self.scale
        ahead = remaining_s / done_s
        unbound_ahead_s = (elapsed_s - first_s - (bound_s - first_bound_s)) * ahead
        bound_ahead_s = bound_at_full_s * ahead  # under the planned rules
        left_s = self.allowance_s - elapsed_s - unbound_ahead_s
        self.scale = min(1.0, max(SMALLEST_SCALE, left_s / bound_ahead_s))
        return self.scale


AtOnce = bool | Callable[[Experiment], bool]  # which experiments' per-GPU plans run beside other GPUs' (all, or none)
HOST = "host"  # what a plan not run beside other GPUs' holds besides its GPUs: the host's links and memory


def holds(item: Plan, at_once: AtOnce = False) -> frozenset:
    """What ``item`` holds while it runs: its GPUs, and :data:`HOST` unless its experiment is one GPU's and runs
    beside other GPUs' plans (``at_once``: :meth:`Request.at_once`)."""
    together = at_once if callable(at_once) else (lambda experiment: bool(at_once))
    beside = item.experiment.processes.gpus == 1 and together(item.experiment)
    return frozenset(item.devices) if beside else frozenset(item.devices) | {HOST}


def starting(plans: Sequence[Plan], at_once: AtOnce = False, taken: AbstractSet = frozenset()) -> list[int]:
    """Which of the waiting ``plans`` (in the sweep's order) start now, while running plans hold ``taken``: looked
    at one GPU's that hold the host first (every GPU's host-bound work waits for it), then one GPU's that run beside
    other GPUs', then those of several GPUs, each kind in the sweep's order, each that finds all it :func:`holds`
    free starts and takes it. Their positions in ``plans``, in the order they start."""
    needs = [holds(item, at_once) for item in plans]
    held, started = set(taken), []
    several = [plans[index].experiment.processes.gpus > 1 for index in range(len(plans))]
    order = sorted(range(len(plans)), key=lambda index: (several[index], HOST not in needs[index]))
    for index in order:
        if not needs[index] & held:
            started.append(index)
            held |= needs[index]
    return started


def schedule(plans: Sequence[Plan], at_once: AtOnce = False,
             busy_s: Mapping[object, float] | None = None) -> list[float]:
    """Each plan's expected start, in seconds from now, as a sweep starts them: whenever something is freed, the
    waiting plans that :func:`starting` picks. ``busy_s``: what plans already running hold, and for how much
    longer."""
    free_at = dict(busy_s or {})
    starts = [0.0] * len(plans)
    waiting, now = list(range(len(plans))), 0.0
    while waiting:
        taken = {resource for resource, moment in free_at.items() if moment > now}
        started = [waiting[position] for position in starting([plans[index] for index in waiting], at_once, taken)]
        for index in started:
            starts[index] = now
            free_at.update(dict.fromkeys(holds(plans[index], at_once), now + plans[index].estimate_s))
        waiting = [index for index in waiting if index not in started]
        if waiting:
            now = min(moment for moment in free_at.values() if moment > now)
    return starts


def makespan_s(plans: Sequence[Plan], at_once: AtOnce = False,
               busy_s: Mapping[object, float] | None = None) -> float:
    """How long until ``plans`` are expected to have ended, started as :func:`schedule` starts them."""
    starts = schedule(plans, at_once, busy_s)
    return max([*(busy_s or {}).values(), *(start + item.estimate_s for start, item in zip(starts, plans)), 0.0])


def estimate_s(plans: Sequence[Plan], at_once: AtOnce = False, startup_s: float = STARTUP_S) -> float:
    """The sweep's expected wall time, ``startup_s`` included: its plans run as :func:`schedule` starts them, one GPU
    after another unless ``at_once`` (:meth:`Request.at_once`) lets a GPU's plans run beside another's."""
    return startup_s + makespan_s(plans, at_once)


def least_s(plans: Sequence[Plan], at_once: AtOnce = False) -> float:
    """The sweep's expected wall time with every time cap at its smallest scale: what its accuracy floors need by the
    time model, below which no budget shortens it."""
    return estimate_s([item.scaled(SMALLEST_SCALE) for item in plans], at_once)


def fitting_scale(plans: Sequence[Plan], budget_s: float, at_once: AtOnce = False) -> float:
    """The largest stop-rule scale (at most 1, at least :data:`SMALLEST_SCALE`) at which ``plans`` are expected to
    fit ``budget_s`` (bisection); :data:`SMALLEST_SCALE` when even that does not fit."""
    def fits(scale: float) -> bool:
        return estimate_s([item.scaled(scale) for item in plans], at_once) <= budget_s

    if fits(1.0):
        return 1.0
    low, high = SMALLEST_SCALE, 1.0
    for _ in range(20):
        middle = (low + high) / 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


def too_few_gpus(names: Sequence[str] | None, devices: Sequence[int]) -> dict[str, str]:
    """The experiments (of ``names``; None: all) a sweep of ``devices`` leaves out, each with why."""
    known = registry()
    return {name: f"needs {known[name].processes.gpus} GPUs; this sweep has {len(devices)} (--devices all)"
            for name in (known if names is None else names)
            if name in known and known[name].processes.gpus > len(devices)}


def rules_for(experiment: Experiment, mode: str, scale: float = 1.0) -> dict[str, StopRule]:
    """The stop rules an experiment's measurements run under: its declared changes to the default rule, capped for
    a quick sweep, and with time caps scaled down by ``scale`` (< 1) to fit a budget."""
    purposes = {"default": {}, **experiment.accuracy.stop_rules}
    rules = {}
    for purpose, changes in purposes.items():
        rule = StopRule().replace(**changes)
        if mode == "quick":
            rule = rule.capped(**QUICK_CAPS)
        rules[purpose] = rule.scaled(scale)
    return rules


def axis_values(experiment: Experiment, axis: str, texts: Sequence[str]) -> tuple:
    """``--axis`` values in the axis's own type: numbers (sizes for the size axis, GPU ordinals for a device axis)
    or one of the known words. ValueError for a value the axis cannot take."""
    known = tuple(dict.fromkeys([*experiment.axes[axis], *experiment.sweeps.full.get(axis, ())]))
    values = []
    for text in texts:
        if axis == experiment.sweeps.size_axis:
            values.append(parse_size(text))
        elif axis in experiment.sweeps.device_axes:
            if not text.strip().isdigit():
                raise ValueError(f"{axis}={text!r} is not a GPU ordinal")
            values.append(int(text))
        elif isinstance(known[0], (int, float)):
            try:
                value = type(known[0])(text)
            except ValueError:
                raise ValueError(f"{axis}={text!r} is not a number") from None
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"{axis}={text!r} must be a positive finite number")
            values.append(value)
        elif text in known:
            values.append(text)
        else:
            raise ValueError(f"{axis}={text!r} is not a value of {axis}; choose from {', '.join(map(str, known))}")
    return tuple(dict.fromkeys(values))


def make(names: Sequence[str] | None = None, *, mode: str = "default", sizes: Sequence[int] | None = None,
         axes: Mapping[str, Sequence[str]] | None = None, budget_s: float | None = None,
         devices: Sequence[int] = (0,), at_once: AtOnce = False) -> list[Plan]:
    """The plans of a sweep. ``names`` picks experiments (default: all, in sweep order); ``sizes`` replaces each
    experiment's size axis; ``axes`` replaces axes' values by name (as the user typed them); ``budget_s`` scales the
    stop rules down until the estimate fits. ``devices``: the GPUs; a one-GPU experiment gets a plan per GPU, a
    multi-GPU one a single plan over all of them (its device axes take their ordinals), and is left out (see
    :func:`too_few_gpus`) of a sweep of too few GPUs unless ``names`` asks for it. ValueError for an unknown
    experiment, axis or value, a repeated experiment, too few GPUs, or a budget no sweep of these configurations
    fits."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}")
    known = registry()
    asked = names is not None
    names = list(known) if names is None else list(names)
    for name in names:
        if name not in known:
            raise ValueError(f"unknown experiment {name!r}; choose from {', '.join(known)}")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"experiment {repeated[0]!r} is named twice")
    overrides = dict(axes or {})
    unused = set(overrides)
    chosen: list[tuple[Experiment, list[Config]]] = []
    lacking = too_few_gpus(names, devices)
    if asked and lacking:
        name, why = next(iter(lacking.items()))
        raise ValueError(f"{name} {why}")
    for name in names:
        if name in lacking:
            continue
        experiment = known[name]
        values = planned_axes(experiment, mode, sizes, overrides, devices)
        unused -= set(experiment.axes)
        for axis in experiment.sweeps.device_axes:
            outside = [value for value in values[axis] if value not in devices]
            if outside:
                raise ValueError(f"{axis}={outside[0]} is not a GPU of this sweep ({', '.join(map(str, devices))})")

        def keep(config: Config, experiment=experiment) -> bool:
            return experiment.sweeps.valid(config) and (mode == "full" or experiment.sweeps.lean(config))

        chosen.append((experiment, expand(values, keep)))
    if unused:
        present = sorted({axis for experiment, _ in chosen for axis in experiment.axes})
        raise ValueError(f"unknown axis {sorted(unused)[0]!r}; the selected experiments have {', '.join(present)}")
    _check_sizes(sizes, overrides, [experiment for experiment, _ in chosen])
    plans = _plans(chosen, mode, 1.0, tuple(devices))
    if budget_s is None or estimate_s(plans, at_once) <= budget_s:
        return plans
    return _fit(chosen, mode, budget_s, tuple(devices), at_once)


def planned_axes(experiment: Experiment, mode: str, sizes: Sequence[int] | None,
                 overrides: Mapping[str, Sequence[str]], devices: Sequence[int]) -> dict[str, tuple]:
    """An experiment's axes in a sweep: ``mode``'s values, its device axes on ``devices``, its size axis ``sizes``
    and ``overrides`` (axis -> values as the user typed them, in the axis's own type). ValueError for a value the
    axis cannot take."""
    values = experiment.axes_for(mode)
    for axis in experiment.sweeps.device_axes:
        values[axis] = tuple(devices)
    if sizes and experiment.sweeps.size_axis:
        values[experiment.sweeps.size_axis] = tuple(sizes)
    for axis, texts in overrides.items():
        if axis in experiment.axes:
            values[axis] = axis_values(experiment, axis, texts)
    return values


def _check_sizes(sizes: Sequence[int] | None, overrides: Mapping, experiments: Sequence[Experiment]) -> None:
    """ValueError where --sizes would be taken by no experiment, or where --axis gives a size axis its values too."""
    if not sizes:
        return
    axes = {experiment.sweeps.size_axis for experiment in experiments if experiment.sweeps.size_axis}
    if not axes:
        names = [experiment.name for experiment in experiments]
        raise ValueError(f"--sizes: {', '.join(names)} take{'s' * (len(names) == 1)} no transfer size")
    if axes & set(overrides):
        raise ValueError(f"--sizes and --axis {sorted(axes & set(overrides))[0]}=... both set the sizes: choose one")


def _plans(chosen, mode: str, scale: float, devices: tuple[int, ...]) -> list[Plan]:
    plans = []
    for experiment, configs in chosen:
        rules = rules_for(experiment, mode, scale)
        if experiment.processes.gpus > 1:
            plans.append(Plan(experiment, configs, rules, devices))
        else:
            plans += [Plan(experiment, configs, rules, (device,),
                           f"{experiment.name} on GPU {device}" if len(devices) > 1 else "") for device in devices]
    return plans


def _fit(chosen, mode: str, budget_s: float, devices: tuple[int, ...], at_once: AtOnce) -> list[Plan]:
    """The plans with the largest stop-rule scale whose estimate fits ``budget_s``."""
    plans = _plans(chosen, mode, 1.0, devices)
    least = least_s(plans, at_once)
    if least > budget_s:
        raise ValueError(f"--budget {budget_s:g}: these {sum(len(c) for _, c in chosen)} configurations need at "
                         f"least {least:.0f} s at their accuracy floors; choose fewer (--quick, --experiments, --axis) "
                         "or a larger budget")
    scale = fitting_scale(plans, budget_s, at_once)
    return [item.scaled(scale) for item in plans]


def experiments_of(plans: Sequence[Plan]) -> dict[str, Experiment]:
    """Every registered experiment and the plans' own (a test's), by name: the experiments whose columns a results
    file holds, handed down to the store."""
    return {**registry(), **{item.experiment.name: item.experiment for item in plans}}


def describe(experiment: Experiment, config: Mapping) -> str:
    """A configuration in a few words, for the progress bar: 'bandwidth pinned H2D 16 MiB'."""
    words = [format_size(int(config[axis])) if axis == experiment.sweeps.size_axis else str(config[axis])
             for axis in experiment.axes]
    return " ".join([experiment.name, *words])


def config_key(experiment: str, config: Mapping, axes: Sequence[str]) -> tuple:
    """What identifies a configuration across runs and files (numbers compared as numbers)."""
    def norm(value):
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)

    return (experiment, *(norm(config[axis]) for axis in axes))


@dataclass(frozen=True)
class Planned:
    """What the plan step established: the plans, the GPUs they run on, and what the sweep left out."""

    plans: list[Plan]
    devices: tuple[int, ...] = (0,)  # the sweep's GPUs, in order: the first names the file and carries its metadata
    left_out: Mapping[str, str] = field(default_factory=dict)  # experiments it has too few GPUs for, with why


def for_request(request: Request, devices: tuple[int, ...]) -> Planned:
    """The plans of ``request`` on ``devices`` (UsageError for an unknown experiment, axis or value, or a budget
    that cannot be met)."""
    try:
        plans = make(request.experiments, mode=request.mode, sizes=request.sizes, axes=request.axes,
                     budget_s=request.budget_s, devices=devices, at_once=request.at_once)
    except ValueError as error:
        raise UsageError(f"--experiments/--axis/--budget/--devices: {error}") from None
    left_out = too_few_gpus(None, devices) if request.experiments is None else {}
    return Planned(plans, tuple(devices), left_out)
