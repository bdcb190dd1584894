"""``sweep`` and ``env``: plan, check and run the experiments with a progress display, and summarise what they
measured; print the environment."""

from __future__ import annotations

import argparse
import shlex
import sys

import pandas as pd
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from bench.platform import env
from bench.results import store
from bench.cli.options import RESULTS_DIR
from bench.platform.errors import UsageError
from bench.analysis.escape import terminal
from bench.experiments import registry
from bench.sweep.loop import Runner
from bench.sweep.plan import Request, budget_for, describe, experiments_of, for_request, planned_axes
from bench.sweep.preflight import check_paths, listing_devices
from bench.timing import process_age_s
from bench.platform.units import format_size, parse_sizes
from bench.views import counts, views
from bench.platform.vocabulary import Status


class _Progress:
    """The sweep's plan, a progress bar whose ETA follows the plan's estimate, and its per-experiment times."""

    def __init__(self, console: Console, budget_s: float | None = None) -> None:
        self.console, self.budget_s = console, budget_s
        self.bar = Progress(TextColumn("{task.description:<44}"), BarColumn(), TextColumn("{task.fields[done]}"),
                            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=console)
        self.task = None
        self.done = self.total = 0

    def planned(self, plans, estimate_s: float, least_s: float) -> None:
        kept = f"; aiming at {self.budget_s:.0f} s, never below the accuracy floors" if self.budget_s else ""
        if self.budget_s and least_s > self.budget_s:
            self.console.print(f"[yellow]warning:[/yellow] at their accuracy floors these configurations need about "
                               f"{least_s:.0f} s by the time model, more than the {self.budget_s:.0f} s budget: the "
                               "sweep keeps every floor and will take longer", highlight=False)
        table = Table(title=f"plan: {sum(len(p.configs) for p in plans)} configurations, about {estimate_s:.0f} s "
                            f"on a warm H200{kept}")
        for name in ("experiment", "configurations", "expected s"):
            table.add_column(name, justify="left" if name == "experiment" else "right")
        for item in plans:
            table.add_row(item.name, str(len(item.configs)), f"{item.estimate_s:.0f}")
        self.console.print(table)
        self.total = sum(len(item.configs) for item in plans)
        self.bar.start()
        measuring_s = sum(item.seconds(config) for item in plans for config in item.configs)
        self.task = self.bar.add_task("starting", total=max(measuring_s, 1e-9), done=f"0/{self.total}")

    def started(self, experiment: str) -> None:
        self.bar.update(self.task, description=f"{experiment}: starting")

    def row(self, plan, row: dict, seconds_planned: float) -> None:
        self.done += 1
        words = escape(terminal(describe(plan.experiment, row)))  # a configuration's words, not markup: a[boolean mask]
        self.bar.update(self.task, advance=seconds_planned, description=words, done=f"{self.done}/{self.total}")

    def stopped(self, plan, why: str, seconds_planned: float) -> None:
        self.bar.update(self.task, advance=seconds_planned, description=f"{plan.experiment.name}: stopped")

    def finished(self, experiment: str, wall_s: float) -> None:
        self.bar.console.print(f"{experiment}: {wall_s:.1f} s", highlight=False)

    def warmed(self, seconds: float, experiments, failed) -> None:
        slowest = ", ".join(f"{name} {each:.1f} s" for name, each in
                            sorted(experiments.items(), key=lambda item: -item[1])[:4])
        self.bar.console.print(f"compiled the kernels of {len(experiments) - len(failed)} experiments first, "
                               f"{seconds:.1f} s (a fresh machine or a new bench; the caches keep them; the "
                               f"slowest: {slowest})", highlight=False)
        for name, why in failed.items():
            self.bar.console.print(terminal(f"{name}: its warm-up failed, so it stays cold: {why}"), highlight=False,
                                   markup=False)

    def close(self) -> None:
        self.bar.stop()


