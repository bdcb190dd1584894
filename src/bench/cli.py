"""``python -m bench {sweep,plot,claims,compare,report,probe,syncs,trace,env}``: parse the arguments, call the
library, print.

A user's mistake (bad argument, no GPU, unreadable results file, a place bench cannot write) is one line on stderr
and exit status 2, and nothing is written. A sweep interrupted with Ctrl-C (SIGINT) or SIGTERM keeps its finished
rows, says where it stopped and exits 130 (143 for SIGTERM); ``--resume FILE`` finishes it.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from bench import arrow_threads
from bench.arguments import (RESULTS_NAME, missing_function, needs_gpu_words, no_target, ordinal, require_gpu,
                             split_target, values_kept)
from bench.errors import UsageError
from bench.trace import DEFAULT_RUNS
from bench.units import format_size, parse_sizes
from bench.vocabulary import Status

RESULTS_DIR = Path("results")
PLOTS_DIR = Path("plots/local")  # plot and report write here: git ignores it (docs cite scripts/doc_figures.py's)
FORMATS = ("text", "json", "markdown")  # compare's and claims' outputs
DESCRIPTION = f"""\
Measures, on your GPU, which CUDA calls block the host and which serialize the GPU, how much copy/compute
overlap you really get, copy bandwidth, and what launches and allocations cost; and answers it for your own
code: does it wait for the GPU, and where? Measuring ({needs_gpu_words()}; claims --measure) needs an NVIDIA
GPU; report, plot, compare and claims read results files anywhere, and env prints what it can."""
EXAMPLES = f"""\
examples:
  python -m bench sweep --quick            a smoke test of every experiment (seconds)
  python -m bench sweep                    the headline answers, into results/{RESULTS_NAME}
  python -m bench report                   every run in results/ as one HTML file, plots/local/report.html
  python -m bench compare OLD NEW          what changed between two results (a driver update, a new GPU)
  python -m bench probe mypkg.train:step   does step() wait for the GPU?
  python -m bench syncs mypkg.train:step   which lines of step() wait for the GPU?
  python -m bench trace mypkg.train:step   how much of step()'s copying hides behind its kernels?
  python -m bench sweep --list             the plan, checked: experiments, their axes and configurations"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print usage and a second line; we want one line
        raise UsageError(message)


def _positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive finite number")
    return value


def _target_arguments(command: argparse.ArgumentParser) -> None:
    """The target of syncs and trace: a function, or a script and the arguments that follow it."""
    command.add_argument("target", nargs="?", metavar="MODULE:FUNCTION|FILE.py:FUNCTION|SCRIPT.py",
                         help="a function taking no arguments (mypkg.train:step, train.py:step), or a script, run "
                              "as __main__ with the ARGS that follow it")
    script_args = command.add_argument("script_args", nargs=argparse.REMAINDER, metavar="ARGS",
                                       help="the script's arguments")
    script_args.required = False  # none is fine; a missing target is the command's one line (no_target)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


