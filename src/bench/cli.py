"""``python -m bench {sweep,plot,claims,compare,report,env}``.

A user's mistake (bad argument, no GPU, unreadable results file) is one line on stderr and exit status 2, and
nothing is written. A sweep interrupted with Ctrl-C (SIGINT) or SIGTERM keeps its finished rows, says where it
stopped and exits 130 (143 for SIGTERM); ``--resume FILE`` finishes it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.units import format_size, parse_sizes

RESULTS_DIR = Path("results")
PLOTS_DIR = Path("plots")


class UsageError(Exception):
    """A mistake in how bench was called; its message is the one line the user sees."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print usage and a second line; we want one line
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m bench", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="{sweep,plot,claims,compare,report,env}")

    sweep = commands.add_parser("sweep", help="run the experiments and write results/<timestamp>-<gpu>.parquet")
    sweep.add_argument("--quick", action="store_true", help="fewer sizes and samples: a smoke test in seconds")
    sweep.add_argument("--experiments", help="comma-separated experiment names (default: all)")
    sweep.add_argument("--sizes", help="transfer sizes, e.g. 4K,1M,1G or 4K:1G for every power of two between")
    sweep.add_argument("--axis", action="append", default=[], metavar="NAME=V1,V2",
                       help="replace an axis's values, e.g. --axis host_memory=pinned --axis streams=1,8 (repeatable)")
    sweep.add_argument("--out", type=Path, default=RESULTS_DIR, help="results directory or .parquet file")
    sweep.add_argument("--device", type=int, default=0, help="CUDA device ordinal (default 0)")
    sweep.add_argument("--resume", type=Path, metavar="FILE",
                       help="an interrupted sweep's results file: run what it lacks and add it to the same file")
    sweep.set_defaults(handler=_sweep)

    plot = commands.add_parser("plot", help="turn a results file into figures under plots/")
    plot.add_argument("results", nargs="?", type=Path,
                      help="results file or directory of them (default: the newest file in results/)")
    plot.add_argument("--out", type=Path, default=PLOTS_DIR, help="directory for the figures (default plots/)")
    plot.set_defaults(handler=_plot)

    claims = commands.add_parser("claims", help="CUDA folklore against measurement (runs what the results lack)")
    claims.add_argument("results", nargs="?", type=Path,
                        help="results file (default: the newest file in results/ holding each needed experiment)")
    claims.add_argument("--out", type=Path, default=RESULTS_DIR, help="where to write results it has to measure")
    claims.add_argument("--device", type=int, default=0, help="CUDA device ordinal (default 0)")
    claims.set_defaults(handler=_claims)

    compare = commands.add_parser("compare", help="compare two results files configuration by configuration")
    compare.add_argument("old", type=Path, help="results file or directory: the baseline")
    compare.add_argument("new", type=Path, help="results file or directory: the candidate")
    compare.add_argument("--fail-above", type=float, metavar="PERCENT",
                         help="exit 1 when a configuration is slower by more than PERCENT (a CI gate)")
    compare.set_defaults(handler=_compare)

    report = commands.add_parser("report", help="one self-contained HTML report (figures embedded)")
    report.add_argument("results", nargs="*", type=Path,
                        help="results files or directories (default: the files in results/); of several runs of an "
                             "experiment on one GPU, the newest is shown")
    report.add_argument("--out", type=Path, default=PLOTS_DIR / "report.html", help="the HTML file to write")
    report.set_defaults(handler=_report)

    env = commands.add_parser("env", help="print the GPU, driver, CUDA, PCIe and library environment")
    env.add_argument("--device", type=int, default=0, help="CUDA device ordinal (default 0)")
    env.set_defaults(handler=_env)
    return parser


def _writable_target(out: Path) -> Path:
    """The results file's directory must be writable (it is created at the first save if missing)."""
    return _writable_directory(out.parent if out.suffix == ".parquet" else out, "--out")


def _writable_directory(directory: Path, option: str) -> Path:
    existing = directory
    while not existing.exists():
        existing = existing.parent
    try:
        with tempfile.TemporaryFile(dir=existing):  # a real probe: permission bits do not tell root's story
            pass
    except OSError as error:
        raise UsageError(f"{option}: cannot write to {directory}/ ({existing}: {error.strerror})") from None
    return directory


