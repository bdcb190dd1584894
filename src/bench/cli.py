"""``python -m bench {sweep,plot,claims,compare,report,probe,env}``: parse the arguments, call the library, print.

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

from bench.errors import UsageError
from bench.units import format_size, parse_sizes

RESULTS_DIR = Path("results")
PLOTS_DIR = Path("plots")


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
    parser = _Parser(prog="python -m bench", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="{sweep,plot,claims,compare,report,probe,env}")

    sweep = commands.add_parser("sweep", help="run the experiments and write results/<timestamp>-<gpu>.parquet")
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
    sweep.add_argument("--device", type=int, help="CUDA device ordinal (default 0)")
    sweep.add_argument("--devices", type=_devices, metavar="all|0,1,...",
                       help="several GPUs of this node into one run: each one-GPU experiment on each, one process per "
                            "GPU, one GPU after another; and the multi-GPU experiments (peer copies, shared host "
                            "links, blocking across GPUs), which need two or more")
    sweep.add_argument("--concurrent", action="store_true",
                       help="with --devices: run each one-GPU experiment on all the GPUs at once (shared links)")
    sweep.add_argument("--resume", type=Path, metavar="FILE",
                       help="an interrupted sweep's results file: run what it lacks and add it to the same file")
    sweep.set_defaults(handler=_sweep, mode="default")

    plot = commands.add_parser("plot", help="turn results into figures under plots/ (one set per GPU)")
    plot.add_argument("results", nargs="?", type=Path,
                      help="results file or directory of them (default: the newest file in results/)")
    plot.add_argument("--out", type=Path, default=PLOTS_DIR, help="directory for the figures (default plots/)")
    plot.add_argument("--gpu", help="only one GPU (a UUID or its start, or a name) or one host's GPUs (a hostname)")
    plot.set_defaults(handler=_plot)

    claims = commands.add_parser("claims", help="CUDA folklore against measurement (runs what the results lack)")
    claims.add_argument("results", nargs="?", type=Path,
                        help="results file or directory (default: the newest file in results/ holding each needed "
                             "experiment)")
    claims.add_argument("--out", type=Path, default=RESULTS_DIR, help="where to write results it has to measure")
    claims.add_argument("--device", type=int, default=0, help="CUDA device ordinal (default 0)")
    claims.add_argument("--gpu", help="only one GPU (a UUID or its start, or a name) or one host's GPUs (a hostname)")
    claims.set_defaults(handler=_claims)

    compare = commands.add_parser("compare", help="what changed between two results: every experiment, per GPU")
    compare.add_argument("old", type=Path, help="results file or directory: the baseline")
    compare.add_argument("new", type=Path, help="results file or directory: the candidate")
    compare.add_argument("--fail-above", type=_positive_number, metavar="PERCENT",
                         help="exit 1 when a configuration is slower by more than PERCENT (a CI gate)")
    compare.add_argument("--gpu", help="only one GPU (a UUID or its start, or a name) or one host's GPUs (a hostname)")
    compare.add_argument("--all", action="store_true", help="list every configuration, the same ones too")
    compare.set_defaults(handler=_compare)

    report = commands.add_parser("report", help="one self-contained HTML report (figures embedded)")
    report.add_argument("results", nargs="*", type=Path,
                        help="results files or directories (default: results/, leaving out subdirectories whose "
                             "names start with _ or .); of several measurements of a configuration on one GPU, the "
                             "newest is shown")
    report.add_argument("--out", type=Path, default=PLOTS_DIR / "report.html", help="the HTML file to write")
    report.add_argument("--gpu", help="only one GPU (a UUID or its start, or a name) or one host's GPUs (a hostname)")
    report.set_defaults(handler=_report)

    probe = commands.add_parser("probe", help="does my code block? call MODULE:FUNCTION while the GPU is busy")
    probe.add_argument("target", metavar="MODULE:FUNCTION", help="a function taking no arguments, e.g. mypkg.train:step")
    probe.add_argument("--stream", choices=("default", "per-thread"), default="default",
                       help="the stream the spin kernels run on: the legacy default stream (CuPy's and PyTorch's "
                            "default) or the per-thread default stream")
    probe.add_argument("--spin-ms", type=_positive_number, default=20.0, help="spin kernel length (default 20)")
    probe.add_argument("--device", type=int, default=0, help="CUDA device ordinal (default 0)")
    probe.set_defaults(handler=_probe)

    env = commands.add_parser("env", help="print the GPU, driver, CUDA, PCIe and library environment")
    env.add_argument("--device", type=int, default=0, help="CUDA device ordinal (default 0)")
    env.set_defaults(handler=_env)
    return parser


# --- sweep -----------------------------------------------------------------------------------------------------

class _Progress:
    """The sweep's plan, a progress bar whose ETA follows the plan's estimate, and its per-experiment times."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.bar = Progress(TextColumn("{task.description:<44}"), BarColumn(), TextColumn("{task.fields[done]}"),
                            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=console)
        self.task = None
        self.done = self.total = 0

    def planned(self, plans, estimate_s: float) -> None:
        table = Table(title=f"plan: {sum(len(p.configs) for p in plans)} configurations, about {estimate_s:.0f} s")
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
        from bench.plan import describe

        self.done += 1
        self.bar.update(self.task, advance=seconds_planned, description=describe(plan.experiment, row),
                        done=f"{self.done}/{self.total}")

    def stopped(self, plan, why: str, seconds_planned: float) -> None:
        self.bar.update(self.task, advance=seconds_planned, description=f"{plan.experiment.name}: stopped")

    def finished(self, experiment: str, wall_s: float) -> None:
        self.bar.console.print(f"{experiment}: {wall_s:.1f} s", highlight=False)

    def warmed(self, seconds: float, experiments, failed) -> None:
        self.bar.console.print(f"compiled the kernels of {len(experiments) - len(failed)} experiments first, "
                               f"{seconds:.1f} s (a fresh machine or a new bench; the caches keep them)",
                               highlight=False)
        for name, why in failed.items():
            self.bar.console.print(f"{name}: its warm-up failed, so it stays cold: {why}", highlight=False)

    def close(self) -> None:
        self.bar.stop()