def _devices(text: str) -> str | tuple[int, ...]:
    if text.strip() == "all":
        return "all"
    try:
        devices = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not 'all' or GPU ordinals like 0,1") from None
    if any(device < 0 for device in devices):
        raise argparse.ArgumentTypeError(f"{text!r}: GPU ordinals are 0 or more")
    return devices


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m bench", description=DESCRIPTION, epilog=EXAMPLES,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="store_true", help="print the installed version and exit")
    commands = parser.add_subparsers(dest="command", metavar="{sweep,plot,claims,compare,report,probe,syncs,trace,env}")

    sweep = commands.add_parser("sweep", help=f"run the experiments and write results/{RESULTS_NAME}")
    size = sweep.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_const", const="quick", dest="mode",
                      help="a smoke test of every experiment (seconds)")
    size.add_argument("--full", action="store_const", const="full", dest="mode",
                      help="the exhaustive grid (many minutes)")
    sweep.add_argument("--budget", type=_positive_number, metavar="SECONDS",
                       help="shrink the stop rules' time caps until the plan fits this many seconds")
    sweep.add_argument("--experiments", help="comma-separated experiment names (default: all)")
    sweep.add_argument("--sizes", help="transfer sizes, e.g. 4K,1M,1G or 4K:1G for every power of two between")
    sweep.add_argument("--axis", action="append", default=[], metavar="NAME=V1,V2",
                       help="replace an axis's values, e.g. --axis host_memory=pinned --axis streams=1,8 (repeatable)")
    sweep.add_argument("--out", type=Path, default=RESULTS_DIR,
                       help="results directory, or a new .parquet file (an existing one is never overwritten)")
    sweep.add_argument("--device", type=ordinal, help="CUDA device ordinal (default 0)")
    sweep.add_argument("--devices", type=_devices, metavar="all|0,1,...",
                       help="several GPUs of this node into one run: each one-GPU experiment on each, one process per "
                            "GPU, one GPU after another (those that measure nothing the GPUs share on all at once); "
                            "and the multi-GPU experiments (peer copies, shared host links, blocking across GPUs), "
                            "which need two or more")
    sweep.add_argument("--concurrent", action="store_true",
                       help="with --devices: run every one-GPU experiment on all the GPUs at once, host copies too "
                            "(to expose shared links and hosts)")
    sweep.add_argument("--one-at-a-time", action="store_true",
                       help="with --devices: run every experiment one GPU after another (the baseline that "
                            "running at once is checked against)")
    sweep.add_argument("--resume", type=Path, metavar="FILE",
                       help="an interrupted sweep's results file: run what it lacks and add it to the same file")
    sweep.add_argument("--list", action="store_true",
                       help="preview the plan, checked as the sweep checks it: the experiments, what each "
                            "measures, its axes and configurations (with --quick or --full: theirs); measures nothing "
                            "and needs no GPU")
    sweep.set_defaults(handler=_sweep, mode="default")

    plot = commands.add_parser("plot", help="turn results into figures under plots/local/ (one set per GPU)")
    plot.add_argument("results", nargs="?", type=Path,
                      help="results file or directory of them (default: the newest file in results/)")
    plot.add_argument("--out", type=Path, default=PLOTS_DIR, help="directory for the figures (default plots/local/)")
    plot.add_argument("--gpu", help="only one GPU (a UUID or its start, or a name) or one host's GPUs (a hostname)")
    plot.set_defaults(handler=_plot)

    claims = commands.add_parser("claims", help="CUDA folklore against measurement (--measure: runs what the "
                                                "results lack)")
    claims.add_argument("results", nargs="?", type=Path,
                        help="results file or directory (default: the newest file in results/ holding each needed "
                             "experiment)")
    claims.add_argument("--measure", action="store_true",
                        help="measure what the results lack on this machine's GPU first (default: judge what they "
                             "hold; claims without data show as not measured)")
    claims.add_argument("--out", type=Path, default=RESULTS_DIR, help="with --measure: where to write what it measures")
    claims.add_argument("--device", type=ordinal, default=0, help="with --measure: CUDA device ordinal (default 0)")
    claims.add_argument("--gpu", help="only one GPU (a UUID or its start, or a name) or one host's GPUs (a hostname)")
    claims.set_defaults(handler=_claims)

    compare = commands.add_parser("compare", help="what changed between two results: every experiment, per GPU; or "
                                                  "between two traces (bench trace --save files)")
    compare.add_argument("old", type=Path, help="results file or directory, or a trace file: the baseline")
    compare.add_argument("new", type=Path, help="results file or directory, or a trace file: the candidate")
    compare.add_argument("--fail-above", type=_positive_number, metavar="PERCENT",
                         help="exit 1 when a configuration is slower by more than PERCENT, or a trace's number worse "
                              "beyond its runs' spread (a share: by more than PERCENT points) (a CI gate)")
    compare.add_argument("--gpu", help="only one GPU (a UUID or its start, or a name) or one host's GPUs (a hostname)")
    compare.add_argument("--all", action="store_true", help="list every configuration, the same ones too")
    compare.add_argument("--spread-from", nargs="+", type=Path, metavar="RESULTS",
                         help="comparing two machines of one kind: results files or directories whose other machines "
                              "of that kind give the machine-to-machine spread, with the two compared (default: "
                              "results/ where it exists)")
    for judging in (claims, compare):
        judging.add_argument("--format", choices=FORMATS, default="text",
                             help="text for a terminal (default), json for CI, markdown for a pull request; "
                                  "warnings go to stderr")
    compare.set_defaults(handler=_compare)

    report = commands.add_parser("report", help="one self-contained HTML report (figures embedded)")
    report.add_argument("results", nargs="*", type=Path,
                        help="results files or directories (default: results/): the results files under a "
                             "directory, leaving out subdirectories whose names start with _ or ., with their side "
                             "tables and the rows syncs --save and trace --save keep in _syncs/ and _trace/; of "
                             "several measurements of a configuration on one GPU, the newest is shown")
    report.add_argument("--out", type=Path, default=PLOTS_DIR / "report.html",
                        help="the HTML file to write (default plots/local/report.html)")
    report.add_argument("--gpu", help="only one GPU (a UUID or its start, or a name) or one host's GPUs (a hostname)")
    report.set_defaults(handler=_report)
    for reading in (plot, claims, compare, report):
        reading.add_argument("--strict", action="store_true",
                             help="stop at a results file in a directory that bench cannot read (default: skip it "
                                  "with a warning)")

    probe = commands.add_parser("probe", help="does my code block? call MODULE:FUNCTION while the GPU is busy")
    probe.add_argument("target", metavar="MODULE:FUNCTION", help="a function taking no arguments, e.g. mypkg.train:step")
    probe.add_argument("--stream", choices=("all", "default", "per-thread"), default="all",
                       help="what is held: every stream (the device-wide hold; default), or a spin kernel on the "
                            "legacy default stream (CuPy's and PyTorch's default) or the per-thread default stream")
    probe.add_argument("--spin-ms", type=_positive_number, default=20.0, help="hold (spin) length (default 20)")
    probe.add_argument("--device", type=ordinal, default=0, help="CUDA device ordinal (default 0)")
    probe.set_defaults(handler=_probe)

    syncs = commands.add_parser("syncs", help="where does my code wait? every line of MODULE:FUNCTION or a script "
                                              "that waited for the GPU")
    _target_arguments(syncs)
    syncs.add_argument("--settle-ms", type=_positive_number, default=100.0,
                       help="how long a line stands still under the hold before it counts as waiting (default 100)")
    syncs.add_argument("--json", action="store_true", help="print JSON instead of a table")
    syncs.add_argument("--save", type=Path, metavar="FILE.parquet", help="also write the rows to a results file")
    syncs.add_argument("--no-cuda-calls", action="store_true", help="do not name CUDA calls with CUPTI")
    syncs.add_argument("--device", type=ordinal, default=0, help="CUDA device ordinal (default 0)")
    syncs.set_defaults(handler=_syncs)

    trace = commands.add_parser("trace", help="how much does my code overlap? the GPU timeline of MODULE:FUNCTION or "
                                              "a script, its copies hidden behind kernels, idle gaps and bound")
    _target_arguments(trace)
    trace.add_argument("--runs", type=_positive_int, default=DEFAULT_RUNS,
                       help="traced runs (and as many untraced, for the overhead); the median one is shown "
                            f"(default {DEFAULT_RUNS})")
    trace.add_argument("--json", action="store_true", help="print JSON instead of text")
    trace.add_argument("--save", type=Path, metavar="FILE.parquet", help="also write the rows to a results file")
    trace.add_argument("--plot", type=Path, metavar="FILE.png", help="also draw the timeline (PNG or SVG)")
    trace.add_argument("--perfetto", type=Path, metavar="FILE.json",
                       help="also write the timeline for Perfetto (ui.perfetto.dev) or chrome://tracing: every record "
                            "on a track per stream, the host's waits, flows from calls to the copies they made")
    trace.add_argument("--results", type=Path, default=RESULTS_DIR, metavar="DIR",
                       help="results whose pinned bandwidth rows of this GPU stand in for measuring pinned copies "
                            "(default results/)")
    trace.add_argument("--no-lines", action="store_true",
                       help="leave out the driver-call callbacks: no host waits or lines, less overhead on code whose "
                            "every call blocks (pageable copies)")
    trace.add_argument("--device", type=ordinal, default=0, help="CUDA device ordinal (default 0)")
    trace.add_argument("--merge", nargs="+", type=Path, metavar="FILE.parquet",
                       help="instead of tracing, read the traces ranks saved (one per rank, of one host: bench.tracing("
                            "save=..., rank=...) under torchrun) and show, --save, --plot or --perfetto them as one, "
                            "each GPU's numbers and the whole; needs no GPU")
    trace.set_defaults(handler=_trace)

    env = commands.add_parser("env", help="print the GPU, driver, CUDA, PCIe and library environment (without a "
                                          "GPU: the host's, and why there is none)")
    env.add_argument("--device", type=ordinal, default=0, help="CUDA device ordinal (default 0)")
    env.set_defaults(handler=_env)
    return parser