def _use_gpu(device: int):
    """Select the device for CuPy and Numba; return its environment. UsageError when there is none."""
    from bench import env

    reason = env.no_gpu_reason()
    if reason:
        raise UsageError(reason)
    from cupy.cuda import runtime

    count = runtime.getDeviceCount()
    if not 0 <= device < count:
        raise UsageError(f"--device {device}: {count} GPU(s) visible, ordinals 0..{count - 1}")
    runtime.setDevice(device)
    from numba import cuda

    cuda.select_device(device)
    return env.collect(device)


def _host_memory_available() -> int:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _check_memory(plans, gpu_name: str) -> None:
    from cupy.cuda import runtime

    problem = memory_problem(plans, gpu_name, runtime.memGetInfo()[0], _host_memory_available())
    if problem:
        raise UsageError(problem)


def memory_problem(plans, gpu_name: str, device_free: int, host_available: int) -> str | None:
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


def _sweep(args: argparse.Namespace, console: Console) -> int:
    from bench import sweep
    from bench.experiments import registry

    names = [name.strip() for name in args.experiments.split(",")] if args.experiments else list(registry())
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
    try:
        plans = sweep.plan(names, quick=args.quick, sizes=sizes, axes=axes)
    except ValueError as error:
        raise UsageError(f"--experiments/--axis: {error}") from None
    outcome = _run_plans(plans, args.out, args.device, args.quick, console, resume=args.resume)
    return _interrupted_status(outcome)


_SIGNALS: list[int] = []


def _on_sigterm(number, frame):
    _SIGNALS.append(number)
    raise KeyboardInterrupt


def _interrupted_status(outcome) -> int:
    if not outcome.interrupted:
        return 0
    return 128 + (_SIGNALS[-1] if _SIGNALS else 2)


def _run_plans(plans, out: Path, device: int, quick: bool, console: Console, resume: Path | None = None):
    """Check the target and the GPU, run the plans into a new results file (or the resumed one), print the
    summary."""
    import signal

    from bench import env, store, sweep
    from bench.timing import StopRule, Timer

    previous, previous_tables = None, None
    if resume is not None:
        previous = store.read(resume)
        previous_tables = store.read_side_tables(resume)
        out = resume
    directory = _writable_target(out)
    environment = _use_gpu(device)
    if previous is not None and "gpu_uuid" in previous and len(previous):
        measured_on = set(previous["gpu_uuid"].dropna())
        if measured_on and measured_on != {environment.gpu_uuid}:
            raise UsageError(f"--resume: {resume} was measured on another GPU ({', '.join(sorted(measured_on))})")
        plans = sweep.without_done(plans, previous)
    _check_memory(plans, environment.gpu_name)
    started = datetime.now(timezone.utc)
    run_id = started.strftime("%Y%m%dT%H%M%SZ")
    slug = "".join(c if c.isalnum() else "-" for c in environment.gpu_name).strip("-")
    path = out if out.suffix == ".parquet" else directory / f"{run_id}-{slug}.parquet"
    rule = StopRule(min_samples=5, time_cap_s=0.1) if quick else StopRule()
    signal.signal(signal.SIGTERM, _on_sigterm)
    outcome = sweep.run(plans, Timer(rule), environment.as_dict(), path, run_id=run_id,
                        command=shlex.join(["python", "-m", "bench", *sys.argv[1:]]), console=console,
                        isolate=True, device=device, previous=previous, previous_tables=previous_tables,
                        monitor=env.monitor(environment.pci_bus_id))
    _print_summary(plans, outcome, console)
    return outcome


def _print_summary(plans, outcome, console: Console) -> None:
    import pandas as pd

    from bench.sweep import describe

    rows = pd.DataFrame(outcome.rows)
    for item in plans:
        mine = rows[rows["experiment"] == item.experiment.name] if len(rows) else rows
        if not len(mine):
            continue
        headline = item.experiment.headline(mine)
        table = Table(title=f"{item.experiment.name} on {mine.iloc[0]['gpu_name']}")
        for column in headline.columns:
            table.add_column(column, justify="right" if "GB/s" in column else "left")
        for values in headline.itertuples(index=False):
            table.add_row(*map(str, values))
        console.print(table)
        not_ok = mine[mine["status"] != "ok"]
        if len(not_ok):
            counts = ", ".join(f"{count} {status}" for status, count in not_ok["status"].value_counts().items())
            console.print(f"{item.experiment.name}: {len(mine) - len(not_ok)} ok, {counts}; the first:")
            for _, row in not_ok.head(3).iterrows():
                console.print(f"  {row['status']} {describe(item.experiment, row)}: {row['error']}")
    done = len(outcome.rows)
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
    if outcome.interrupted:
        console.print(f"interrupted during {outcome.stopped_in or 'the sweep'} after {done} of {outcome.planned} "
                      f"configurations; the file is complete up to there. Finish it with: python -m bench sweep "
                      f"<same options> --resume {outcome.path}")
    if outcome.path:
        console.print(f"{done} configurations written to {outcome.path}; plot with: python -m bench plot {outcome.path}")
    else:
        console.print("no configuration finished; nothing was written")


