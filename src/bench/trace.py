"""How much does my code overlap? ``bench.trace(fn)`` records what ``fn`` ran on the GPU with CUPTI
(:mod:`bench.measure.activity`) and tells, from the records' execution intervals:

- the makespan (first start to last end on the GPU) and the busy time of each engine: ``compute`` (kernels and
  memsets), ``H2D``, ``D2H`` and ``D2D`` copies;
- the copy time hidden behind compute: of the time an H2D or D2H copy ran, the share during which a kernel or memset
  ran too;
  the time both directions copied at once; the time two or more kernels ran at once;
- the GPU's idle gaps of :data:`GAP_NS` or more, each joined with the driver call the host was in when the GPU ran
  dry (the line that made it, from the call's Python stack), where there was one;
- the pageable copies, each against a pinned copy of its size on this GPU (the bandwidth experiment's result where
  the GPU has one, else measured);
- the bound: the least time the same work can take with perfect overlap, ``max(compute busy, the copies at pinned
  speed with both directions at once where there are two copy engines, D2D busy)``, the overlap experiment's rule
  (:mod:`bench.experiments.overlap`), fill and drain not in it; the efficiency is bound / makespan. ``fill_ms`` (until
  compute first ran) and ``drain_ms`` (after compute last ran) say what the pipeline's ends cost.

``fn`` runs once to warm up, then ``runs`` times without tracing and ``runs`` times traced, alternately: the traced run
of median makespan is the one described, and the host time of the traced runs against the untraced ones is the
tracing overhead. Event intervals are not used for overlap: a copy's event interval includes the time it waited for
its engine. :func:`tracing` records one run of a ``with`` block (the pytest helper ``assert_overlap`` uses it).
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import json
import math
import os
import statistics
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench.libraries import loaded_versions
from bench.measure.activity import COPIES, Activity, HostCall, Op, Recording, TraceUnavailable
from bench.measure.waits import Frame, user_index
from bench.timing import concurrent, gaps, length, shared, union
from bench.units import format_size

DEFAULT_RUNS = 5
GAP_NS = 10_000  # shorter idle stretches are launch latency, not a gap
JOIN_NS = 50_000  # a call that returned this soon before the GPU ran dry still counts as the one it waited in
WAIT_NS = 50_000  # a watched driver call this long is a host wait in the listing
TABLE = "trace"
LINK = (Op.H2D, Op.D2H)
ENGINES = ("compute", "H2D", "D2H", "D2D")

__all__ = ["DEFAULT_RUNS", "TraceResult", "TraceUnavailable", "trace", "tracing"]


def _line(frames: tuple[Frame, ...]) -> str:
    if not frames:
        return ""
    frame = frames[user_index(frames)]
    return f"{frame.file}:{frame.line}"


def shown(line: str) -> str:
    """'docs/examples/step.py:22': a ``file:line`` as the text output shows it, the file relative to the current
    directory where it is below it (as ``bench syncs`` shows its lines); the JSON and the results file keep it whole."""
    file, colon, number = line.rpartition(":")
    if not colon or not os.path.isabs(file):
        return line
    with contextlib.suppress(ValueError):
        file = str(Path(file).relative_to(Path.cwd()))
    return f"{file}:{number}"


def _source(frames: tuple[Frame, ...]) -> str:
    return frames[user_index(frames)].source if frames else ""


@dataclass(frozen=True)
class Gap:
    """A stretch with nothing running on the GPU (ns on CUPTI's clock) and the driver call the host was in when it
    began (None: the host was running Python or in a call bench does not watch)."""

    start_ns: int
    end_ns: int
    wait: HostCall | None

    @property
    def ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


@dataclass(frozen=True)
class Overlap:
    """One run's records, analysed: pure arithmetic over execution intervals."""

    start_ns: int
    end_ns: int
    busy_ns: dict[str, int]
    copy_ns: int  # H2D and D2H copies, their union
    hidden_ns: int  # of that, while compute ran
    duplex_ns: int  # H2D and D2H at once
    concurrent_kernels_ns: int
    gaps: list[Gap]
    fill_ns: int
    drain_ns: int

    @property
    def makespan_ns(self) -> int:
        return self.end_ns - self.start_ns


def overlap_of(activities: Sequence[Activity], calls: Sequence[HostCall]) -> Overlap:
    """The overlap arithmetic of one run (see the module docstring)."""
    if not activities:
        return Overlap(0, 0, dict.fromkeys(ENGINES, 0), 0, 0, 0, 0, [], 0, 0)
    spans = {engine: [] for engine in ENGINES}
    for activity in activities:
        engine = "compute" if activity.op in (Op.KERNEL, Op.MEMSET) else activity.op.value
        spans.setdefault(engine, []).append((activity.start_ns, activity.end_ns))
    start = min(activity.start_ns for activity in activities)
    end = max(activity.end_ns for activity in activities)
    link = spans["H2D"] + spans["D2H"]
    kernels = [(a.start_ns, a.end_ns) for a in activities if a.op == Op.KERNEL]
    compute = union(spans["compute"])
    idle = [gap for gap in gaps([(a.start_ns, a.end_ns) for a in activities]) if gap[1] - gap[0] >= GAP_NS]
    return Overlap(
        start, end, {engine: length(intervals) for engine, intervals in spans.items()},
        length(link), shared(link, compute), shared(spans["H2D"], spans["D2H"]), concurrent(kernels),
        [Gap(low, high, _waited_in(calls, low, high)) for low, high in idle],
        (compute[0][0] - start) if compute else 0, (end - compute[-1][1]) if compute else 0)


def _waited_in(calls: Sequence[HostCall], low: int, high: int) -> HostCall | None:
    """The watched call the host was in when the GPU ran dry at ``low`` (it returned before ``high``): the latest to
    return of those under way then."""
    under_way = [call for call in calls if call.start_ns <= low <= call.end_ns + JOIN_NS and call.end_ns <= high]
    return max(under_way, key=lambda call: call.end_ns, default=None)


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


@dataclass
class TraceResult:
    """What :func:`trace` found (times in ms; shares from 0 to 1; None where there is nothing to share)."""

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
        return _line(made.frames) if made else ""

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
                 "line": _line(made[a.correlation].frames) if a.correlation in made else ""}
                for a in sorted(self.activities, key=lambda a: (a.start_ns, a.stream))]
        rows += [{"op": "idle", "stream": -1, "start_ms": ms(gap.start_ns), "end_ms": ms(gap.end_ns), "bytes": 0,
                  "host_memory": "", "name": "", "call": gap.wait.call if gap.wait else "",
                  "line": _line(gap.wait.frames) if gap.wait else ""} for gap in self.gaps]
        rows += [{"op": "wait", "stream": -2, "start_ms": ms(call.start_ns), "end_ms": ms(call.end_ns), "bytes": 0,
                  "host_memory": "", "name": "", "call": call.call, "line": _line(call.frames)}
                 for call in self.calls if call.end_ns - call.start_ns >= WAIT_NS]
        return rows

    def to_dict(self) -> dict:
        return {**self.summary(),
                "gaps_list": [{"start_ms": (gap.start_ns - self.origin_ns) / 1e6, "ms": gap.ms,
                               "call": gap.wait.call if gap.wait else None,
                               "line": _line(gap.wait.frames) if gap.wait else None} for gap in self.gaps],
                "pageable": [{"op": str(group.op), "bytes": group.bytes, "count": group.count, "ms": group.ms,
                              "pinned_ms": group.pinned_ms, "cost_ms": group.cost_ms, "host_ms": group.host_ms,
                              "reference": group.reference, "line": group.line} for group in self.pageable],
                "waits": [vars(wait) for wait in self.waits],
                "activities": self.table()}

    def to_json(self) -> str:
        return json.dumps(_finite(self.to_dict()), indent=2, ensure_ascii=False)

    def __str__(self) -> str:
        return "\n".join(describe(self))


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def describe(result: TraceResult) -> list[str]:
    """The result in a few lines a person reads."""
    kernels = sum(a.op == Op.KERNEL for a in result.activities)
    copies = sum(a.op in COPIES for a in result.activities)
    streams = len({a.stream for a in result.activities})
    spread = (f" (runs {min(result.makespans_ms):.3f}–{max(result.makespans_ms):.3f})"
              if len(result.makespans_ms) > 1 else "")
    lines = [f"makespan {result.makespan_ms:.3f} ms{spread}: {kernels} kernels, {copies} copies on {streams} "
             f"stream{'s' * (streams != 1)}"]
    if result.efficiency is not None:
        terms = ", ".join(f"{term} {ms:.3f}" for term, ms in result.bound_terms.items())
        lines.append(f"runs at {result.efficiency:.0%} of what its copies and kernels allow: bound "
                     f"{result.bound_ms:.3f} ms ({terms}); fill {result.fill_ms:.3f} ms, "
                     f"drain {result.drain_ms:.3f} ms")
    busy = ", ".join(f"{engine} {ms:.3f}" for engine, ms in result.busy_ms.items() if ms)
    lines.append(f"busy ms: {busy or 'nothing ran'}")
    if result.hidden is not None:
        lines.append(f"copies hidden behind compute: {result.hidden:.0%} ({result.hidden_ms:.3f} of "
                     f"{result.copy_ms:.3f} ms); H2D and D2H at once {result.duplex_ms:.3f} ms; kernels at once "
                     f"{result.concurrent_kernels_ms:.3f} ms")
    if result.pageable:
        count = sum(group.count for group in result.pageable)
        lines.append(f"{count} pageable cop{'ies' if count != 1 else 'y'} cost {result.pageable_cost_ms:.3f} ms "
                     "against pinned memory:")
        for group in sorted(result.pageable, key=lambda group: -group.cost_ms):
            host = "" if group.host_ms is None else f"; host {group.host_ms:.3f} ms"
            lines.append(f"  {group.count} × {group.op} {format_size(group.bytes)}: {group.ms:.3f} ms, pinned "
                         f"{group.count * group.pinned_ms:.3f} ms ({group.reference}){host}"
                         f"{'  ' + shown(group.line) if group.line else ''}")
    waited = [gap for gap in result.gaps if gap.wait]
    lines.append(f"idle {result.idle_ms:.3f} ms in {len(result.gaps)} gap{'s' * (len(result.gaps) != 1)}"
                 + (f", {len(waited)} after a host wait:" if waited else ""))
    for gap in sorted(waited, key=lambda gap: -gap.ms)[:5]:
        where = shown(_line(gap.wait.frames))
        lines.append(f"  {gap.ms:.3f} ms after {gap.wait.call} ({gap.wait.ms:.3f} ms) at {where}")
    if result.waits:
        lines.append(f"host waits (driver calls of {WAIT_NS / 1000:g} µs or more):")
    for wait in result.waits[:5]:
        lines.append(f"  host waited {wait.ms:.3f} ms in {wait.count} × {wait.call_names} at {shown(wait.line)}")
    if result.overhead is not None:
        lines.append(f"tracing overhead: {result.overhead:+.1%} host time per run "
                     f"({statistics.median(result.traced_ms):.3f} traced vs "
                     f"{statistics.median(result.untraced_ms):.3f} ms)")
    return lines