# --- sweep -----------------------------------------------------------------------------------------------------

class _Progress:
    """The sweep's plan, a progress bar whose ETA follows the plan's estimate, and its per-experiment times."""

    def __init__(self, console: Console, budget_s: float | None = None) -> None:
        self.console, self.budget_s = console, budget_s
        self.bar = Progress(TextColumn("{task.description:<44}"), BarColumn(), TextColumn("{task.fields[done]}"),
                            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=console)
        self.task = None
        self.done = self.total = 0

    def planned(self, plans, estimate_s: float, least_s: float) -> None:
        kept = f"; kept within {self.budget_s:.0f} s on any GPU" if self.budget_s else ""
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
        from bench.sweep.plan import describe

        self.done += 1
        self.bar.update(self.task, advance=seconds_planned, description=describe(plan.experiment, row),
                        done=f"{self.done}/{self.total}")

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
            self.bar.console.print(f"{name}: its warm-up failed, so it stays cold: {why}", highlight=False)

    def close(self) -> None:
        self.bar.stop()


def _sweep(args: argparse.Namespace, console: Console):
    from bench.sweep.plan import Request
    from bench.timing import process_age_s

    names = [name.strip() for name in args.experiments.split(",")] if args.experiments else None
    try:
        sizes = parse_sizes(args.sizes) if args.sizes is not None else None
    except ValueError as error:
        raise UsageError(f"--sizes: {error}") from None
    axes = {}
    for item in args.axis:
        name, equals, values = item.partition("=")
        if not equals or not name.strip() or not values.strip():
            raise UsageError(f"--axis {item!r}: expected NAME=V1,V2")
        axes[name.strip()] = [value.strip() for value in values.split(",")]
    if args.devices and args.device is not None:
        raise UsageError("--device and --devices: choose one (--devices 0,1 or --devices all for several GPUs)")
    request = Request(names, args.mode, sizes, axes, args.out, args.device or 0, args.resume, args.budget,
                      shlex.join(["python", "-m", "bench", *sys.argv[1:]]), devices=args.devices or (),
                      concurrent=args.concurrent, one_at_a_time=args.one_at_a_time, started_s=process_age_s())
    return _list_experiments(request, console) if args.list else _run(request, console)


