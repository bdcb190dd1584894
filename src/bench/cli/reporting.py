"""``report``: one HTML file of results. A report already made of the same results files, by the same code and
libraries, is copied from the cache (:mod:`bench.platform.cache`) without reading a row; otherwise :mod:`.results` makes
it, and a report made without a warning is kept for the next time."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from bench.platform import cache
from bench.results import writes
from bench.cli.options import RESULTS_DIR
from bench.platform.errors import UsageError
from bench.analysis.escape import terminal
from bench.timing.phases import phase
from bench.usercode import tools


def report_command(args: argparse.Namespace, console: Console) -> int:
    sources = args.results or [RESULTS_DIR]
    if args.out.is_dir():
        raise UsageError(f"--out: {args.out} is a directory; name the HTML file to write")
    writes.claim(args.out, writes.writer("report", "--out"), args.force, sources)
    with phase("looking for the same report in the cache"):
        entry = _entry(sources, args)
        kept = cache.get(entry) if entry is not None else None
    if kept is not None:
        writes.write_bytes(args.out, kept)
    else:
        from bench.cli.results import made_report

        document, warned = made_report(args, sources)
        if entry is not None and not warned:
            cache.put(entry, document)
    console.print(terminal(f"wrote {args.out}"), highlight=False, markup=False)
    return 0


def _entry(sources: list[Path], args: argparse.Namespace) -> str | None:
    """The report's cache key: the sources as named, --gpu, the tools whose tables it reads, and every results file
    it may read, each one's path and bytes (a directory's at any depth; a file's side tables beside it); None where a
    source or one of those files cannot be read (the report itself says what is wrong)."""
    parts: list[str] = [repr([str(source) for source in sources]), repr(args.gpu), repr(tools.TOOLS)]
    try:
        for source in map(Path, sources):
            below = source if source.is_dir() else source.parent
            for path in _read_by_report(source):
                parts += [str(path.relative_to(below)), cache.file_digest(path)]
    except (OSError, ValueError):
        return None
    return cache.key("report", parts, cache.DRAWING)


def _read_by_report(source: Path) -> list[Path]:
    """The files the report of ``source`` may read: every ``.parquet`` under a directory; a file, its side tables
    (``_<name>/<file>`` beside it) and version 1's (``<stem>.<name>.parquet``)."""
    if source.is_dir():
        return sorted(path for path in source.rglob("*.parquet") if path.is_file())
    if not source.is_file():
        raise FileNotFoundError(source)
    beside = [*source.parent.glob(f"_*/{source.name}"), *source.parent.glob(f"{source.stem}.*.parquet")]
    return [source, *sorted(path for path in beside if path.is_file())]