def _waits(calls: Sequence[HostCall]) -> list[HostWait]:
    groups: dict[str, list[HostCall]] = {}
    for call in calls:
        if call.end_ns - call.start_ns >= WAIT_NS:
            groups.setdefault(_line(call.frames), []).append(call)
    waits = [HostWait(line, _source(group[0].frames), ", ".join(sorted({call.call for call in group})), len(group),
                      sum(call.ms for call in group)) for line, group in groups.items()]
    return sorted(waits, key=lambda wait: -wait.ms)


def _pageable(activities: Sequence[Activity], calls: Sequence[HostCall],
              pinned: Callable[[Op, int], tuple[float, str]]) -> list[PageableCopies]:
    made = {call.correlation: call for call in calls}
    groups: dict[tuple, list[Activity]] = {}
    for activity in activities:
        if activity.op in LINK and activity.host_memory == "pageable":
            call = made.get(activity.correlation)
            groups.setdefault((activity.op, activity.bytes, _line(call.frames) if call else ""), []).append(activity)
    found = []
    for (op, nbytes, line), group in groups.items():
        pinned_ms, reference = pinned(op, nbytes)
        host_ms = sum(made[a.correlation].ms for a in group if a.correlation in made) if calls else None
        found.append(PageableCopies(op, nbytes, len(group), sum((a.end_ns - a.start_ns) / 1e6 for a in group),
                                    pinned_ms, reference, host_ms, line))
    return found