def _list_experiments(request, console: Console) -> int:
    """The plan of ``request``, checked as a sweep checks it but measuring nothing: each experiment it selects, the
    GPUs it needs, what it measures, its axes and its configurations (on one GPU; with ``--devices``, those)."""
    from rich import box

    from bench.experiments import registry
    from bench.sweep.plan import for_request, planned_axes
    from bench.sweep.preflight import listing_devices

    devices = listing_devices(request)
    planned = for_request(request, devices)
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
        needs = f"\nneeds {experiment.gpus}+ GPUs" if experiment.gpus > 1 else ""
        axes = "; ".join(f"{axis}: {_axis_values(values, axis == experiment.size_axis)}" for axis, values in
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


def _run(request, console: Console):
    """Plan, check and run a sweep with a progress bar; print its summary; return its outcome."""
    from bench.sweep.loop import Runner
    from bench.sweep.plan import budget_for

    progress = _Progress(console, budget_for(request.mode, request.budget_s))
    runner = Runner(request, progress)
    planned = runner.plan()
    checked = runner.check(planned)
    for name, why in planned.left_out.items():
        console.print(f"{name}: left out, {why}", highlight=False)
    try:
        outcome = runner.run(checked)
    finally:
        progress.close()
    _print_summary(checked.plans, outcome, console)
    return outcome


def _exit_status(outcome) -> int:
    return 128 + outcome.signal if outcome.interrupted else 0


def _print_summary(plans, outcome, console: Console) -> None:
    import pandas as pd

    from bench import store
    from bench.sweep.plan import describe, experiments_of
    from bench.views import counts, views

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
        table = Table(title=f"{item.experiment.name} on {mine.iloc[0]['gpu_name']}{gpus}")
        for column in headline.columns:
            table.add_column(column, justify="right" if "GB/s" in column or " ms" in column else "left")
        for values in headline.itertuples(index=False):
            table.add_row(*map(str, values))
        console.print(table)
        not_ok = mine[mine["status"] != Status.OK]
        if len(not_ok):
            counts = ", ".join(f"{count} {status}" for status, count in not_ok["status"].value_counts().items())
            console.print(f"{item.name}: {len(mine) - len(not_ok)} ok, {counts}; the first:")
            for _, row in not_ok.head(3).iterrows():
                console.print(f"  {row['status']} {describe(item.experiment, row)}: {row['error']}")
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
        console.print(f"interrupted during {outcome.stopped_in or 'the sweep'} after {done} of {outcome.planned} "
                      f"configurations; the file is complete up to there. Finish it with: python -m bench sweep "
                      f"<same options> --resume {outcome.path}")
    if outcome.path:
        console.print(f"{done} configurations written to {outcome.path}; plot with: python -m bench plot {outcome.path}")
    else:
        console.print("no configuration finished; nothing was written")


# --- analysis --------------------------------------------------------------------------------------------------

def _unreadable(args: argparse.Namespace):
    """``on_unreadable`` for :mod:`bench.store`'s readers: a warning on stderr that names the file passed over and
    why; with --strict, None (the file's error ends the command)."""
    if args.strict:
        return None
    return lambda error: print(f"bench: warning: skipped a file: {error} (--strict stops instead)", file=sys.stderr)


def _plot(args: argparse.Namespace, console: Console) -> int:
    from bench import analysis, plots, store
    from bench.experiments import registry
    from bench.views import in_order

    experiments = registry()
    schema = store.suite_schema(experiments)
    if args.results:
        path, rows = args.results, store.read_any(args.results, schema, _unreadable(args))
    else:
        path, rows = store.read_newest(RESULTS_DIR, schema, _unreadable(args))
    if not len(rows):
        raise UsageError(f"{path} holds no result rows")
    rows = analysis.select_gpu(analysis.newest(rows, experiments), args.gpu)
    store.writable_directory(args.out, "--out")
    paths = plots.plot_results(rows, args.out, in_order(experiments), store.side_tables_any(path, _unreadable(args)))
    if not paths:
        raise UsageError(f"{path} holds no experiment that bench can plot")
    for written in paths:
        console.print(f"wrote {written}", highlight=False)
    return 0


def _claims(args: argparse.Namespace, console: Console) -> int:
    import pandas as pd

    from bench import analysis, claims, store
    from bench.experiments import registry

    needed = claims.needed_experiments()
    experiments = registry()
    schema = store.suite_schema(experiments)
    if args.results:
        rows = store.read_any(args.results, schema, _unreadable(args))
        if not len(rows):
            raise UsageError(f"{args.results} holds no result rows")
        rows = analysis.newest(rows, experiments)
    else:
        rows = store.newest_rows(RESULTS_DIR, schema, needed, _unreadable(args))
    rows = analysis.select_gpu(rows, args.gpu)

    def judged(rows: pd.DataFrame) -> list:  # each GPU that measured something a claim needs, with its rows
        return [(gpu, mine) for gpu, mine in analysis.by_gpu(rows)
                if len(claims.missing_experiments(mine)) < len(needed)]

    missing = claims.missing_experiments(rows)
    if missing and args.measure and len(judged(rows)) <= 1:
        from bench.sweep.plan import Request

        progress = console if args.format == "text" else Console(stderr=True)  # stdout is the document's
        progress.print(f"measuring what the results lack: {', '.join(missing)}")
        outcome = _run(Request(missing, out=args.out, device=args.device,
                               command="python -m bench claims --measure"), progress)
        if outcome.interrupted:
            return _exit_status(outcome)
        rows = pd.concat([rows, store.read(outcome.path, schema)], ignore_index=True)
        missing = claims.missing_experiments(rows)
    elif missing and args.measure:
        _warn([f"--measure measures for one GPU; the results hold {len(judged(rows))}: choose one with --gpu"])
    elif missing:
        again = shlex.join(["python", "-m", "bench", "claims", *([str(args.results)] if args.results else []),
                            "--measure"])
        _warn([f"the results lack {', '.join(missing)} (or a default sweep's configurations of them): the claims "
               f"that need them show as not measured; measure them on this machine's GPU with: {again}"])
    groups = [(str(gpu), claims.table(mine)) for gpu, mine in judged(rows)] or [(None, claims.table(rows))]
    {"text": _claims_text, "json": _claims_json, "markdown": _claims_markdown}[args.format](groups, missing, console)
    return 0


def _warn(warnings: list[str]) -> None:
    """Warnings on stderr, one line each: stdout is the command's output (a JSON or Markdown document too)."""
    for warning in warnings:
        print(f"bench: warning: {warning}", file=sys.stderr)


def _claims_heading(gpu: str | None) -> str:
    return f"CUDA claims against measurement on {gpu}" if gpu else "CUDA claims (nothing in the results judges them)"


def _claims_text(groups: list, missing: list[str], console: Console) -> None:
    from bench.claims import LABELS

    for gpu, judged in groups:
        console.print(f"[bold]{escape(_claims_heading(gpu))}[/bold]", highlight=False)
        for _, line in judged.iterrows():  # one block per claim: readable at any terminal width
            console.print(f"\n[bold]{escape(line['claim'])}[/bold]: {LABELS[line['verdict']].upper()}",
                          highlight=False)
            console.print(f"  docs say: {line['docs say']} ({line['source']})", highlight=False, soft_wrap=True,
                          markup=False)
            console.print(f"  measured: {line['measured']}", highlight=False, soft_wrap=True, markup=False)
        console.print()


def _claims_json(groups: list, missing: list[str], console: Console) -> None:
    import json

    from bench.claims import LABELS

    document = {"gpus": [{"gpu": gpu, "claims": [
        {"claim": line["claim"], "verdict": LABELS[line["verdict"]], "docs": line["docs say"], "source": line["source"],
         "measured": None if line["verdict"] == "not measured" else line["measured"]}
        for _, line in judged.iterrows()]} for gpu, judged in groups], "not_measured": missing}
    print(json.dumps(document, indent=2, ensure_ascii=False))


def _claims_markdown(groups: list, missing: list[str], console: Console) -> None:
    from bench.claims import LABELS

    for gpu, judged in groups:
        rows = [[line["claim"], f"**{LABELS[line['verdict']]}**", f"{line['docs say']} ([docs]({line['source']}))",
                 line["measured"]] for _, line in judged.iterrows()]
        print(f"## {_markdown_cell(_claims_heading(gpu))}\n")
        print(_markdown_table(["claim", "verdict", "the documentation", "measured"], rows) + "\n")


def _compare(args: argparse.Namespace, console: Console) -> int:
    from bench import compare, store
    from bench.experiments import registry
    from bench.traces.compare import is_trace
    from bench.traces.compare_text import compared

    if is_trace(args.old) or is_trace(args.new):  # two bench trace --save files
        output, warnings, failing = compared(args.old, args.new, gpu=args.gpu, fail_above=args.fail_above,
                                             listed_all=args.all, form=args.format)
        _warn(warnings)
        print(output)
        return 1 if failing else 0
    for path in args.spread_from or []:
        if not path.exists():
            raise UsageError(f"--spread-from {path}: no such file or directory")
    experiments = registry()
    schema = store.suite_schema(experiments)
    old, new = store.read_any(args.old, schema, _unreadable(args)), store.read_any(args.new, schema, _unreadable(args))
    for path, rows in ((args.old, old), (args.new, new)):
        if not len(rows):
            raise UsageError(f"{path} holds no result rows")
    result = compare.compare(old, new, experiments, gpu=args.gpu, record=_spread_record(args, old, new, schema))
    if not len(result.table):
        raise UsageError(f"{args.old} and {args.new} have no configuration in common")
    _warn(result.warnings)
    failing = len(result.slower_than(args.fail_above)) if args.fail_above is not None else 0
    shown = result.table if args.all else result.table[result.table["verdict"] != "same"]
    writers = {"text": _compare_text, "json": _compare_json, "markdown": _compare_markdown}
    writers[args.format](result, shown, args, failing, console)
    return 1 if failing else 0


def _spread_record(args: argparse.Namespace, old, new, schema):
    """The rows of --spread-from (default results/, where it exists) on the GPU kinds both sides hold on different
    machines; None when there are none, which reads nothing."""
    import pandas as pd

    from bench import noise, store

    kinds = noise.kinds_across_machines(old, new)
    if args.spread_from is not None:
        paths = args.spread_from
    else:
        paths = [RESULTS_DIR] if RESULTS_DIR.is_dir() else []
    if not kinds or not paths:
        return None
    frames = [store.read_any(path, schema, _unreadable(args)) for path in paths]
    frames = [rows[rows["gpu_name"].isin(kinds)] for rows in frames if "gpu_name" in rows]
    return pd.concat(frames, ignore_index=True) if frames else None


def _compare_text(result, shown, args: argparse.Namespace, failing: int, console: Console) -> None:
    from rich import box
    from rich.text import Text

    console.print(Text("What changed", style="bold"))
    headlines = Table.grid(padding=(0, 1, 0, 0))  # a bullet column: wrapped lines keep their indent
    for line in result.headlines:
        headlines.add_row("  -", Text(line))
    console.print(headlines if result.headlines else "  nothing beyond noise")
    for name, group in shown.groupby("experiment", sort=False):
        unit = _one_unit(group)
        listing = Table(title=_listing_title(result, name, group), title_justify="left", box=box.SIMPLE_HEAD,
                        highlight=False)
        for column in _listing_head(result, unit):
            listing.add_column(column, justify="right" if column.startswith(("old", "new")) else "left",
                               ratio=1 if column == "configuration" else None)
        for _, line in group.iterrows():
            listing.add_row(*_listing_row(result, line, unit))
        console.print(listing)
    console.print(_counts_line(result, args.all), highlight=False)
    if failing:
        console.print(f"{failing} configurations slower by more than {args.fail_above:g}%: failing", highlight=False)


def _compare_markdown(result, shown, args: argparse.Namespace, failing: int, console: Console) -> None:
    print("## What changed\n")
    print("\n".join(f"- {_markdown_cell(line)}" for line in result.headlines) or "nothing beyond noise")
    for name, group in shown.groupby("experiment", sort=False):
        unit = _one_unit(group)
        print(f"\n### {_markdown_cell(_listing_title(result, name, group))}\n")
        print(_markdown_table(_listing_head(result, unit), [_listing_row(result, line, unit)
                                                           for _, line in group.iterrows()]))
    print(f"\n{_counts_line(result, args.all)}")
    if failing:
        print(f"\n**{failing} configurations slower by more than {args.fail_above:g}%: failing**")


def _compare_json(result, shown, args: argparse.Namespace, failing: int, console: Console) -> None:
    import json

    document = {"old": str(args.old), "new": str(args.new), "warnings": result.warnings,
                "headlines": result.headlines, "counts": result.counts(),
                "configurations": [{key: _json_value(value) for key, value in line.items()}
                                   for line in shown.to_dict("records")]}
    if args.fail_above is not None:
        document["fail_above"] = {"percent": args.fail_above, "failing": failing}
    print(json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False))


