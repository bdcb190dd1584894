"""A trace read back from its results file (``bench trace --save``), to merge it with other ranks' traces
(:mod:`bench.usercode.trace.merge`) and show, save or export the whole.

The rows keep the described run's records (their GPU, stream, times from the run's origin on CUPTI's clock), the
idle gaps with the call each followed, the host waits, and for each record the call that made it (its interval,
correlation id and line). From those each GPU's figures are computed again, as the tracing process computed them;
its bound and the pinned references of its pageable copies are read as saved. Not kept in the file: the driver calls
that neither made a record nor waited 50 µs, the untraced runs' host times (so no overhead), a line's source text.
A results file is untrusted input: a value that is not what its column says is a :class:`ResultsError`.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pandas as pd

from bench.platform.errors import ResultsError
from bench.usercode.activity import Activity, HostCall, Op
from bench.usercode.stacks import Frame
from bench.usercode.trace.assemble import described, pageable_of, waits_of
from bench.usercode.trace.files import KERNEL_RUNS, RUNS, TABLE
from bench.usercode.trace.model import GpuFigures, Provenance, RunFigures, Runs
from bench.usercode.trace.overlap import Gap, one_gpu
from bench.usercode.trace.result import TraceResult

RECORDS = tuple(str(op) for op in Op)
TERMS = ("compute", "copies", "D2D")  # the bound's terms


def load(path) -> TraceResult:
    """The one trace a ``trace`` results file holds. ResultsError (one line) for another file, a file of several
    traces, or one saved before bench kept the run's clock."""
    rows = _rows(Path(path))
    try:
        return _result(rows)
    except (TypeError, ValueError, KeyError, OverflowError) as error:
        raise ResultsError(f"{path}: a trace row cannot be read: {type(error).__name__}: {error}") from None


def _rows(path: Path) -> pd.DataFrame:
    from bench.results import store

    if not path.is_file():
        raise ResultsError(f"{path} is not a file" if path.exists() else f"{path}: no such file")
    if store.read_metadata(path).get("table") != TABLE:
        raise ResultsError(f"{path} is not a trace file (bench trace --save writes them)")
    rows = store.read_table(path)
    if not len(rows) or not {"target", "traced_at", "op", "start_ms", "end_ms"} <= set(rows.columns):
        raise ResultsError(f"{path} holds no trace rows")
    traces = rows[["target", "traced_at"]].astype(str).drop_duplicates()
    if len(traces) > 1:
        raise ResultsError(f"{path} holds {len(traces)} traces: give files of one trace each")
    if "origin_ns" not in rows or rows["origin_ns"].isna().all():
        raise ResultsError(f"{path} was saved before bench kept each trace's clock (origin_ns): it cannot be read "
                           "back")
    return rows.reset_index(drop=True)


def _number(value) -> float | None:
    """A cell as a float; None for every kind of missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)


def _whole(value, default: int | None = 0) -> int | None:
    number = _number(value)
    return default if number is None else int(number)


def _text(value) -> str:
    return "" if value is None else str(value)


def _frames(line: str) -> tuple[Frame, ...]:
    """The frames of a saved ``FILE:LINE``: one frame of the user's, no source read."""
    if not line:
        return ()
    file, _, number = line.rpartition(":")
    return (Frame(file, int(number), "", ""),) if number.isdigit() and file else (Frame(line, 0, "", ""),)


class _Reader:
    """One trace's rows (plain values) turned back into records, on CUPTI's clock."""

    def __init__(self, rows: list[dict]) -> None:
        self.origin = next(_whole(row["origin_ns"]) for row in rows if _number(row.get("origin_ns")) is not None)
        ranks = {_whole(row.get("rank"), None) for row in rows} - {None}
        self.rank = next(iter(ranks)) if len(ranks) == 1 else None
        self.several = len(ranks) > 1  # a merged file: each record keeps its rank
        self.calls: dict[tuple, HostCall] = {}

    def ns(self, ms) -> int:
        return self.origin + round(float(ms) * 1e6)

    def rank_of(self, row: dict) -> int | None:
        """A row's rank: each record keeps its own in a merged file; one rank's trace names it once."""
        return _whole(row.get("rank"), None) if self.several else None

    def call(self, row: dict) -> HostCall | None:
        """The call a row names (the one that made it, or that the host was in), once per call."""
        name = _text(row.get("call"))
        if not name or _number(row.get("call_start_ms")) is None or _number(row.get("call_end_ms")) is None:
            return None
        rank, correlation = self.rank_of(row), _whole(row.get("correlation"))
        key = (rank, correlation, name, self.ns(row["call_start_ms"]), self.ns(row["call_end_ms"]))
        if key not in self.calls:
            self.calls[key] = HostCall(name, key[3], key[4], correlation, _frames(_text(row.get("line"))), rank)
        return self.calls[key]

    def activity(self, row: dict) -> Activity:
        return Activity(Op(str(row["op"])), _whole(row.get("stream")), self.ns(row["start_ms"]),
                        self.ns(row["end_ms"]), _whole(row.get("bytes")), _text(row.get("host_memory")),
                        _text(row.get("name")), _whole(row.get("correlation")), _whole(row.get("device")),
                        self.rank_of(row))