def result_of(recordings: Sequence[Recording], *, copy_bound: Callable[[int, int], tuple[float, int]] | None,
              pinned: Callable[[Op, int], tuple[float, str]], untraced_ms: Sequence[float] = (),
              traced_ms: Sequence[float] = (), target: str = "") -> TraceResult:
    """The result from each traced run's recording: the run of median makespan described. ``copy_bound(h2d_bytes,
    d2h_bytes)`` gives the copies' least time and the copy engines (None: no reference); ``pinned(op, bytes)`` one
    pinned copy's time and where it comes from."""
    overlaps = [overlap_of(recording.activities, recording.calls) for recording in recordings]
    order = sorted(range(len(overlaps)), key=lambda index: overlaps[index].makespan_ns)
    chosen = order[(len(order) - 1) // 2]
    recording, overlap = recordings[chosen], overlaps[chosen]
    activities = recording.activities
    h2d = sum(a.bytes for a in activities if a.op == Op.H2D)
    d2h = sum(a.bytes for a in activities if a.op == Op.D2H)
    terms = {"compute": overlap.busy_ns["compute"] / 1e6}
    engines = None
    if (h2d or d2h) and copy_bound is not None:
        terms["copies"], engines = copy_bound(h2d, d2h)
    if overlap.busy_ns["D2D"]:
        terms["D2D"] = overlap.busy_ns["D2D"] / 1e6
    bound = max(terms.values()) if activities and (copy_bound is not None or not (h2d or d2h)) else None
    return TraceResult(
        activities=list(activities), calls=list(recording.calls), origin_ns=overlap.start_ns,
        makespans_ms=[o.makespan_ns / 1e6 for o in overlaps], makespan_ms=overlap.makespan_ns / 1e6,
        busy_ms={engine: ns / 1e6 for engine, ns in overlap.busy_ns.items()}, copy_ms=overlap.copy_ns / 1e6,
        hidden_ms=overlap.hidden_ns / 1e6, duplex_ms=overlap.duplex_ns / 1e6,
        concurrent_kernels_ms=overlap.concurrent_kernels_ns / 1e6, gaps=overlap.gaps, fill_ms=overlap.fill_ns / 1e6,
        drain_ms=overlap.drain_ns / 1e6, bound_ms=bound, bound_terms=terms,
        pageable=_pageable(activities, recording.calls, pinned), waits=_waits(recording.calls),
        copy_engines=engines, untraced_ms=list(untraced_ms), traced_ms=list(traced_ms), target=target)


# --- running on the GPU --------------------------------------------------------------------------------------------

def pinned_results(results, gpu_uuid: str) -> dict[tuple[str, int], float]:
    """(direction, bytes) -> median ms of the bandwidth experiment's pinned, ok rows of GPU ``gpu_uuid`` in
    ``results`` (rows of results files); of several runs, the newest."""
    if not {"experiment", "gpu_uuid", "host_memory", "direction", "bytes", "status", "median_ms"} <= set(results):
        return {}
    mine = results[(results["experiment"] == "bandwidth") & (results["gpu_uuid"] == gpu_uuid)
                   & (results["host_memory"] == "pinned") & (results["status"] == "ok")]
    order = mine.sort_values("run_id") if "run_id" in mine else mine  # the newest run last: it wins
    return {(str(row["direction"]), int(row["bytes"])): float(row["median_ms"]) for _, row in order.iterrows()}


def _references(results=None, bound: bool = True):
    """The GPU-side references: the copies' bound (None without ``bound``) and one pinned copy's time, from
    ``results`` (rows of results files: the bandwidth experiment's pinned copies on this GPU) where they hold the
    size, else measured."""
    from bench.measure.pinned import copy_engines, pinned_copy_ms

    known: dict[tuple[str, int], float] = {}
    if results is not None and len(results):
        from bench.cuda import runtime
        from bench.env import gpu_environment

        known = pinned_results(results, gpu_environment(runtime.getDevice()).gpu_uuid)

    def copy_bound(h2d_bytes: int, d2h_bytes: int) -> tuple[float, int]:
        engines = copy_engines(h2d_bytes, d2h_bytes)
        return engines.bound_ms(), engines.engines

    def pinned(op: Op, nbytes: int) -> tuple[float, str]:
        if (str(op), nbytes) in known:
            return known[(str(op), nbytes)], "results"
        return pinned_copy_ms(str(op), nbytes), "measured"

    return (copy_bound if bound else None), pinned


def _run_synchronized(call: Callable[[], object], synchronize: Callable[[], None]) -> float:
    """The host time (ms) of ``call()`` from an idle GPU until ``synchronize()`` found the GPU idle again."""
    from bench.timing import host_interval

    synchronize()
    ms, _ = host_interval(lambda: (call(), synchronize()))
    return ms


def _usable() -> None:
    from bench.env import no_gpu_reason

    reason = no_gpu_reason()
    if reason:
        raise TraceUnavailable(f"tracing needs a GPU: {reason}")


def trace(fn: Callable, *args, runs: int = DEFAULT_RUNS, warmup: bool = True, results=None, target: str = "",
          leave_out: Callable[[Activity], bool] | None = None, lines: bool = True, **kwargs) -> TraceResult:
    """Trace ``fn(*args, **kwargs)`` (see the module docstring). ``results``: rows of results files whose pinned
    bandwidth rows of this GPU stand in for measuring the pinned reference. ``leave_out``: records that are not the
    region's own (a gate kernel the region's work waits behind). ``lines=False`` leaves out the driver-call callbacks:
    no host waits, no lines, less overhead where every call blocks (pageable copies). :class:`TraceUnavailable` (one
    line) without a GPU or CUPTI."""
    if runs < 1:
        raise ValueError("runs must be at least 1")
    _usable()
    from bench.cuda import runtime
    from bench.measure.activity import open_recorder

    recorder = open_recorder(calls=lines)
    recordings: list[Recording] = []
    untraced: list[float] = []
    traced: list[float] = []

    def run() -> None:
        fn(*args, **kwargs)

    try:
        if warmup:
            _run_synchronized(run, runtime.deviceSynchronize)
        for _ in range(runs):
            untraced.append(_run_synchronized(run, runtime.deviceSynchronize))
            recorder.start()
            try:
                traced.append(_run_synchronized(run, recorder.synchronize))
            finally:
                recordings.append(recorder.stop())
    finally:
        recorder.close()
    if leave_out is not None:
        recordings = [Recording([a for a in r.activities if not leave_out(a)], r.calls) for r in recordings]
    copy_bound, pinned = _references(results)
    result = result_of(recordings, copy_bound=copy_bound, pinned=pinned, untraced_ms=untraced, traced_ms=traced,
                       target=target)
    result.libraries = loaded_versions()
    return result


class Traced:
    """What :func:`tracing` yields: ``result`` once the block has ended."""

    result: TraceResult | None = None


@contextmanager
def tracing(target: str = "", bound: bool = True) -> Iterator[Traced]:
    """Trace one run of the ``with`` block (warm it up first: a first call's loading is in the trace otherwise).
    ``bound=False`` skips measuring the copies' bound (seconds of pinned copies): no bound, no efficiency."""
    _usable()
    from bench.cuda import runtime
    from bench.measure.activity import open_recorder

    recorder = open_recorder()
    box = Traced()
    try:
        runtime.deviceSynchronize()
        recorder.start()
        try:
            yield box
            recorder.synchronize()
        finally:
            recording = recorder.stop()
    finally:
        recorder.close()
    copy_bound, pinned = _references(bound=bound)
    box.result = result_of([recording], copy_bound=copy_bound, pinned=pinned, target=target)
    box.result.libraries = loaded_versions()


# --- results files -------------------------------------------------------------------------------------------------

SUMMARY = ("makespan_ms", "bound_ms", "efficiency", "hidden", "fill_ms", "drain_ms", "busy_compute_ms", "busy_H2D_ms",
           "busy_D2H_ms", "busy_D2D_ms", "copy_ms", "hidden_ms", "duplex_ms", "concurrent_kernels_ms", "idle_ms",
           "pageable_cost_ms", "overhead")


def columns() -> tuple:
    """The typed columns of a ``trace`` results file: one row per kernel, copy, memset, idle gap and host wait of the
    described run, each with the trace's headline numbers and the environment."""
    from bench.schema import FLOAT, INT, TEXT, column, environment_columns

    return (
        column("target", TEXT, "what was traced: MODULE:FUNCTION, a script, or a name the caller gave"),
        column("traced_at", TEXT, "when the results file was written (UTC, ISO 8601)"),
        column("op", TEXT, "kernel, memset, H2D, D2H, D2D, H2H, P2P; idle (a gap of the GPU) or wait (a host call)"),
        column("stream", INT, "the CUDA stream's id (idle: -1, wait: -2)"),
        column("start_ms", FLOAT, "start, ms after the run's first GPU start (CUPTI's clock)"),
        column("end_ms", FLOAT, "end, ms after the run's first GPU start"),
        column("bytes", INT, "bytes a copy or memset moved"),
        column("host_memory", TEXT, "a copy's host memory: pinned, pageable, managed; device, array or unknown for "
                                    "copies without a host side"),
        column("name", TEXT, "a kernel's name"),
        column("call", TEXT, "the driver call that made it, or that the host was in (idle, wait)"),
        column("line", TEXT, "the user's line of that call (FILE:LINE), where its stack was kept"),
        column("runs", INT, "traced runs; the one of median makespan is described"),
        *(column(name, FLOAT, doc) for name, doc in (
            ("makespan_ms", "first start to last end on the GPU of the described run: the traced run of median "
                            "makespan (the lower middle one of an even count)"),
            ("bound_ms", "the least time the same work can take with perfect overlap on this GPU"),
            ("efficiency", "bound_ms / makespan_ms"),
            ("hidden", "share of H2D and D2H copy time during which a kernel or memset ran"),
            ("fill_ms", "from the first GPU start until a kernel or memset first ran"),
            ("drain_ms", "from the last kernel's or memset's end to the last GPU end"),
            ("busy_compute_ms", "time kernels or memsets ran"), ("busy_H2D_ms", "time H2D copies ran"),
            ("busy_D2H_ms", "time D2H copies ran"), ("busy_D2D_ms", "time D2D copies ran"),
            ("copy_ms", "time H2D or D2H copies ran"), ("hidden_ms", "of copy_ms, the time compute ran too"),
            ("duplex_ms", "time H2D and D2H copies ran at once"),
            ("concurrent_kernels_ms", "time two or more kernels ran at once"),
            ("idle_ms", f"time nothing ran, in gaps of {GAP_NS / 1000:g} µs or more"),
            ("pageable_cost_ms", "pageable copies' time beyond pinned copies of their sizes"),
            ("overhead", "traced runs' host time over untraced runs', less one"))),
        *environment_columns(),
    )


def save(found: Sequence[tuple[str, TraceResult]], environment, path) -> object:
    """Write each (target, result)'s rows to a new results file ``path`` (table ``trace``)."""
    from bench import store
    from bench.schema import schema_of

    traced_at = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    rows = []
    for target, result in found:
        summary = result.summary()
        shared_columns = {name: summary[name] for name in SUMMARY}
        rows += [{"target": target, "traced_at": traced_at, "runs": len(result.makespans_ms), **shared_columns,
                  **environment.as_dict(), **result.libraries, **row} for row in result.table()]
    return store.write(path, rows, schema_of(columns()), {"table": TABLE}, new=True)