def _one_unit(group) -> str:
    """The unit of every configuration of ``group``, or "" when they differ (each value then carries its own)."""
    units = set(group["unit"])
    return units.pop() if len(units) == 1 else ""


def _listing_title(result, name: str, group) -> str:
    return f"{name}: {len(group)} of {(result.table['experiment'] == name).sum()} configurations"


def _listing_head(result, unit: str) -> list[str]:
    suffix = f" {unit}" if unit else ""
    return [*(["GPU"] if result.several_gpus else []), "configuration", f"old{suffix}", f"new{suffix}", "verdict"]


def _listing_row(result, line, unit: str) -> list[str]:
    """One configuration's cells: GPU (several GPUs), configuration, old, new (with their unit where the column has
    none), and the verdict with the change and its note (why it is unclear; how it stands against the
    machine-to-machine spread)."""
    from bench.compare import number

    if line["verdict"] == "changed":
        judged = line["change"]
    elif line["verdict"] == "same" or not math.isfinite(line["ratio"]):
        judged = line["verdict"]
    else:
        judged = f"{line['verdict']} {line['ratio'] - 1:+.1%}"
    if line["note"]:
        judged += f" ({line['note']})"
    values = [number(line["old"]), number(line["new"])]
    if not unit:
        values = [f"{value} {line['unit']}" if value else "" for value in values]
    return [*([line["gpu"]] if result.several_gpus else []), line["configuration"], *values, judged]


