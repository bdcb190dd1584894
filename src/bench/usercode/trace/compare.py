"""Two traces compared (``bench compare OLD.parquet NEW.parquet`` of two ``bench trace --save`` files): what changed,
target by target, in the makespan, the efficiency, the shares of copying and of communication hidden behind compute,
the idle time, the pageable copies' cost and the time of each kernel name. The analysis side: pandas and the results
files only.

Each target's newest trace on each side is compared, and a number's change is flagged only beyond the spread of the
traced runs each trace keeps: ``same`` (equal, or the two sides' runs overlap), ``worse`` or ``better`` (every run of
one side beyond every run of the other), ``unclear`` (a side keeps fewer than two runs) or ``changed`` (a side lacks
the number). The rules: docs/trace.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from bench.analysis import selection
from bench.analysis.compare import ENVIRONMENT_COLUMNS
from bench.platform.errors import ResultsError, UsageError
from bench.platform.vocabulary import Word

TABLE = "trace"  # the table name bench.usercode.trace.files writes
HEADLINES_PER_TARGET = 8


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
            Measure("pageable cost", "pageable_cost_ms", "pageable_cost_runs_ms"),
            Measure("communication hidden", "comm_hidden", "comm_hidden_runs", share=True))
KERNEL_RUNS = "name_runs_ms"
NEEDED = {"target", "traced_at", "op", "name", "start_ms", "end_ms"}  # the columns a comparison reads of every file


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
        lines = [f"{line.target}: {line.measure}: {change_text(line)}" for line in self.lines
                 if line.verdict == Verdict.CHANGED]
        for target in dict.fromkeys(line.target for line in self.lines):
            moved = [line for line in self.lines if line.target == target
                     and line.verdict in (Verdict.WORSE, Verdict.BETTER)]
            moved.sort(key=lambda line: (line.measure.startswith("kernel "), -abs(line.percent)))
            lines += [f"{target}: {line.measure} {line.verdict}, {change_text(line)}"
                      for line in moved[:HEADLINES_PER_TARGET]]
            if len(moved) > HEADLINES_PER_TARGET:
                lines.append(f"{target}: {len(moved) - HEADLINES_PER_TARGET} more numbers worse or better beyond "
                             "the runs' spread")
        return lines


def is_trace(path: Path) -> bool:
    """Whether ``path`` is a results file of table ``trace`` (``bench trace --save``)."""
    from bench.results import store

    if not Path(path).is_file():
        return False
    try:
        return store.read_metadata(path).get("table") == TABLE
    except ResultsError:
        return False


def read(path: Path) -> pd.DataFrame:
    """The rows of a trace file; ResultsError (one line) for anything else."""
    from bench.results import store

    if not is_trace(path):
        raise ResultsError(f"{path} is not a trace file (bench trace --save writes them); compare a trace with a "
                           "trace")
    rows = store.read_table(path)
    if not len(rows):
        raise ResultsError(f"{path} holds no trace rows")
    missing = sorted(NEEDED - set(rows.columns))
    if missing:
        raise ResultsError(f"{path} is a trace file without the columns {', '.join(missing)}; bench trace --save "
                           "writes them")
    return rows


def compare(old: pd.DataFrame, new: pd.DataFrame, gpu: str | None = None) -> TraceComparison:
    """Each target both sides traced, its newest trace on each side (of GPU ``gpu`` only: a UUID or its start, a
    name, a hostname), number by number."""
    sides = {}
    for side, rows in (("old", old), ("new", new)):
        try:
            sides[side] = _newest(selection.select_gpu(rows, gpu))
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
        gpus = tuple(selection.gpus(rows)[0] for rows in (before, after))
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


def newest(rows: pd.DataFrame, gpu: str | None = None) -> dict[str, pd.DataFrame]:
    """Each target's rows of its newest trace, of GPU ``gpu`` only (see :func:`compare`)."""
    return _newest(selection.select_gpu(rows, gpu))


def _newest(rows: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Each target's rows of its newest trace (the latest ``traced_at``; of a tie, the first GPU's, unless the trace
    is one of several GPUs: a merged trace's rows name each rank's GPU)."""
    found = {}
    for target, mine in rows.groupby(rows["target"].astype(str), sort=False):
        newest = mine[mine["traced_at"].astype(str) == mine["traced_at"].astype(str).max()]
        first = selection.gpus(newest)[0]
        several = "gpus" in newest and (pd.to_numeric(newest["gpus"], errors="coerce") > 1).any()
        found[target] = selection.rows_of(newest, first) if (first.uuid or first.host) and not several else newest
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


def value_text(line: Line, value: float | None) -> str:
    """A value as ``line`` states its values and runs: '6.254' ms, '81.5%' a share (:func:`decimals`)."""
    if value is None:
        return ""
    return f"{value:.{decimals(line)}{'%' if line.share else 'f'}}"


def decimals(line: Line) -> int:
    """3 (ms; a share's percent: 1), or more where fewer would print a worse or better line's two sides' runs as
    touching, which reads as overlapping: as written, every run of one side lies beyond every run of the other."""
    least = 1 if line.share else 3
    if line.verdict not in (Verdict.WORSE, Verdict.BETTER):
        return least
    below, above = sorted((line.old_runs, line.new_runs), key=max)
    kind = "%" if line.share else "f"
    for digits in range(least, least + 6):
        if f"{max(below):.{digits}{kind}}" != f"{min(above):.{digits}{kind}}":
            return digits
    return least + 6


def spread_text(line: Line, runs: tuple[float, ...]) -> str:
    if not runs:
        return ""
    return f"{value_text(line, min(runs))}–{value_text(line, max(runs))}"


def change_text(line: Line) -> str:
    """'6.254 → 7.100 ms (+13.5%; runs 6.180–6.400 → 6.950–7.310)', 'only in the new trace (0.250 ms)'."""
    unit = "" if line.share else " ms"
    if line.old is None or line.new is None:
        side, value = ("new", line.new) if line.old is None else ("old", line.old)
        return f"only in the {side} trace ({value_text(line, value)}{unit})"
    runs = (f"; runs {spread_text(line, line.old_runs)} → {spread_text(line, line.new_runs)}"
            if line.old_runs and line.new_runs else "")
    return f"{value_text(line, line.old)} → {value_text(line, line.new)}{unit} ({size_text(line)}{runs})"


def size_text(line: Line) -> str:
    """'+13.5%', '-40.0 points' (as many decimals as its runs), '+0.250 ms' (a time from none); a change never
    reads as none."""
    if line.share:
        return f"{line.percent:+.{_nonzero(line.percent, decimals(line))}f} points"
    if not math.isfinite(line.percent):
        return f"{line.new - line.old:+.3f} ms"
    return f"{line.percent:+.{_nonzero(line.percent, 1)}f}%"


def _nonzero(value: float, digits: int) -> int:
    """``digits``, or more (up to 6) where ``value``, not zero, would read as zero."""
    while digits < 6 and value and not float(f"{value:.{digits}f}"):
        digits += 1
    return digits
