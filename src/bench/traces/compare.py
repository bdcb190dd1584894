"""Two traces compared (``bench compare OLD.parquet NEW.parquet`` of two ``bench trace --save`` files): what changed,
target by target, in the makespan, the efficiency, the share of copying hidden behind compute, the idle time, the
pageable copies' cost and the time of each kernel name. The analysis side: pandas and the results files only.

Each target's newest trace on each side is compared (a file may hold several targets; ``--gpu`` picks one GPU's). A
trace keeps every traced run's numbers (the ``*_runs`` columns); a number's change is flagged only beyond their
spread:

- ``same``: the two values are equal, or the two sides' runs overlap (the lowest run of one side is at most the
  highest of the other);
- ``worse`` or ``better``: every run of one side lies beyond every run of the other (more time, or a smaller share of
  the bound or of the copying hidden, is worse);
- ``unclear``: a side keeps fewer than two runs (a ``tracing()`` block, or a file written before bench kept them);
- ``changed``: a side lacks the number (a kernel name only one trace ran, copies only one side made).

A change is the relative change of a time, in percent, and the difference of a share, in percentage points.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from bench import analysis
from bench.compare import ENVIRONMENT_COLUMNS
from bench.errors import ResultsError, UsageError
from bench.vocabulary import Word

TABLE = "trace"  # the table name bench.traces.files writes
HEADLINES_PER_TARGET = 8
NAME_SHOWN = 72  # a kernel's name in the tables is cut to this many characters


class Verdict(Word):
    """What a number of a trace did from the old trace to the new one."""

    WORSE = "worse"
    BETTER = "better"
    CHANGED = "changed"
    UNCLEAR = "unclear"
    SAME = "same"


@dataclass(frozen=True)
class Measure:
    """A headline number of a trace: its column, the column of every run's, and whether it is a time (ms) or a share
    (0 to 1, more is better)."""

    label: str
    column: str
    runs: str
    share: bool = False


MEASURES = (Measure("makespan", "makespan_ms", "makespan_runs_ms"),
            Measure("efficiency", "efficiency", "efficiency_runs", share=True),
            Measure("copies hidden", "hidden", "hidden_runs", share=True),
            Measure("idle", "idle_ms", "idle_runs_ms"),
            Measure("pageable cost", "pageable_cost_ms", "pageable_cost_runs_ms"))
KERNEL_RUNS = "name_runs_ms"


@dataclass(frozen=True)
class Line:
    """One number of one target, old against new (None: that side lacks it), with each side's runs."""

    target: str
    gpu: str
    measure: str
    share: bool
    old: float | None
    new: float | None
    old_runs: tuple[float, ...]
    new_runs: tuple[float, ...]
    verdict: Verdict

    @property
    def change(self) -> float | None:
        """A time's relative change (+0.1: 10% more; inf from nothing), a share's difference; None without both."""
        if self.old is None or self.new is None:
            return None
        if self.share:
            return self.new - self.old
        if self.old == 0:
            return 0.0 if self.new == 0 else math.copysign(math.inf, self.new)
        return self.new / self.old - 1

    @property
    def percent(self) -> float | None:
        """The change in percent (a share: percentage points)."""
        return None if self.change is None else 100 * self.change

    def worse_by(self) -> float:
        """How much worse, in percent (a share: percentage points); 0 unless judged worse."""
        if self.verdict != Verdict.WORSE:
            return 0.0
        return -self.percent if self.share else self.percent


@dataclass
class TraceComparison:
    lines: list[Line]
    warnings: list[str] = field(default_factory=list)

    def worse_than(self, percent: float) -> list[Line]:
        """The numbers judged worse by more than ``percent`` (a share: percentage points)."""
        return [line for line in self.lines if line.worse_by() > percent]

    def counts(self) -> dict[str, int]:
        """How many numbers got each verdict (verdicts none got are left out)."""
        found = [line.verdict for line in self.lines]
        return {str(verdict): found.count(verdict) for verdict in Verdict if verdict in found}

    @property
    def headlines(self) -> list[str]:
        """Numbers only one side has, then those worse or better (a few per target): the headline numbers, then the
        kernels, each the largest change first."""
        lines = [f"{line.target}: {line.measure}: {_change_text(line)}" for line in self.lines
                 if line.verdict == Verdict.CHANGED]
        for target in dict.fromkeys(line.target for line in self.lines):
            moved = [line for line in self.lines if line.target == target
                     and line.verdict in (Verdict.WORSE, Verdict.BETTER)]
            moved.sort(key=lambda line: (line.measure.startswith("kernel "), -abs(line.percent)))
            lines += [f"{target}: {line.measure} {line.verdict}, {_change_text(line)}"
                      for line in moved[:HEADLINES_PER_TARGET]]
            if len(moved) > HEADLINES_PER_TARGET:
                lines.append(f"{target}: {len(moved) - HEADLINES_PER_TARGET} more numbers worse or better beyond "
                             "the runs' spread")
        return lines