def _counts_line(result, listed_all: bool) -> str:
    counts = result.counts()
    same = counts.pop("same", 0)
    listed = "" if listed_all else " (not listed; --all lists every configuration)"
    return ", ".join([*(f"{count} {verdict}" for verdict, count in counts.items()), f"{same} same{listed}"])


def _json_value(value):
    """A table cell as JSON has it: numbers and text as they are, null for every kind of missing."""
    import numpy as np
    import pandas as pd

    if isinstance(value, np.generic):
        value = value.item()
    if value is None or value is pd.NA or (isinstance(value, float) and not math.isfinite(value)):
        return None
    return value


def _markdown_cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _markdown_table(head: list[str], rows: list[list]) -> str:
    """A GitHub Markdown table; the old and new columns align right."""
    align = ["---:" if column.startswith(("old", "new")) else "---" for column in head]
    lines = [head, align, *rows]
    return "\n".join("| " + " | ".join(_markdown_cell(cell) for cell in line) + " |" for line in lines)


def _report(args: argparse.Namespace, console: Console) -> int:
    import pandas as pd

    from bench import analysis, report, store
    from bench.experiments import registry
    from bench.report import figures
    from bench.report.bar import DelayedBar

    experiments = registry()
    sources = args.results or [RESULTS_DIR]
    if args.out.is_dir():
        raise UsageError(f"--out: {args.out} is a directory; name the HTML file to write")
    store.write_target(args.out, "--out")
    figures.warm_up()  # the figures' workers get ready while the results are read
    with DelayedBar(Console(stderr=True)) as bar:  # on a terminal, once it has taken 2 s
        frames = [store.read_any(source, store.suite_schema(experiments), _unreadable(args)) for source in sources]
        for source, frame in zip(sources, frames):
            if not len(frame):
                raise UsageError(f"{source} holds no result rows")
        rows = analysis.select_gpu(pd.concat(frames, ignore_index=True), args.gpu)
        tables: dict = {}
        for source in sources:
            for name, table in store.side_tables_any(source, _unreadable(args)).items():
                tables[name] = pd.concat([tables[name], table], ignore_index=True) if name in tables else table
        chosen = analysis.gpus(rows) if args.gpu else None  # --gpu: the tools' results of its GPUs only

        def named(name: str) -> pd.DataFrame | None:
            found = [store.named_tables(source, name) for source in sources if Path(source).is_dir()]
            table = pd.concat(found, ignore_index=True) if found else None
            if chosen is None or table is None or not len(table):
                return table
            return analysis.rows_of(table, *chosen)

        syncs, traces = named("syncs"), named("trace")
        store.writable_directory(args.out.parent, "--out")
        bar.doing("laying out the report")
        names = ", ".join(str(source) for source in sources)
        written = report.write(rows, tables, args.out, experiments,
                               source=names if len(sources) < 4 else f"{len(sources)} sources", syncs=syncs,
                               traces=traces, progress=bar.figures)
    console.print(f"wrote {written}", highlight=False)
    return 0