def sweep_command(args: argparse.Namespace, console: Console) -> int:
    names = [name.strip() for name in args.experiments.split(",")] if args.experiments is not None else None
    if names is not None and not all(names):
        raise UsageError(f"--experiments {args.experiments!r}: name experiments, comma-separated (sweep --list shows "
                         "them)")
    try:
        sizes = parse_sizes(args.sizes) if args.sizes is not None else None
    except ValueError as error:
        raise UsageError(f"--sizes: {error}") from None
    axes = {}
    for item in args.axis:
        name, equals, values = item.partition("=")
        if not equals or not name.strip() or not values.strip():
            raise UsageError(f"--axis {item!r}: expected NAME=V1,V2")
        if name.strip() in axes:
            raise UsageError(f"--axis {name.strip()} is given twice: give its values once, comma-separated")
        axes[name.strip()] = [value.strip() for value in values.split(",")]
    if args.devices and args.device is not None:
        raise UsageError("--device and --devices: choose one (--devices 0,1 or --devices all for several GPUs)")
    if args.resume is not None and args.out is not None:
        raise UsageError("--out and --resume: a resumed sweep adds to the file it resumes; leave out --out")
    request = Request(names, args.mode, sizes, axes, args.out or RESULTS_DIR, args.device or 0, args.resume,
                      args.budget, shlex.join(["python", "-m", "bench", *sys.argv[1:]]), devices=args.devices or (),
                      concurrent=args.concurrent, one_at_a_time=args.one_at_a_time, started_s=process_age_s())
    return _list_experiments(request, console) if args.list else exit_status(run(request, console))


def _list_experiments(request, console: Console) -> int:
    """The plan of ``request``, checked as a sweep checks it but measuring nothing: each experiment it selects, the
    GPUs it needs, what it measures, its axes and its configurations (on one GPU; with ``--devices``, those)."""
    devices = listing_devices(request)
    planned = for_request(request, devices)
    check_paths(request, planned)  # as the sweep would: --out, or the file --resume names
    counts: dict[str, int] = {}
    for item in planned.plans:
        counts[item.experiment.name] = counts.get(item.experiment.name, 0) + len(item.configs)
    table = Table(box=box.SIMPLE_HEAD, highlight=False, title=f"experiments of a {request.mode} sweep: "
                  f"{sum(counts.values())} configurations", title_justify="left",
                  caption="--experiments NAME,NAME picks some; --axis NAME=V1,V2 replaces an axis's values",
                  caption_justify="left")
    table.add_column("experiment", no_wrap=True)
    table.add_column("what it measures; its axes", ratio=1)
    table.add_column("configurations", justify="right", no_wrap=True)
    for name, experiment in registry().items():
        if name not in counts and name not in planned.left_out:
            continue
        needs = f"\nneeds {experiment.processes.gpus}+ GPUs" if experiment.processes.gpus > 1 else ""
        axes = "; ".join(f"{axis}: {_axis_values(values, axis == experiment.sweeps.size_axis)}" for axis, values in
                         planned_axes(experiment, request.mode, request.sizes, request.axes, devices).items())
        table.add_row(name + needs, f"{escape(experiment.description)}\n[dim]axes: {escape(axes)}[/dim]",
                      str(counts[name]) if name in counts else "left out")
    console.print(table)
    return 0


def _axis_values(values: tuple, sizes: bool) -> str:
    """An axis's values in a few words: all of them, or the first few and how many."""
    shown = [format_size(value) if sizes else str(value) for value in values]
    if len(shown) <= 6:
        return ", ".join(shown)
    return f"{' – '.join([shown[0], shown[-1]])} ({len(shown)} sizes)" if sizes else \
        f"{', '.join(shown[:3])}, … ({len(shown)} values)"


def run(request, console: Console):
    """Plan, check and run a sweep with a progress bar; print its summary; return its outcome."""
    progress = _Progress(console, budget_for(request.mode, request.budget_s))
    runner = Runner(request, progress)
    planned = runner.plan()
    checked = runner.check(planned)
    for name, why in planned.left_out.items():
        console.print(terminal(f"{name}: left out, {why}"), highlight=False, markup=False)  # pip install "...[torch]"
    try:
        outcome = runner.run(checked)
    finally:
        progress.close()
    _print_summary(checked.plans, outcome, console)
    return outcome


def exit_status(outcome) -> int:
    return 128 + outcome.signal if outcome.interrupted else 0