def _sweep(args: argparse.Namespace, console: Console):
    from bench.runner import Request
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
                      concurrent=args.concurrent, started_s=process_age_s())
    return _run(request, console)


def _run(request, console: Console):
    """Plan, check and run a sweep with a progress bar; print its summary; return its outcome."""
    from bench.runner import Runner

    progress = _Progress(console)
    runner = Runner(request, progress)
    runner.plan()
    runner.check()
    for name, why in runner.left_out.items():
        console.print(f"{name}: left out, {why}", highlight=False)
    try:
        outcome = runner.run()
    finally:
        progress.close()
    _print_summary(runner.plans, outcome, console)
    return outcome


def _exit_status(outcome) -> int:
    return 128 + outcome.signal if outcome.interrupted else 0


def _print_summary(plans, outcome, console: Console) -> None:
    import pandas as pd

    from bench import store
    from bench.plan import describe

    rows = store.typed(pd.DataFrame(outcome.rows), store.suite_schema([item.experiment for item in plans]))
    for item in plans:
        mine = rows[rows["experiment"] == item.experiment.name] if len(rows) else rows
        if item.label and len(mine):  # one of several GPUs: its own rows
            mine = mine[mine["gpu_index"] == item.devices[0]]
        if not len(mine):
            continue
        headline = item.experiment.headline(mine)
        gpus = f" (GPUs {', '.join(map(str, item.devices))})" if len(item.devices) > 1 else (
            f" (GPU {item.devices[0]})" if item.label else "")
        table = Table(title=f"{item.experiment.name} on {mine.iloc[0]['gpu_name']}{gpus}")
        for column in headline.columns:
            table.add_column(column, justify="right" if "GB/s" in column or " ms" in column else "left")
        for values in headline.itertuples(index=False):
            table.add_row(*map(str, values))
        console.print(table)
        not_ok = mine[mine["status"] != "ok"]
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
                      f"{scaled['stop_scale'].min():.2f} of the plan's; see the stop_scale column)", highlight=False)
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