def _function(command: str, target: str):
    """The function MODULE:FUNCTION (or FILE.py:FUNCTION) names, imported with the current directory on the path (a
    file with its own directory)."""
    import importlib
    import importlib.util

    module_name, function_name = split_target(command, target)
    sys.path.insert(0, "")  # the current directory, as `python -m` does for the user's own modules
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise UsageError(f"{command}: {path} is not a file")
            sys.path.insert(0, str(path.resolve().parent))
            spec = importlib.util.spec_from_file_location("__bench_target__", path)  # never shadows a real module
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
        if not hasattr(module, function_name):
            raise missing_function(command, module_name, function_name)
        function = getattr(module, function_name)
    except UsageError:
        raise
    except (Exception, SystemExit) as error:  # the user's module failed (or exited) on import: one line
        raise UsageError(f"{command}: cannot load {target}: {type(error).__name__}: {error}") from None
    if not callable(function):
        raise UsageError(f"{command}: {target} is not callable")
    return function


def _script(path: Path, arguments: list[str], command: str = "syncs"):
    """A function that runs the script as ``__main__`` with its arguments, as ``python SCRIPT ARGS`` would."""
    import runpy

    if not path.is_file():
        raise UsageError(f"{command}: {path} is not a file")

    def run() -> None:
        saved = sys.argv[:]
        sys.argv = [str(path), *arguments]
        sys.path.insert(0, str(path.resolve().parent))
        try:
            runpy.run_path(str(path), run_name="__main__")
        except SystemExit as exit:  # sys.exit() ends the script, not bench: 0 is a normal end
            if exit.code not in (None, 0):
                raise UsageError(f"{command}: {path} exited with status {exit.code}") from None
        finally:
            sys.argv = saved
            sys.path.remove(str(path.resolve().parent))

    return run


def _probe(args: argparse.Namespace, console: Console) -> int:
    split_target("probe", args.target)
    require_gpu("probe")  # before the user's module is imported: importing runs it
    function = _function("probe", args.target)
    from bench.env import gpu_environment, use_device
    from bench.probe import probe

    environment = gpu_environment(args.device)
    use_device(args.device)
    stream = {"all": None, "default": 0, "per-thread": 2}[args.stream]
    from bench.timing import MeasurementFailed

    try:
        result = probe(function, stream=stream, spin_ms=args.spin_ms)
    except MeasurementFailed as error:
        raise UsageError(f"probe: {error}") from None
    console.print(f"{args.target} on {environment.gpu_name}: {result}", highlight=False, soft_wrap=True)
    return 0


def _target(command: str, args: argparse.Namespace):
    """Check the target and --save before anything runs; the function to run (a script's as ``__main__``)."""
    if args.target is None:
        raise no_target(command)
    script = args.target.endswith(".py")
    if not script and args.script_args:
        raise UsageError(f"{command}: {' '.join(args.script_args)}: options go before the target (arguments follow "
                         "only a script)")
    if not script and ":" not in args.target:
        raise UsageError(f"{command}: {args.target!r} is not MODULE:FUNCTION, FILE.py:FUNCTION or SCRIPT.py")
    if script and not Path(args.target).is_file():
        raise UsageError(f"{command}: {args.target} is not a file")
    _outputs(args)
    require_gpu(command)
    return _script(Path(args.target), args.script_args, command) if script else _function(command, args.target)


def _outputs(args: argparse.Namespace) -> None:
    """Check --save, --plot and --perfetto before anything runs or is read."""
    for option, path in (("--save", args.save), ("--plot", getattr(args, "plot", None)),
                         ("--perfetto", getattr(args, "perfetto", None))):
        if path is not None:
            from bench import store

            store.write_target(path, option)
            if option == "--save" and Path(path).exists():
                raise UsageError(f"--save: {path} exists; bench never replaces a results file")
            store.writable_directory(Path(path).parent, option)
    if getattr(args, "plot", None) is not None and Path(args.plot).suffix not in (".png", ".svg"):
        raise UsageError(f"--plot: {args.plot} is not a .png or .svg file")
    if getattr(args, "perfetto", None) is not None and Path(args.perfetto).suffix != ".json":
        raise UsageError(f"--perfetto: {args.perfetto} is not a .json file")