def _plot(args: argparse.Namespace, console: Console) -> int:
    from bench import plots, store

    path = args.results or store.newest(RESULTS_DIR)
    rows = store.latest_runs(store.read_any(path))
    paths = plots.plot_results(rows, args.out, store.read_side_tables_any(path))
    if not paths:
        raise UsageError(f"{path} holds no experiment that bench can plot")
    for written in paths:
        console.print(f"wrote {written}")
    return 0


def _claims(args: argparse.Namespace, console: Console) -> int:
    import pandas as pd

    from bench import claims, store, sweep

    needed = claims.needed_experiments()
    if args.results:
        rows = store.read(args.results)
    else:
        rows = store.newest_rows(RESULTS_DIR, needed)
    missing = claims.missing_experiments(rows)
    if missing:
        console.print(f"measuring what the results lack: {', '.join(missing)}")
        outcome = _run_plans(sweep.plan(missing), args.out, args.device, False, console)
        if outcome.interrupted:
            return _interrupted_status(outcome)
        rows = pd.concat([rows, pd.DataFrame(outcome.rows)], ignore_index=True)
    console.print("[bold]CUDA claims against measurement[/bold]")
    for _, line in claims.table(rows).iterrows():  # one block per claim: readable at any terminal width
        console.print(f"\n[bold]{line['claim']}[/bold]: {line['verdict'].upper()}", highlight=False)
        console.print(f"  docs say: {line['docs say']} ({line['source']})", highlight=False, soft_wrap=True)
        console.print(f"  measured: {line['measured']}", highlight=False, soft_wrap=True)
    return 0


def _compare(args: argparse.Namespace, console: Console) -> int:
    from bench import compare, store

    if args.fail_above is not None and args.fail_above < 0:
        raise UsageError("--fail-above: PERCENT must be zero or positive")
    result = compare.compare(store.read_any(args.old), store.read_any(args.new))
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
    if not len(result.table):
        raise UsageError(f"{args.old} and {args.new} have no timed configuration in common")
    shown = result.table[[column for column in result.table.columns if not column.startswith("_")]]
    table = Table(title=f"{args.new} against {args.old}")
    for column in shown.columns:
        table.add_column(column, justify="right" if column in ("old ms", "new ms", "new/old") else "left")
    for values in shown.itertuples(index=False):
        table.add_row(*map(str, values))
    console.print(table)
    counts = result.table["verdict"].value_counts()
    console.print(", ".join(f"{count} {verdict}" for verdict, count in counts.items()))
    if args.fail_above is not None:
        failing = result.slower_than(args.fail_above)
        if len(failing):
            console.print(f"{len(failing)} configurations slower by more than {args.fail_above:g}%: failing")
            return 1
    return 0


def _report(args: argparse.Namespace, console: Console) -> int:
    from bench import report, store

    import pandas as pd

    sources = args.results or store.top_level_files(RESULTS_DIR)
    if not sources:
        raise UsageError(f"no results files (*.parquet) in {RESULTS_DIR}/; run 'python -m bench sweep' first")
    rows = store.latest_runs(pd.concat([store.read_any(source) for source in sources], ignore_index=True))
    tables: dict = {}
    for source in sources:
        for name, table in store.read_side_tables_any(source).items():
            tables[name] = pd.concat([tables[name], table], ignore_index=True) if name in tables else table
    _writable_directory(args.out.parent, "--out")
    names = ", ".join(str(source) for source in sources)
    written = report.write(rows, tables, args.out, source=names if len(sources) < 4 else f"{len(sources)} files")
    console.print(f"wrote {written}")
    return 0


def _env(args: argparse.Namespace, console: Console) -> int:
    environment = _use_gpu(args.device)
    table = Table(title="bench environment", show_header=False)
    for key, value in environment.as_dict().items():
        table.add_row(key, format_size(value) if key.endswith("bytes") else str(value))
    console.print(table)
    return 0


def main(argv: list[str] | None = None) -> int:
    from bench.store import ResultsError

    console = Console()
    try:
        args = _parser().parse_args(argv)
        return args.handler(args, console)
    except (UsageError, ResultsError) as error:
        print(f"bench: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130
