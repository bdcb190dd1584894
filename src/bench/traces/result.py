"""What :func:`bench.trace` found: :class:`TraceResult`, its numbers, rows and JSON."""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from bench.measure.activity import Activity, HostCall, Op
from bench.measure.waits import Frame, user_index
from bench.timing import shared
from bench.traces.overlap import LINK, Gap

WAIT_NS = 50_000  # a watched driver call this long is a host wait in the listing


def line_of_frames(frames: tuple[Frame, ...]) -> str:
    """'/u/train.py:12': the user's line of a call's frames ('' without frames)."""
    if not frames:
        return ""
    frame = frames[user_index(frames)]
    return f"{frame.file}:{frame.line}"


def source_of_frames(frames: tuple[Frame, ...]) -> str:
    return frames[user_index(frames)].source if frames else ""


def shown(line: str) -> str:
    """'docs/examples/step.py:22': a ``file:line`` as the text output shows it, the file relative to the current
    directory where it is below it (as ``bench syncs`` shows its lines); the JSON and the results file keep it whole."""
    file, colon, number = line.rpartition(":")
    if not colon or not os.path.isabs(file):
        return line
    with contextlib.suppress(ValueError):
        file = str(Path(file).relative_to(Path.cwd()))
    return f"{file}:{number}"


@dataclass(frozen=True)
class PageableCopies:
    """The pageable copies of one direction and size made at one line, against pinned memory."""

    op: Op
    bytes: int
    count: int
    ms: float  # their execution time, in all
    pinned_ms: float  # one pinned copy of the size on this GPU
    reference: str  # where pinned_ms comes from: "results" (the bandwidth experiment) or "measured"
    host_ms: float | None  # the host time of the driver calls that made them (None: traced without the calls)
    line: str

    @property
    def cost_ms(self) -> float:
        return self.ms - self.count * self.pinned_ms


@dataclass(frozen=True)
class HostWait:
    """The watched driver calls of one line that took :data:`WAIT_NS` or more."""

    line: str
    source: str
    call_names: str
    count: int
    ms: float


@dataclass(frozen=True)
class RunFigures:
    """One traced run's headline numbers: the traced runs spread over these, and a comparison of two traces flags a
    change only beyond that spread (:mod:`bench.traces.compare`)."""

    makespan_ms: float
    efficiency: float | None
    hidden: float | None
    idle_ms: float
    pageable_cost_ms: float
    kernel_ms: dict[str, float]  # the time the kernels of each name ran, in all