def _print_summary(plans, outcome, console: Console) -> None:
    rows = store.typed(pd.DataFrame(outcome.rows), store.suite_schema(experiments_of(plans)))
    for item in plans:
        mine = rows[rows["experiment"] == item.experiment.name] if len(rows) else rows
        if item.label and len(mine):  # one of several GPUs: its own rows
            mine = mine[mine["gpu_index"] == item.devices[0]]
        if not len(mine):
            continue
        view = views().get(item.experiment.name)
        headline = view.headline(mine) if view else counts(mine)
        gpus = f" (GPUs {', '.join(map(str, item.devices))})" if len(item.devices) > 1 else (
            f" (GPU {item.devices[0]})" if item.label else "")
        title = terminal(f"{item.experiment.name} on {mine.iloc[0]['gpu_name']}{gpus}")  # words (a --resume'd file's)
        table = Table(title=Text(title, style="table.title"))
        for column in headline.columns:
            table.add_column(column, justify="right" if "GB/s" in column or " ms" in column else "left")
        for values in headline.itertuples(index=False):
            table.add_row(*(Text(terminal(value)) for value in values))  # words, not markup: a[boolean mask]
        console.print(table)
        not_ok = mine[mine["status"] != Status.OK]
        if len(not_ok):
            tally = ", ".join(f"{count} {status}" for status, count in not_ok["status"].value_counts().items())
            console.print(f"{item.name}: {len(mine) - len(not_ok)} ok, {tally}; the first:")
            for _, row in not_ok.head(3).iterrows():
                console.print(terminal(f"  {row['status']} {describe(item.experiment, row)}: {row['error']}"),
                              markup=False)
    if len(rows) and "throttled" in rows:
        throttled = rows[rows["throttled"].fillna(False).astype(bool)]
        if len(throttled):
            reasons = ", ".join(sorted({r for text in throttled["throttle_reasons"] for r in text.split(",") if r}))
            console.print(f"[yellow]warning:[/yellow] {len(throttled)} configurations ran while the GPU was "
                          f"throttled ({reasons}); see the throttled column")
        busy = rows[rows["other_processes"].fillna(0) > 0]
        if len(busy):
            console.print(f"[yellow]warning:[/yellow] {len(busy)} configurations ran while other processes used "
                          "the GPU; see the other_processes column")
    scaled = rows[rows["stop_scale"].fillna(1.0) < 1] if len(rows) and "stop_scale" in rows else rows.iloc[0:0]
    if len(scaled):
        console.print(f"this machine ran slower than the time model: to keep to its budget the sweep sampled "
                      f"{len(scaled)} configurations under smaller time caps (down to "
                      f"{scaled['stop_scale'].min():.2f} of the plan's; see the stop_scale column), never under "
                      "fewer samples than their floor", highlight=False)
    below = rows[rows["floor_met"].eq(False)] if len(rows) and "floor_met" in rows else rows.iloc[0:0]
    if len(below):
        kind = " (--quick: a smoke test)" if outcome.mode == "quick" else ""
        console.print(f"[yellow]warning:[/yellow] {len(below)} configurations are below their experiment's "
                      f"accuracy floor{kind}: read them as unclear (the floor_met column)", highlight=False)
    if outcome.wall_s:
        times = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in outcome.wall_s.items())
        startup = sum(outcome.startup_s.values())
        at_once = " (the GPUs ran at once: these overlap)" if outcome.concurrent else ""
        warm = f"; before them, {outcome.warm_s:.1f} s compiling kernels" if outcome.warm_s else ""
        console.print(f"wall time of the experiments: {sum(outcome.wall_s.values()):.1f} s{at_once} ({times}; of it "
                      f"{startup:.1f} s starting their processes{warm}); planned {outcome.estimate_s:.0f} s",
                      highlight=False)
    done = len(outcome.rows)
    if outcome.interrupted:
        console.print(terminal(f"interrupted during {outcome.stopped_in or 'the sweep'} after {done} of "
                               f"{outcome.planned} configurations; the file is complete up to there. Finish it with: "
                               f"python -m bench sweep <same options> --resume {outcome.path}"), markup=False)
    if outcome.path:
        console.print(terminal(f"{done} configurations written to {outcome.path}; plot with: python -m bench plot "
                               f"{outcome.path}"), markup=False)
    else:
        console.print("no configuration finished; nothing was written")

def env_command(args: argparse.Namespace, console: Console) -> int:
    """The GPU's environment and the host's; without a GPU, the host's and why there is no GPU."""
    reason = env.no_gpu_reason()
    if reason and args.device is not None:
        raise UsageError(f"--device {args.device}: no GPU is visible here ({reason})")
    device = args.device or 0
    readings = env.host_readings() if reason else {**env.gpu_environment(device).as_dict(), **env.host_readings()}
    table = Table(title="bench environment", show_header=False)
    if reason:
        table.add_row("GPU", escape(f"none: {reason}; {env.WITHOUT_GPU}"))  # the reason may name an extra: [cu12]
    for key, value in readings.items():
        table.add_row(key, Text(format_size(value) if key.endswith("bytes") else terminal(value)))
    console.print(table)
    return 0

