"""Two traces compared (:mod:`bench.usercode.trace.compare`) as ``bench compare`` prints them: text for a terminal,
Markdown for a pull request, JSON for CI, every text a results file carries escaped for where it lands. The analysis
side: it reads results files only."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from bench.analysis import escape
from bench.platform.errors import UsageError
from bench.usercode.trace.compare import (Line, TraceComparison, Verdict, compare, read, size_text, spread_text,
                                          value_text)
from bench.usercode.trace.regressions import regressions

NAME_SHOWN = 72  # a kernel's name in the tables is cut to this many characters
HEAD = ["number", "old", "new", "old runs", "new runs", "verdict"]


def _verdict_cell(line: Line) -> str:
    if line.verdict in (Verdict.WORSE, Verdict.BETTER):
        return f"{line.verdict} {size_text(line)}"
    return str(line.verdict)


def _counts_line(result: TraceComparison, listed_all: bool) -> str:
    counts = result.counts()
    same = counts.pop("same", 0)
    listed = "" if listed_all else " (not listed; --all lists every number)"
    return ", ".join([*(f"{count} {verdict}" for verdict, count in counts.items()), f"{same} same{listed}"])


def _named(line: Line) -> str:
    """The number's name, a kernel's cut to :data:`NAME_SHOWN` characters (the JSON keeps it whole)."""
    name = line.measure
    return name if len(name) <= NAME_SHOWN else name[:NAME_SHOWN - 4] + "… ms"


def _cells(line: Line) -> list[str]:
    return [_named(line), value_text(line, line.old), value_text(line, line.new), spread_text(line, line.old_runs),
            spread_text(line, line.new_runs), _verdict_cell(line)]


def _groups(lines: list[Line]) -> dict[tuple[str, str], list[Line]]:
    groups: dict[tuple[str, str], list[Line]] = {}
    for line in lines:
        groups.setdefault((line.target, line.gpu), []).append(line)
    return groups


def text(result: TraceComparison, shown: list[Line], listed_all: bool) -> str:
    """For a terminal: the headlines, then a table per target of the numbers ``shown``."""
    parts = ["What changed between the traces"]
    parts += [f"  - {escape.terminal(line)}" for line in result.headlines] or ["  nothing beyond the runs' spread"]
    for (target, gpu), lines in _groups(shown).items():
        rows = [HEAD, *(list(map(escape.terminal, _cells(line))) for line in lines)]
        widths = [max(len(row[index]) for row in rows) for index in range(len(HEAD))]
        parts += ["", escape.terminal(f"{target} on {gpu}")]
        parts += ["  " + "  ".join(cell.rjust(width) if 0 < index < 5 else cell.ljust(width)
                                   for index, (cell, width) in enumerate(zip(row, widths))).rstrip() for row in rows]
    return "\n".join([*parts, "", _counts_line(result, listed_all)])


def markdown(result: TraceComparison, shown: list[Line], listed_all: bool) -> str:
    """For a pull request: the headlines, then a table per target."""
    parts = ["## What changed between the traces", ""]
    parts += [f"- {escape.markdown(line)}" for line in result.headlines] or ["nothing beyond the runs' spread"]
    for (target, gpu), lines in _groups(shown).items():
        parts += ["", f"### {escape.markdown(target)} on {escape.markdown(gpu)}", ""]
        align = ["---", "---:", "---:", "---:", "---:", "---"]
        cells = [[escape.markdown(cell) for cell in _cells(line)] for line in lines]
        parts += ["| " + " | ".join(row) + " |" for row in (HEAD, align, *cells)]
    return "\n".join([*parts, "", _counts_line(result, listed_all)])


def document(result: TraceComparison, shown: list[Line], old: Path, new: Path) -> dict:
    """For CI: the warnings, headlines, counts and the numbers ``shown`` (a change in percent, a share's in points;
    null from nothing)."""
    numbers = [{"target": line.target, "gpu": line.gpu, "number": line.measure, "old": line.old, "new": line.new,
                "old_runs": list(line.old_runs), "new_runs": list(line.new_runs), "verdict": str(line.verdict),
                "change": line.percent if line.percent is not None and math.isfinite(line.percent) else None,
                "change_unit": "points" if line.share else "%"} for line in shown]
    return {"old": str(old), "new": str(new), "compared": "traces", "warnings": result.warnings,
            "headlines": result.headlines, "counts": result.counts(), "numbers": numbers}


def compared(old: Path, new: Path, *, gpu: str | None, fail_above: float | None, listed_all: bool,
             form: str, rows_of: Callable[[Path], pd.DataFrame] = read) -> tuple[str, list[str], int]:
    """``bench compare`` of two trace files: the output in ``form`` (text, json or markdown), the warnings, and how
    many numbers are worse by more than ``fail_above`` percent (points for a share). ``rows_of``: what reads a file's
    trace rows (a profiler's trace too). UsageError (one line) for a file that is not a trace, or traces without a
    target in common."""
    before, after = rows_of(old), rows_of(new)
    result = compare(before, after, gpu)
    if not result.lines:
        raise UsageError(f"{old} and {new} have no target in common")
    worse = regressions(before, after, gpu)
    failing = len(result.worse_than(fail_above)) if fail_above is not None else 0
    shown = result.lines if listed_all else [line for line in result.lines if line.verdict != Verdict.SAME]
    failed = f"{failing} numbers worse by more than {fail_above:g}%: failing" if failing else ""
    if form == "json":
        found = document(result, shown, old, new)
        found["regressions"] = [{"target": regression.target, "kind": str(regression.kind),
                                 "where": regression.where, "streams": list(regression.streams),
                                 "text": regression.text} for regression in worse]
        if fail_above is not None:
            found["fail_above"] = {"percent": fail_above, "failing": failing}
        return escape.json_text(found, indent=2, allow_nan=False), result.warnings, failing
    if form == "markdown":
        output = markdown(result, shown, listed_all) + (f"\n\n**{failed}**" if failed else "")
        if worse:
            output += "\n\n**What got worse, by line and stream:**\n\n" + "\n".join(
                f"- {escape.markdown(_regression(regression))}" for regression in worse)
    else:
        output = text(result, shown, listed_all) + (f"\n{failed}" if failed else "")
        if worse:
            output += "\nwhat got worse, by line and stream:\n" + "\n".join(
                f"  {escape.terminal(_regression(regression))}" for regression in worse)
    return output, result.warnings, failing


def _regression(regression) -> str:
    where = regression.where
    streams = f"streams {', '.join(map(str, regression.streams))}" if regression.streams else ""
    return f"{regression.target}: {regression.kind}: {regression.text}" + "".join(
        f" ({part})" for part in (where, streams) if part)