def _result(frame: pd.DataFrame) -> TraceResult:
    from bench.results.store import records

    rows = records(frame)
    reader = _Reader(rows)
    activities, gaps = [], []
    for row in rows:
        op = str(row["op"])
        if op in RECORDS:
            activities.append(reader.activity(row))
            reader.call(row)
        elif op == "idle":
            gaps.append(Gap(reader.ns(row["start_ms"]), reader.ns(row["end_ms"]), reader.call(row),
                            _whole(row.get("device"))))
        elif op == "wait":
            reader.call(row)
    calls, first = list(reader.calls.values()), rows[0]
    pinned = {(str(row["op"]), _whole(row.get("bytes"))): _number(row.get("pinned_ms")) for row in rows
              if _number(row.get("pinned_ms")) is not None}
    per_run = _per_run(rows)
    return described(
        activities, calls, _gpus(rows, activities, gaps, reader, "gpu_bound_ms" in frame),
        bound_terms={term: _number(first.get(f"bound_{term}_ms")) for term in TERMS
                     if _number(first.get(f"bound_{term}_ms")) is not None},
        copy_engines=_whole(first.get("copy_engines"), None),
        pageable=pageable_of(activities, calls, lambda op, nbytes: (pinned.get((str(op), nbytes), math.nan), "saved")),
        waits=waits_of(calls, sources=False),
        runs=Runs([run.makespan_ms for run in per_run] or [_number(first.get("makespan_ms")) or 0.0], per_run=per_run),
        provenance=Provenance(_text(first["target"]), reader.rank, environments=_environments(rows, reader)))


def _gpus(rows: list[dict], activities: list[Activity], gaps: list[Gap], reader: _Reader,
          kept: bool) -> dict[int, GpuFigures]:
    """Each GPU's figures, computed again from its records, with its gaps and its bound as saved (``kept``: the file
    has each GPU's bound; an older file's one GPU has the whole's)."""
    found = {}
    for device in sorted({activity.device for activity in activities}):
        mine = [row for row in rows if _whole(row.get("device"), None) == device] if kept else rows
        overlap = one_gpu([a for a in activities if a.device == device], [], device)
        overlap = dataclasses.replace(overlap, gaps=[gap for gap in gaps if gap.device == device])
        bound = next((_number(row.get("gpu_bound_ms" if kept else "bound_ms")) for row in mine
                      if _number(row.get("gpu_bound_ms" if kept else "bound_ms")) is not None), None)
        rank = next((_whole(row.get("rank"), None) for row in mine if _number(row.get("rank")) is not None), None)
        found[device] = GpuFigures(device, overlap, bound, rank)
    return found


def _per_run(rows: list[dict]) -> list[RunFigures]:
    """Every traced run's headline numbers, from the ``*_runs`` columns (none where the file keeps none)."""
    columns = {figure: _spread(rows[0].get(column)) for column, figure in RUNS.items()}
    count = len(columns["makespan_ms"])
    if not count or any(len(values) not in (0, count) for values in columns.values()):
        return []
    kernel_runs = {_text(row.get("name")): _spread(row.get(KERNEL_RUNS)) for row in rows
                   if str(row["op"]) == "kernel"}

    def at(figure: str, index: int):
        values = columns[figure]
        return values[index] if values else None

    return [RunFigures(at("makespan_ms", i), at("efficiency", i), at("hidden", i), at("idle_ms", i) or 0.0,
                       at("pageable_cost_ms", i) or 0.0,
                       {name: runs[i] for name, runs in kernel_runs.items() if len(runs) == count and runs[i] is not None},
                       at("comm_hidden", i)) for i in range(count)]


def _spread(value) -> list[float | None]:
    """A ``*_runs`` cell as numbers (None where a run had none); [] where the file keeps none."""
    if not isinstance(value, list):
        return []
    return [_number(item) for item in value]


def _environments(rows: list[dict], reader: _Reader) -> dict[int | None, dict]:
    """Each rank's environment (GPU, driver, host, library versions), from its first row."""
    from bench.results.schema import environment_columns

    names = [column.name for column in environment_columns()]
    found: dict[int | None, dict] = {}
    for row in rows:
        rank = reader.rank_of(row) if reader.several else reader.rank
        if rank not in found and (rank is not None or not reader.several):
            found[rank] = {name: row[name] for name in names if name in row}
    return found