def is_trace(path: Path) -> bool:
    """Whether ``path`` is a results file of table ``trace`` (``bench trace --save``)."""
    from bench import store

    if not Path(path).is_file():
        return False
    try:
        return store.read_metadata(path).get("table") == TABLE
    except ResultsError:
        return False


def read(path: Path) -> pd.DataFrame:
    """The rows of a trace file; ResultsError (one line) for anything else."""
    from bench import store

    if not is_trace(path):
        raise ResultsError(f"{path} is not a trace file (bench trace --save writes them); compare a trace with a "
                           "trace")
    rows = store.read_table(path)
    if not len(rows):
        raise ResultsError(f"{path} holds no trace rows")
    return rows


def compare(old: pd.DataFrame, new: pd.DataFrame, gpu: str | None = None) -> TraceComparison:
    """Each target both sides traced, its newest trace on each side (of GPU ``gpu`` only: a UUID or its start, a
    name, a hostname), number by number."""
    sides = {}
    for side, rows in (("old", old), ("new", new)):
        try:
            sides[side] = _newest(analysis.select_gpu(rows, gpu))
        except UsageError as error:
            raise UsageError(f"{side} trace: {error}") from None
    warnings = [f"{target} is only in the {side} trace; not compared" for side, other in (("old", "new"),
                                                                                          ("new", "old"))
                for target in sides[side] if target not in sides[other]]
    lines, pairs = [], {}
    for target, before in sides["old"].items():
        if target not in sides["new"]:
            continue
        after = sides["new"][target]
        gpus = tuple(analysis.gpus(rows)[0] for rows in (before, after))
        pairs.setdefault(gpus, (before, after))
        label = gpus[1].short if gpus[0] == gpus[1] else f"{gpus[0].short} → {gpus[1].short}"
        lines += _lines(target, label, before, after)
    for (before_gpu, after_gpu), (before, after) in pairs.items():
        if before_gpu != after_gpu:
            warnings.append(f"different GPUs: old {before_gpu}, new {after_gpu}")
        warnings += _environment_changes(before, after)
    for side, rows in (("old", old), ("new", new)):
        if "makespan_runs_ms" not in rows or rows["makespan_runs_ms"].isna().all():
            warnings.append(f"the {side} trace keeps no numbers of each run (written before bench kept them): its "
                            "changes are unclear")
    return TraceComparison(lines, list(dict.fromkeys(warnings)))


def _newest(rows: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Each target's rows of its newest trace (the latest ``traced_at``; of a tie, the first GPU's)."""
    found = {}
    for target, mine in rows.groupby(rows["target"].astype(str), sort=False):
        newest = mine[mine["traced_at"].astype(str) == mine["traced_at"].astype(str).max()]
        first = analysis.gpus(newest)[0]
        found[target] = analysis.rows_of(newest, first) if first.uuid or first.host else newest
    return found


def _environment_changes(old: pd.DataFrame, new: pd.DataFrame) -> list[str]:
    changes = []
    for column in ENVIRONMENT_COLUMNS:
        before, after = (str(rows[column].iloc[0]) if column in rows and pd.notna(rows[column].iloc[0]) else "?"
                         for rows in (old, new))
        if before != after:
            changes.append(f"{column} differs: {before} → {after}")
    return changes


def _number(value) -> float | None:
    """A cell as a float, None for every kind of missing."""
    if value is None or value is pd.NA:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _runs(value) -> tuple[float, ...]:
    """A ``*_runs`` cell: its numbers (missing ones left out); () where the file keeps none."""
    if value is None or value is pd.NA or isinstance(value, float):
        return ()
    return tuple(number for number in map(_number, np.asarray(value, dtype=object)) if number is not None)


def _first(rows: pd.DataFrame, column: str):
    return rows[column].iloc[0] if column in rows and len(rows) else None


def _lines(target: str, gpu: str, old: pd.DataFrame, new: pd.DataFrame) -> list[Line]:
    """The headline numbers, then each kernel name's time (the largest first)."""
    found = []
    for measure in MEASURES:
        values = [_number(_first(rows, measure.column)) for rows in (old, new)]
        if values == [None, None]:
            continue
        runs = [_runs(_first(rows, measure.runs)) for rows in (old, new)]
        found.append(_line(target, gpu, f"{measure.label}{'' if measure.share else ' ms'}", measure.share, values,
                           runs))
    kernels = [_kernels(rows) for rows in (old, new)]
    names = sorted(set(kernels[0]) | set(kernels[1]),
                   key=lambda name: (-max(side.get(name, ((0.0,), ()))[0][0] for side in kernels), name))
    for name in names:
        sides = [side.get(name) for side in kernels]
        values = [side[0][0] if side else None for side in sides]
        runs = [side[1] if side else () for side in sides]
        found.append(_line(target, gpu, f"kernel {name} ms", False, values, runs))
    return found


