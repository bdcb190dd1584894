"""``plot``, ``claims``, ``compare`` and ``report``: read results files (anywhere, no GPU needed) and show them;
``claims --measure`` runs what the results lack. Their text, JSON and Markdown: :mod:`bench.analysis.documents`."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

import pandas as pd
from rich.console import Console

from bench import report
from bench.analysis import claims, noise, plots, selection
from bench.analysis.results import Results
from bench.results import store, writes
from bench.platform.arguments import require_gpu
from bench.cli import measuring, streams
from bench.cli.options import RESULTS_DIR, unreadable, warn
from bench.analysis.documents import CLAIMS, COMPARISONS, Asked
from bench.platform.errors import UsageError
from bench.analysis.escape import terminal
from bench.experiments import registry
from bench.report import figures
from bench.report.bar import DelayedBar
from bench.sweep.plan import Request
from bench.timing.phases import phase
from bench.usercode.tools import saved
from bench.usercode.trace.compare import is_trace
from bench.usercode.trace.compare_text import compared
from bench.views import in_order


def plot_command(args: argparse.Namespace, console: Console) -> int:
    writes.claim(args.out, writes.writer("plot", "--out"), args.force, [args.results or RESULTS_DIR])
    experiments = registry()
    schema = store.suite_schema(experiments)
    with DelayedBar(streams.console(stderr=True)) as bar:  # on a terminal, once it has taken 2 s
        with phase("reading the results"):
            if args.results:
                path, rows = args.results, store.read_any(args.results, schema, unreadable(args))
            else:
                path, rows = store.read_newest(RESULTS_DIR, schema, unreadable(args))
            if not len(rows):
                raise UsageError(f"{path} holds no result rows")
            rows = selection.select_gpu(selection.newest(rows, experiments), args.gpu)
            tables = store.side_tables_any(path, unreadable(args))
        with phase("drawing and writing the figures"):
            paths = plots.plot_results(rows, args.out, in_order(experiments), tables, force=args.force,
                                       progress=bar.drawn)
    if not paths:
        raise UsageError(f"{path} holds no experiment that bench can plot")
    for written in paths:
        console.print(terminal(f"wrote {written}"), highlight=False, markup=False)
    return 0


def claims_command(args: argparse.Namespace, console: Console) -> int:
    for option, given in (("--out", args.out), ("--device", args.device)):
        if given is not None and not args.measure:
            raise UsageError(f"{option}: claims measures only with --measure; add --measure, or leave out {option}")
    if not args.results and not args.measure and not RESULTS_DIR.is_dir():
        raise UsageError(f"no {RESULTS_DIR}/ here: name a results file or directory, or measure what the claims need "
                         "with claims --measure")
    needed = claims.needed_experiments()
    experiments = registry()
    schema = store.suite_schema(experiments)
    if args.results:
        rows = store.read_any(args.results, schema, unreadable(args))
        if not len(rows):
            raise UsageError(f"{args.results} holds no result rows")
        rows = selection.newest(rows, experiments)
    else:
        rows = store.newest_rows(RESULTS_DIR, schema, needed, unreadable(args))
    rows = selection.select_gpu(rows, args.gpu)

    def judged(rows: pd.DataFrame) -> list:  # each GPU that measured something a claim needs, with its rows
        return [(gpu, mine) for gpu, mine in selection.by_gpu(rows)
                if len(claims.missing_experiments(mine)) < len(needed)]

    missing = claims.missing_experiments(rows)
    if missing and args.measure and len(judged(rows)) <= 1:
        progress = console if args.format == "text" else streams.console(stderr=True)  # stdout is the document's
        writes.claim(args.out or RESULTS_DIR, writes.writer("claims", "--out"))  # and a GPU, before a word of it
        require_gpu("claims --measure")
        progress.print(f"measuring what the results lack: {', '.join(missing)}")
        outcome = measuring.run(Request(missing, out=args.out or RESULTS_DIR, device=args.device or 0,
                               command="python -m bench claims --measure"), progress)
        if outcome.interrupted:
            return measuring.exit_status(outcome)
        rows = pd.concat([rows, store.read(outcome.path, schema)], ignore_index=True)
        missing = claims.missing_experiments(rows)
    elif missing and args.measure:
        warn([f"--measure measures for one GPU; the results hold {len(judged(rows))}: choose one with --gpu"])
    elif missing:
        again = shlex.join(["python", "-m", "bench", "claims", *([str(args.results)] if args.results else []),
                            "--measure"])
        warn([f"the results lack {', '.join(missing)} (or a default sweep's configurations of them): the claims "
               f"that need them show as not measured; measure them on this machine's GPU with: {again}"])
    asked = Results(rows, experiments, in_order(experiments))
    groups = [(str(gpu), asked.claims(mine)) for gpu, mine in judged(rows)] or [(None, asked.claims(rows))]
    CLAIMS[args.format](groups, missing, console)
    return 0


def compare_command(args: argparse.Namespace, console: Console) -> int:
    from bench.usercode.trace.kineto import is_profiler_trace

    if any(is_trace(path) or is_profiler_trace(path) for path in (args.old, args.new)):  # bench's or a profiler's
        from bench.usercode.trace.profiler import trace_rows

        output, warnings, failing = compared(args.old, args.new, gpu=args.gpu, fail_above=args.fail_above,
                                             listed_all=args.all, form=args.format, rows_of=trace_rows)
        warn(warnings)
        print(output)
        return 1 if failing else 0
    for path in args.spread_from or []:  # read only where two machines of one kind are compared: checked now
        if not path.is_dir():
            try:
                store.read_metadata(path)
            except store.ResultsError as error:
                raise UsageError(f"--spread-from: {error}") from None
    experiments = registry()
    schema = store.suite_schema(experiments)
    old, new = store.read_any(args.old, schema, unreadable(args)), store.read_any(args.new, schema, unreadable(args))
    for path, rows in ((args.old, old), (args.new, new)):
        if not len(rows):
            raise UsageError(f"{path} holds no result rows")
    views = in_order(experiments)
    result = Results(old, experiments, views).compare(Results(new, experiments, views), gpu=args.gpu,
                                                      record=_spread_record(args, old, new, schema))
    if not len(result.table):
        raise UsageError(f"{args.old} and {args.new} have no configuration in common")
    warn(result.warnings)
    failing = len(result.slower_than(args.fail_above)) if args.fail_above is not None else 0
    shown = result.table if args.all else result.table[result.table["verdict"] != "same"]
    asked = Asked(args.old, args.new, listed_all=args.all, fail_above=args.fail_above, failing=failing)
    COMPARISONS[args.format](result, shown, asked, console)
    return 1 if failing else 0


def _spread_record(args: argparse.Namespace, old, new, schema):
    """The rows of --spread-from (default results/, where it exists) on the GPU kinds both sides hold on different
    machines; None when there are none, which reads nothing."""
    kinds = noise.kinds_across_machines(old, new)
    if args.spread_from is not None:
        paths = args.spread_from
    else:
        paths = [RESULTS_DIR] if RESULTS_DIR.is_dir() else []
    if not kinds or not paths:
        return None
    frames = [store.read_any(path, schema, unreadable(args)) for path in paths]
    frames = [rows[rows["gpu_name"].isin(kinds)] for rows in frames if "gpu_name" in rows]
    return pd.concat(frames, ignore_index=True) if frames else None


def made_report(args: argparse.Namespace, sources: list[Path]) -> tuple[bytes, bool]:
    """Read the ``sources`` and write the report to --out: its bytes, and whether a file was passed over with a
    warning (such a report is not kept: the next run warns again)."""
    experiments = registry()
    figures.warm_up()  # the figures' workers get ready while the results are read
    warned = []
    skipped = unreadable(args)
    on_unreadable = None if skipped is None else lambda error: (warned.append(error), skipped(error))
    with DelayedBar(streams.console(stderr=True)) as bar:  # on a terminal, once it has taken 2 s
        with phase("reading the results"):
            frames = [store.read_any(source, store.suite_schema(experiments), on_unreadable) for source in sources]
            for source, frame in zip(sources, frames):
                if not len(frame):
                    raise UsageError(f"{source} holds no result rows")
            rows = selection.select_gpu(pd.concat(frames, ignore_index=True), args.gpu)
            tables: dict = {}
            for source in sources:
                for name, table in store.side_tables_any(source, on_unreadable).items():
                    tables[name] = pd.concat([tables[name], table], ignore_index=True) if name in tables else table
            chosen = selection.gpus(rows) if args.gpu else None  # --gpu: the tools' results of its GPUs only
            found = {tool.name: _saved(sources, tool.table, chosen, on_unreadable) for tool in saved()}
        bar.doing("laying out the report")
        names = ", ".join(str(source) for source in sources)
        document = report.render(rows, tables, experiments,
                                 source=names if len(sources) < 4 else f"{len(sources)} sources", tools=found,
                                 progress=bar.figures).encode("utf-8")
    writes.write_bytes(args.out, document)
    return document, bool(warned)


def _saved(sources: list[Path], table: str, chosen: list[selection.Gpu] | None,
           on_unreadable: store.OnUnreadable) -> pd.DataFrame | None:
    """The rows of table ``table`` that a tool saved under the ``sources`` directories (``_<table>/``): of the
    ``chosen`` GPUs only, where --gpu chose some; None where no source is a directory."""
    found = [store.named_tables(source, table, on_unreadable) for source in sources if Path(source).is_dir()]
    rows = pd.concat(found, ignore_index=True) if found else None
    if chosen is None or rows is None or not len(rows):
        return rows
    return selection.rows_of(rows, *chosen)