@dataclass
class TraceResult:
    """What :func:`bench.trace` found (times in ms; shares from 0 to 1; None where there is nothing to share)."""

    activities: list[Activity]  # of the described run, on CUPTI's clock (:meth:`table` starts them at 0)
    calls: list[HostCall]
    origin_ns: int
    makespans_ms: list[float]  # every traced run's
    makespan_ms: float
    busy_ms: dict[str, float]
    copy_ms: float
    hidden_ms: float
    duplex_ms: float
    concurrent_kernels_ms: float
    gaps: list[Gap]
    fill_ms: float
    drain_ms: float
    bound_ms: float | None
    bound_terms: dict[str, float]
    pageable: list[PageableCopies]
    waits: list[HostWait]
    copy_engines: int | None
    untraced_ms: list[float] = field(default_factory=list)  # host time of each untraced run
    traced_ms: list[float] = field(default_factory=list)
    target: str = ""
    per_run: list[RunFigures] = field(default_factory=list)  # every traced run's headline numbers, in run order
    libraries: dict[str, str] = field(default_factory=dict)  # the GPU libraries loaded as it ran: column -> version

    @property
    def hidden(self) -> float | None:
        return self.hidden_ms / self.copy_ms if self.copy_ms else None

    @property
    def efficiency(self) -> float | None:
        return self.bound_ms / self.makespan_ms if self.bound_ms is not None and self.makespan_ms else None

    @property
    def idle_ms(self) -> float:
        return sum(gap.ms for gap in self.gaps)

    @property
    def overhead(self) -> float | None:
        """The traced runs' median host time over the untraced ones', less one."""
        if not self.untraced_ms or not self.traced_ms:
            return None
        return statistics.median(self.traced_ms) / statistics.median(self.untraced_ms) - 1

    @property
    def pageable_cost_ms(self) -> float:
        return sum(group.cost_ms for group in self.pageable)

    def worst_copies(self, count: int = 3) -> list[tuple[Activity, float]]:
        """The H2D and D2H copies with the most time exposed (not hidden behind compute), with that time (ms)."""
        compute = [(a.start_ns, a.end_ns) for a in self.activities if a.op in (Op.KERNEL, Op.MEMSET)]
        exposed = [(a, (a.end_ns - a.start_ns - shared([(a.start_ns, a.end_ns)], compute)) / 1e6)
                   for a in self.activities if a.op in LINK]
        return sorted(exposed, key=lambda pair: -pair[1])[:count]

    def line_of(self, activity: Activity) -> str:
        """The line that enqueued ``activity`` (known for copies)."""
        made = self.made_by.get(activity.correlation)
        return line_of_frames(made.frames) if made else ""

    @functools.cached_property
    def made_by(self) -> dict[int, HostCall]:
        """The watched call that enqueued each record, by correlation id."""
        return {call.correlation: call for call in self.calls}

    def summary(self) -> dict:
        """The headline numbers, as the JSON output and the results file carry them."""
        return {"target": self.target, "makespan_ms": self.makespan_ms,
                "makespan_min_ms": min(self.makespans_ms, default=None),
                "makespan_max_ms": max(self.makespans_ms, default=None), "runs": len(self.makespans_ms),
                "bound_ms": self.bound_ms, "efficiency": self.efficiency, "fill_ms": self.fill_ms,
                "drain_ms": self.drain_ms, **{f"busy_{engine}_ms": ms for engine, ms in self.busy_ms.items()},
                "copy_ms": self.copy_ms, "hidden_ms": self.hidden_ms, "hidden": self.hidden,
                "duplex_ms": self.duplex_ms, "concurrent_kernels_ms": self.concurrent_kernels_ms,
                "idle_ms": self.idle_ms, "gaps": len(self.gaps),
                "gaps_after_waits": sum(gap.wait is not None for gap in self.gaps),
                "pageable_copies": sum(group.count for group in self.pageable),
                "pageable_cost_ms": self.pageable_cost_ms, "copy_engines": self.copy_engines,
                "overhead": self.overhead,
                "untraced_host_ms": statistics.median(self.untraced_ms) if self.untraced_ms else None,
                "traced_host_ms": statistics.median(self.traced_ms) if self.traced_ms else None,
                **{f"bound_{term}_ms": ms for term, ms in self.bound_terms.items()}}

    def table(self) -> list[dict]:
        """One row per kernel, copy and memset, per idle gap (``op`` idle, on stream -1, with the wait that caused
        it) and per host wait (``op`` wait, stream -2), times in ms from the run's first GPU start."""
        def ms(ns: int) -> float:
            return (ns - self.origin_ns) / 1e6

        made = self.made_by
        rows = [{"op": str(a.op), "stream": a.stream, "start_ms": ms(a.start_ns), "end_ms": ms(a.end_ns),
                 "bytes": a.bytes, "host_memory": a.host_memory, "name": a.name,
                 "call": made[a.correlation].call if a.correlation in made else "",
                 "line": line_of_frames(made[a.correlation].frames) if a.correlation in made else ""}
                for a in sorted(self.activities, key=lambda a: (a.start_ns, a.stream))]
        rows += [{"op": "idle", "stream": -1, "start_ms": ms(gap.start_ns), "end_ms": ms(gap.end_ns), "bytes": 0,
                  "host_memory": "", "name": "", "call": gap.wait.call if gap.wait else "",
                  "line": line_of_frames(gap.wait.frames) if gap.wait else ""} for gap in self.gaps]
        rows += [{"op": "wait", "stream": -2, "start_ms": ms(call.start_ns), "end_ms": ms(call.end_ns), "bytes": 0,
                  "host_memory": "", "name": "", "call": call.call, "line": line_of_frames(call.frames)}
                 for call in self.calls if call.end_ns - call.start_ns >= WAIT_NS]
        return rows

    def to_dict(self) -> dict:
        return {**self.summary(),
                "gaps_list": [{"start_ms": (gap.start_ns - self.origin_ns) / 1e6, "ms": gap.ms,
                               "call": gap.wait.call if gap.wait else None,
                               "line": line_of_frames(gap.wait.frames) if gap.wait else None} for gap in self.gaps],
                "pageable": [{"op": str(group.op), "bytes": group.bytes, "count": group.count, "ms": group.ms,
                              "pinned_ms": group.pinned_ms, "cost_ms": group.cost_ms, "host_ms": group.host_ms,
                              "reference": group.reference, "line": group.line} for group in self.pageable],
                "waits": [vars(wait) for wait in self.waits],
                "activities": self.table()}

    def to_json(self) -> str:
        return json.dumps(finite(self.to_dict()), indent=2, ensure_ascii=False)

    def to_perfetto(self, path) -> Path:
        """Write the described run's timeline to ``path``, a JSON file Perfetto (ui.perfetto.dev) and
        chrome://tracing open (:mod:`bench.traces.perfetto`)."""
        from bench.traces.perfetto import write

        return write(self, path)

    def __str__(self) -> str:
        from bench.traces.text import describe

        return "\n".join(describe(self))


def finite(value):
    """``value`` with every NaN and infinity, at any depth of its dicts and lists, None (JSON has neither)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [finite(item) for item in value]
    return value