def _plot(args: argparse.Namespace, console: Console) -> int:
    from bench import analysis, plots, store
    from bench.runner import writable_directory

    path = args.results or store.newest(RESULTS_DIR)
    rows = store.read_any(path)
    if not len(rows):
        raise UsageError(f"{path} holds no result rows")
    rows = analysis.select_gpu(analysis.newest(rows), args.gpu)
    writable_directory(args.out, "--out")
    paths = plots.plot_results(rows, args.out, store.side_tables_any(path))
    if not paths:
        raise UsageError(f"{path} holds no experiment that bench can plot")
    for written in paths:
        console.print(f"wrote {written}", highlight=False)
    return 0


def _claims(args: argparse.Namespace, console: Console) -> int:
    import pandas as pd

    from bench import analysis, claims, store
    from bench.runner import Request

    needed = claims.needed_experiments()
    if args.results:
        rows = store.read_any(args.results)
        if not len(rows):
            raise UsageError(f"{args.results} holds no result rows")
        rows = analysis.newest(rows)
    else:
        rows = store.newest_rows(RESULTS_DIR, needed)
    rows = analysis.select_gpu(rows, args.gpu)

    def judged(rows: pd.DataFrame) -> list:  # each GPU that measured something a claim needs, with its rows
        return [(gpu, mine) for gpu, mine in analysis.by_gpu(rows)
                if len(claims.missing_experiments(mine)) < len(needed)]

    missing = claims.missing_experiments(rows)
    if len(judged(rows)) <= 1 and missing:
        console.print(f"measuring what the results lack: {', '.join(missing)}")
        outcome = _run(Request(missing, out=args.out, device=args.device, command="python -m bench claims"), console)
        if outcome.interrupted:
            return _exit_status(outcome)
        rows = pd.concat([rows, store.read(outcome.path)], ignore_index=True)
    groups = judged(rows)
    for gpu, mine in groups:
        console.print(f"[bold]CUDA claims against measurement on {gpu}[/bold]", highlight=False)
        for _, line in claims.table(mine).iterrows():  # one block per claim: readable at any terminal width
            console.print(f"\n[bold]{escape(line['claim'])}[/bold]: {claims.LABELS[line['verdict']].upper()}",
                          highlight=False)
            console.print(f"  docs say: {line['docs say']} ({line['source']})", highlight=False, soft_wrap=True,
                          markup=False)
            console.print(f"  measured: {line['measured']}", highlight=False, soft_wrap=True, markup=False)
        console.print()
    return 0