def _syncs(args: argparse.Namespace, console: Console) -> int:
    function = _target("syncs", args)
    from bench.env import gpu_environment, use_device
    from bench.syncs import syncs

    environment = gpu_environment(args.device)
    use_device(args.device)
    from bench.timing import MeasurementFailed

    try:
        found = syncs(function, settle_ms=args.settle_ms, cuda_calls=not args.no_cuda_calls)
    except MeasurementFailed as error:  # the hold could not fill this GPU (shared, MPS): one line
        raise UsageError(f"syncs: {error}") from None
    if args.save is not None:
        from bench.syncs import save

        save([(args.target, found)], environment, args.save)
    _show(args, console, found, f"{args.target} on {environment.gpu_name}: ")
    return 0


def _trace(args: argparse.Namespace, console: Console) -> int:
    if args.merge:
        return _merge_traces(args, console)
    if args.results != RESULTS_DIR and not Path(args.results).exists():
        raise UsageError(f"--results: {args.results} does not exist")
    function = _target("trace", args)
    from bench.env import gpu_environment, use_device
    from bench.trace import TraceUnavailable, trace

    environment = gpu_environment(args.device)
    use_device(args.device)
    results = _reference_rows(args.results)
    from bench.timing import MeasurementFailed

    try:
        found = trace(function, runs=args.runs, results=results, target=args.target, lines=not args.no_lines)
    except (TraceUnavailable, MeasurementFailed) as error:  # CUPTI missing or taken; a reference copy failed
        raise UsageError(f"trace: {error}") from None
    _trace_outputs(args, found, args.target, f"{args.target} on {environment.gpu_name}", environment)
    _show(args, console, found, f"{args.target} on {environment.gpu_name}:\n")
    return 0


def _merge_traces(args: argparse.Namespace, console: Console) -> int:
    """``trace --merge FILE...``: the ranks' saved traces as one."""
    if args.target is not None:
        raise UsageError("trace --merge takes no target: it reads the traces the ranks saved")
    _outputs(args)
    from bench.traces.merge import merged_files

    found = merged_files(args.merge)
    title = f"{found.target}, {len(args.merge)} trace{'s' * (len(args.merge) != 1)} merged"
    _trace_outputs(args, found, found.target, title, None)
    _show(args, console, found, f"{title}:\n")
    return 0


def _trace_outputs(args: argparse.Namespace, found, target: str, title: str, environment) -> None:
    """Write what --plot, --perfetto and --save ask of a trace (``environment``: the GPU's; None: the ranks')."""
    figure = None
    if args.plot is not None:
        import pandas as pd

        from bench import plots

        figure = plots.rendered(plots.trace_figure(pd.DataFrame(found.table()), title), Path(args.plot).suffix[1:])
    timeline = None
    if args.perfetto is not None:
        from bench.traces.perfetto import encoded

        timeline = encoded(found)
    if args.save is not None:
        from bench.trace import save

        save([(target, found)], environment, args.save)
    from bench.store import write_bytes

    for path, content in ((args.plot, figure), (args.perfetto, timeline)):
        if content is not None:
            write_bytes(path, content)


def _show(args: argparse.Namespace, console: Console, found, heading: str) -> None:
    """What syncs or trace found: JSON with --json, else the heading and the text."""
    if args.json:
        print(found.to_json())
    else:
        console.print(f"{heading}{found}", highlight=False, soft_wrap=True, markup=False)


def _reference_rows(results: Path):
    """The rows of the results under ``results`` (pinned bandwidth rows stand in for reference copies), or None;
    a file bench cannot read is passed over with a warning."""
    if not Path(results).exists():
        return None
    from bench import store
    from bench.experiments import registry

    warn = lambda error: _warn([f"skipped a file: {error}"])  # noqa: E731
    try:
        return store.read_any(results, store.suite_schema(registry()), warn)
    except store.ResultsError as error:
        _warn([f"--results: {error}; pinned copies are measured"])
        return None


def _env(args: argparse.Namespace, console: Console) -> int:
    """The GPU's environment and the host's; without a GPU, the host's and why there is no GPU."""
    from bench import env

    reason = env.no_gpu_reason()
    readings = env.host_readings() if reason else {**env.gpu_environment(args.device).as_dict(), **env.host_readings()}
    table = Table(title="bench environment", show_header=False)
    if reason:
        table.add_row("GPU", escape(f"none: {reason}; {env.WITHOUT_GPU}"))  # the reason may name an extra: [cu12]
    for key, value in readings.items():
        table.add_row(key, format_size(value) if key.endswith("bytes") else str(value))
    console.print(table)
    return 0


def _version() -> str:
    """'cuda-sync-bench 0.1.0': the installed distribution that bench came from, and its version."""
    import importlib.metadata

    import bench

    try:
        return f"{bench.DISTRIBUTION} {importlib.metadata.version(bench.DISTRIBUTION)}"
    except importlib.metadata.PackageNotFoundError:
        return f"bench {bench.__version__} (not installed: {Path(bench.__file__).parent})"


def main(argv: list[str] | None = None) -> int:
    console = Console()
    try:
        parser = _parser()
        argv = sys.argv[1:] if argv is None else argv
        args = parser.parse_args(values_kept(argv, ("--sizes",)) if argv[:1] == ["sweep"] else argv)
        if args.version:
            print(_version())
            return 0
        if args.command is None:  # bare `python -m bench`: what it does and how
            parser.print_help()
            return 0
        result = args.handler(args, console)
        return result if isinstance(result, int) else _exit_status(result)
    except UsageError as error:
        print(f"bench: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130
    finally:
        arrow_threads.wait_until_idle()  # else a pyarrow worker can abort the exiting interpreter
