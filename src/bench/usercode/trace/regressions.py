"""What got worse in a trace against an earlier one, named by line and stream (``bench trace --baseline``, and
``bench compare`` of two trace files): the analysis side, pandas and the traces' rows only.

Of each target both traces hold (each side's newest trace): a share (copies, efficiency, communication) judged worse
beyond both traces' runs (:func:`bench.usercode.trace.compare.compare`); more host waits in one driver call at one
file; a copy of a file, direction and size that became pageable; more idle gaps after a host wait in one driver call
at one file; two streams whose kernels ran at once and no longer do. Waits, copies and gaps match by file and call,
not line. More: docs/trace.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from bench.usercode.trace.compare import Verdict, compare, newest, value_text
from bench.platform.vocabulary import Word

SHARES = ("copies hidden", "efficiency", "communication hidden")  # the measures whose worsening fails a gate
NEEDED = {"op", "line", "call", "host_memory", "bytes", "stream", "start_ms", "end_ms"}  # what the keys read
COPIES = ("H2D", "D2H")


class Kind(Word):
    SHARE = "share"
    WAIT = "host wait"
    PAGEABLE = "pageable copy"
    IDLE = "idle after a wait"
    SERIALIZED = "streams serialize"


@dataclass(frozen=True)
class Regression:
    """One thing that got worse: where (``FILE:LINE`` of the newer trace, "" where none is known) and on which
    streams (none: the whole trace), in words."""

    target: str
    kind: Kind
    where: str
    text: str
    streams: tuple[int, ...] = ()

    @property
    def file(self) -> str:
        return self.where.rpartition(":")[0] if self.where else ""

    @property
    def line(self) -> int:
        number = self.where.rpartition(":")[2]
        return int(number) if number.isdigit() else 0


def regressions(old: pd.DataFrame, new: pd.DataFrame, gpu: str | None = None) -> list[Regression]:
    """Every regression of each target the two traces' rows hold (see the module docstring)."""
    found = [Regression(line.target, Kind.SHARE, "", f"{line.measure} fell beyond both traces' runs: "
                        f"{value_text(line, line.old)} → {value_text(line, line.new)}")
             for line in compare(old, new, gpu).lines if line.verdict == Verdict.WORSE and line.measure in SHARES]
    before, after = newest(old, gpu), newest(new, gpu)
    for target in (target for target in after if target in before):
        old_rows, new_rows = before[target], after[target]
        if not NEEDED <= set(old_rows) & set(new_rows):  # a file bench did not write whole: no keys to match by
            continue
        found += _more(target, Kind.WAIT, _waits(old_rows), _waits(new_rows), ("wait", "waits"))
        found += _more(target, Kind.IDLE, _idle(old_rows), _idle(new_rows),
                       ("idle gap after a wait", "idle gaps after a wait"))
        found += _pageable(target, old_rows, new_rows)
        found += _serialized(target, old_rows, new_rows)
    return found


def _file(line: str) -> str:
    return line.rpartition(":")[0] if ":" in line else line


def _cell(value: object) -> str:
    """A cell as a key's text, alike from a file and from memory: '' for a missing one (None, NA, NaN), a whole
    number without a decimal point."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _keyed(rows: pd.DataFrame, *columns: str) -> dict[tuple, list[str]]:
    """The rows' lines, by (the file of their line, then ``columns``), in the order they ran."""
    keyed: dict[tuple, list[str]] = {}
    for row in rows.sort_values("start_ms").to_dict("records"):
        line = _cell(row.get("line"))
        keyed.setdefault((_file(line), *(_cell(row.get(column)) for column in columns)), []).append(line)
    return keyed


def _waits(rows: pd.DataFrame) -> dict[tuple, list[str]]:
    return _keyed(rows[rows["op"] == "wait"], "call", "rank")


def _idle(rows: pd.DataFrame) -> dict[tuple, list[str]]:
    gaps = rows[(rows["op"] == "idle") & rows["call"].map(_cell).astype(bool)]
    return _keyed(gaps, "call", "rank")


def _more(target: str, kind: Kind, before: dict, after: dict, what: tuple[str, str]) -> list[Regression]:
    """A regression per (file, call, rank) with more rows after than before, at its first line after."""
    found = []
    for (file, call, rank), lines in after.items():
        had = len(before.get((file, call, rank), ()))
        if len(lines) > had:
            where = next((line for line in lines if line), "")
            of_rank = f" (rank {rank})" if rank else ""
            found.append(Regression(target, kind, where, f"{len(lines)} {what[len(lines) != 1]} in {call or 'a call'} "
                                                         f"at {file or 'an unknown line'}{of_rank}, {had} before"))
    return found


def _pageable(target: str, before: pd.DataFrame, after: pd.DataFrame) -> list[Regression]:
    def pageable(rows: pd.DataFrame) -> dict[tuple, list[str]]:
        copies = rows[rows["op"].isin(COPIES) & (rows["host_memory"] == "pageable")]
        return _keyed(copies, "op", "bytes")

    had = pageable(before)
    found = []
    for (file, op, size), lines in pageable(after).items():
        if (file, op, size) in had:
            continue
        sized = f" of {int(size):,} bytes" if size.isdigit() else ""
        found.append(Regression(target, Kind.PAGEABLE, next((line for line in lines if line), ""),
                                f"{len(lines)} × {op}{sized} from pageable memory at {file or 'an unknown line'}, "
                                "pinned before"))
    return found


def _overlapping(rows: pd.DataFrame) -> tuple[set[tuple], set[tuple]]:
    """The streams that ran kernels, each as (rank, device, stream), and the pairs of streams of one GPU of one rank
    whose kernels ran at once."""
    kernels = rows[rows["op"] == "kernel"]
    spans: dict[tuple, list[tuple[float, float]]] = {}
    for row in kernels.to_dict("records"):
        if _cell(row.get("start_ms")) and _cell(row.get("end_ms")) and _cell(row.get("stream")):
            key = (_cell(row.get("rank")), _cell(row.get("device")), int(float(row["stream"])))
            spans.setdefault(key, []).append((float(row["start_ms"]), float(row["end_ms"])))
    streams = sorted(spans)
    pairs = {(first, second) for index, first in enumerate(streams) for second in streams[index + 1:]
             if first[:2] == second[:2] and _meet(sorted(spans[first]), sorted(spans[second]))}
    return set(spans), pairs


def _meet(first: list[tuple[float, float]], second: list[tuple[float, float]]) -> bool:
    """Whether an interval of ``first`` and one of ``second`` (each sorted by start) overlap: one pass over both."""
    at, other = 0, 0
    while at < len(first) and other < len(second):
        (start, end), (other_start, other_end) = first[at], second[other]
        if max(start, other_start) < min(end, other_end):
            return True
        if end <= other_end:
            at += 1
        else:
            other += 1
    return False


def _serialized(target: str, before: pd.DataFrame, after: pd.DataFrame) -> list[Regression]:
    _, overlapped = _overlapping(before)
    streams, overlapping = _overlapping(after)
    found = []
    for first, second in sorted(overlapped):
        if {first, second} <= streams and (first, second) not in overlapping:
            rank, device = first[:2]
            where = "".join(part for part in (f" of GPU {device}" if device else "", f" (rank {rank})" if rank else ""))
            found.append(Regression(target, Kind.SERIALIZED, "", f"the kernels of streams {first[2]} and {second[2]}"
                                                                 f"{where} ran at once before and no longer do",
                                    (first[2], second[2])))
    return found