def _compare(args: argparse.Namespace, console: Console) -> int:
    from rich import box
    from rich.text import Text

    from bench import compare, store

    old, new = store.read_any(args.old), store.read_any(args.new)
    for path, rows in ((args.old, old), (args.new, new)):
        if not len(rows):
            raise UsageError(f"{path} holds no result rows")
    result = compare.compare(old, new, gpu=args.gpu)
    if not len(result.table):
        raise UsageError(f"{args.old} and {args.new} have no configuration in common")
    for warning in result.warnings:
        console.print(Text.assemble(("warning: ", "yellow"), warning))
    console.print(Text("What changed", style="bold"))
    headlines = Table.grid(padding=(0, 1, 0, 0))  # a bullet column: wrapped lines keep their indent
    for line in result.headlines:
        headlines.add_row("  -", Text(line))
    console.print(headlines if result.headlines else "  nothing beyond noise")
    table = result.table
    shown = table if args.all else table[table["verdict"] != "same"]
    for name, group in shown.groupby("experiment", sort=False):
        units = set(group["unit"])
        unit = f" {units.pop()}" if len(units) == 1 else ""
        listing = Table(title=f"{name}: {len(group)} of {(table['experiment'] == name).sum()} configurations",
                        title_justify="left", box=box.SIMPLE_HEAD, highlight=False)
        if result.several_gpus:
            listing.add_column("GPU")
        listing.add_column("configuration", ratio=1)
        listing.add_column(f"old{unit}", justify="right")
        listing.add_column(f"new{unit}", justify="right")
        listing.add_column("verdict")
        for _, line in group.iterrows():
            if line["verdict"] == "changed":
                judged = line["change"]
            elif line["verdict"] == "same" or not math.isfinite(line["ratio"]):
                judged = line["verdict"]
            else:
                judged = f"{line['verdict']} {line['ratio'] - 1:+.1%}"
            values = [compare.number(line["old"]), compare.number(line["new"])]
            if not unit:
                values = [f"{value} {line['unit']}" if value else "" for value in values]
            listing.add_row(*([line["gpu"]] if result.several_gpus else []), line["configuration"], *values, judged)
        console.print(listing)
    counts = result.counts()
    same = counts.pop("same", 0)
    listed = "" if args.all else " (not listed; --all lists every configuration)"
    console.print(", ".join([*(f"{count} {verdict}" for verdict, count in counts.items()), f"{same} same{listed}"]),
                  highlight=False)
    if args.fail_above is not None:
        failing = result.slower_than(args.fail_above)
        if len(failing):
            console.print(f"{len(failing)} configurations slower by more than {args.fail_above:g}%: failing",
                          highlight=False)
            return 1
    return 0


def _report(args: argparse.Namespace, console: Console) -> int:
    import pandas as pd

    from bench import analysis, report, store
    from bench.runner import writable_directory

    sources = args.results or [RESULTS_DIR]
    if args.out.is_dir():
        raise UsageError(f"--out: {args.out} is a directory; name the HTML file to write")
    frames = [store.read_any(source) for source in sources]
    for source, frame in zip(sources, frames):
        if not len(frame):
            raise UsageError(f"{source} holds no result rows")
    rows = analysis.select_gpu(pd.concat(frames, ignore_index=True), args.gpu)
    tables: dict = {}
    for source in sources:
        for name, table in store.side_tables_any(source).items():
            tables[name] = pd.concat([tables[name], table], ignore_index=True) if name in tables else table
    writable_directory(args.out.parent, "--out")
    names = ", ".join(str(source) for source in sources)
    written = report.write(rows, tables, args.out, source=names if len(sources) < 4 else f"{len(sources)} sources")
    console.print(f"wrote {written}", highlight=False)
    return 0


def _probe(args: argparse.Namespace, console: Console) -> int:
    import importlib

    module_name, colon, function_name = args.target.partition(":")
    if not colon or not module_name or not function_name:
        raise UsageError(f"probe: {args.target!r} is not MODULE:FUNCTION (e.g. mypkg.train:step)")
    sys.path.insert(0, "")  # the current directory, as `python -m` does for the user's own modules
    try:
        function = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as error:
        raise UsageError(f"probe: cannot load {args.target}: {error}") from None
    if not callable(function):
        raise UsageError(f"probe: {args.target} is not callable")
    from bench.probe import probe
    from bench.runner import gpu_environment, use_device

    environment = gpu_environment(args.device)
    use_device(args.device)
    result = probe(function, stream=None if args.stream == "default" else 2, spin_ms=args.spin_ms)
    console.print(f"{args.target} on {environment.gpu_name}: {result}", highlight=False, soft_wrap=True)
    return 0


def _env(args: argparse.Namespace, console: Console) -> int:
    from bench.runner import gpu_environment

    environment = gpu_environment(args.device)
    table = Table(title="bench environment", show_header=False)
    for key, value in environment.as_dict().items():
        table.add_row(key, format_size(value) if key.endswith("bytes") else str(value))
    console.print(table)
    return 0


def main(argv: list[str] | None = None) -> int:
    console = Console()
    try:
        args = _parser().parse_args(argv)
        result = args.handler(args, console)
        return result if isinstance(result, int) else _exit_status(result)
    except UsageError as error:
        print(f"bench: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130