def _kernels(rows: pd.DataFrame) -> dict[str, tuple[tuple[float], tuple[float, ...]]]:
    """Kernel name -> ((the time its kernels ran in the described run,), every run's)."""
    kernels = rows[rows["op"].astype(str) == "kernel"]
    found = {}
    for name, mine in kernels.groupby(kernels["name"].astype(str), sort=False):
        found[name] = ((float((mine["end_ms"] - mine["start_ms"]).sum()),), _runs(_first(mine, KERNEL_RUNS)))
    return found


def _line(target: str, gpu: str, measure: str, share: bool, values: list, runs: list) -> Line:
    old, new = values
    return Line(target, gpu, measure, share, old, new, runs[0], runs[1], judge(old, new, runs[0], runs[1], share))


def judge(old: float | None, new: float | None, old_runs: tuple[float, ...], new_runs: tuple[float, ...],
          share: bool = False) -> Verdict:
    """A number's verdict (see the module's docstring); a share is worse when it falls, a time when it grows."""
    if old is None or new is None:
        return Verdict.CHANGED
    if old == new:
        return Verdict.SAME
    if len(old_runs) < 2 or len(new_runs) < 2:
        return Verdict.UNCLEAR
    if max(min(old_runs), min(new_runs)) <= min(max(old_runs), max(new_runs)):
        return Verdict.SAME
    grew = min(new_runs) > max(old_runs)
    return Verdict.BETTER if grew == share else Verdict.WORSE


# --- output ----------------------------------------------------------------------------------------------------------

def _value(line: Line, value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:.1%}" if line.share else f"{value:.3f}"


def _spread(line: Line, runs: tuple[float, ...]) -> str:
    if not runs:
        return ""
    return f"{_value(line, min(runs))}–{_value(line, max(runs))}"


def _change_text(line: Line) -> str:
    """'6.254 → 7.100 ms (+13.5%; runs 6.180–6.400 → 6.950–7.310)', 'only in the new trace (0.250 ms)'."""
    unit = "" if line.share else " ms"
    if line.old is None or line.new is None:
        side, value = ("new", line.new) if line.old is None else ("old", line.old)
        return f"only in the {side} trace ({_value(line, value)}{unit})"
    runs = (f"; runs {_spread(line, line.old_runs)} → {_spread(line, line.new_runs)}"
            if line.old_runs and line.new_runs else "")
    return f"{_value(line, line.old)} → {_value(line, line.new)}{unit} ({_size(line)}{runs})"


def _size(line: Line) -> str:
    """'+13.5%', '-40.0 points', '+0.250 ms' (a time from none)."""
    if line.share:
        return f"{line.percent:+.1f} points"
    return f"{line.percent:+.1f}%" if math.isfinite(line.percent) else f"{line.new - line.old:+.3f} ms"


def _verdict_cell(line: Line) -> str:
    if line.verdict in (Verdict.WORSE, Verdict.BETTER):
        return f"{line.verdict} {_size(line)}"
    return str(line.verdict)


def _counts_line(result: TraceComparison, listed_all: bool) -> str:
    counts = result.counts()
    same = counts.pop("same", 0)
    listed = "" if listed_all else " (not listed; --all lists every number)"
    return ", ".join([*(f"{count} {verdict}" for verdict, count in counts.items()), f"{same} same{listed}"])


def _terminal(text: str) -> str:
    """A results file's text for a terminal: characters that are not printable written as escapes."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in str(text))


def _markdown(text: str) -> str:
    """A results file's text for a Markdown table cell."""
    text = _terminal(text)
    for plain, escaped in (("\\", "\\\\"), ("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|"), ("`", "'"),
                           ("*", "\\*"), ("_", "\\_")):
        text = text.replace(plain, escaped)
    return text


HEAD = ["number", "old", "new", "old runs", "new runs", "verdict"]


def _named(line: Line) -> str:
    """The number's name, a kernel's cut to :data:`NAME_SHOWN` characters (the JSON keeps it whole)."""
    name = line.measure
    return name if len(name) <= NAME_SHOWN else name[:NAME_SHOWN - 4] + "… ms"


def _cells(line: Line) -> list[str]:
    return [_named(line), _value(line, line.old), _value(line, line.new), _spread(line, line.old_runs),
            _spread(line, line.new_runs), _verdict_cell(line)]


def _groups(lines: list[Line]) -> dict[tuple[str, str], list[Line]]:
    groups: dict[tuple[str, str], list[Line]] = {}
    for line in lines:
        groups.setdefault((line.target, line.gpu), []).append(line)
    return groups


def text(result: TraceComparison, shown: list[Line], listed_all: bool) -> str:
    """For a terminal: the headlines, then a table per target of the numbers ``shown``."""
    parts = ["What changed between the traces"]
    parts += [f"  - {_terminal(line)}" for line in result.headlines] or ["  nothing beyond the runs' spread"]
    for (target, gpu), lines in _groups(shown).items():
        rows = [HEAD, *(list(map(_terminal, _cells(line))) for line in lines)]
        widths = [max(len(row[index]) for row in rows) for index in range(len(HEAD))]
        parts += ["", _terminal(f"{target} on {gpu}")]
        parts += ["  " + "  ".join(cell.rjust(width) if 0 < index < 5 else cell.ljust(width)
                                   for index, (cell, width) in enumerate(zip(row, widths))).rstrip() for row in rows]
    return "\n".join([*parts, "", _counts_line(result, listed_all)])


def markdown(result: TraceComparison, shown: list[Line], listed_all: bool) -> str:
    """For a pull request: the headlines, then a table per target."""
    parts = ["## What changed between the traces", ""]
    parts += [f"- {_markdown(line)}" for line in result.headlines] or ["nothing beyond the runs' spread"]
    for (target, gpu), lines in _groups(shown).items():
        parts += ["", f"### {_markdown(target)} on {_markdown(gpu)}", ""]
        align = ["---", "---:", "---:", "---:", "---:", "---"]
        parts += ["| " + " | ".join(row) + " |" for row in (HEAD, align, *([_markdown(cell) for cell in _cells(line)]
                                                                        for line in lines))]
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
             form: str) -> tuple[str, list[str], int]:
    """``bench compare`` of two trace files: the output in ``form`` (text, json or markdown), the warnings, and how
    many numbers are worse by more than ``fail_above`` percent (points for a share). UsageError (one line) for a
    file that is not a trace, or traces without a target in common."""
    result = compare(read(old), read(new), gpu)
    if not result.lines:
        raise UsageError(f"{old} and {new} have no target in common")
    failing = len(result.worse_than(fail_above)) if fail_above is not None else 0
    shown = result.lines if listed_all else [line for line in result.lines if line.verdict != Verdict.SAME]
    failed = f"{failing} numbers worse by more than {fail_above:g}%: failing" if failing else ""
    if form == "json":
        found = document(result, shown, old, new)
        if fail_above is not None:
            found["fail_above"] = {"percent": fail_above, "failing": failing}
        return json.dumps(found, indent=2, ensure_ascii=False, allow_nan=False), result.warnings, failing
    if form == "markdown":
        output = markdown(result, shown, listed_all) + (f"\n\n**{failed}**" if failed else "")
    else:
        output = text(result, shown, listed_all) + (f"\n{failed}" if failed else "")
    return output, result.warnings, failing
