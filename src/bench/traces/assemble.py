"""The result of the traced runs: each run's records analysed (:mod:`bench.traces.overlap`), the run of median
makespan described, its bound, pageable copies and host waits."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bench.measure.activity import Activity, HostCall, Op, Recording
from bench.traces.overlap import LINK, overlap_of
from bench.traces.result import (WAIT_NS, HostWait, PageableCopies, TraceResult, line_of_frames,
                                 source_of_frames)


def _waits(calls: Sequence[HostCall]) -> list[HostWait]:
    groups: dict[str, list[HostCall]] = {}
    for call in calls:
        if call.end_ns - call.start_ns >= WAIT_NS:
            groups.setdefault(line_of_frames(call.frames), []).append(call)
    waits = [HostWait(line, source_of_frames(group[0].frames), ", ".join(sorted({call.call for call in group})),
                      len(group), sum(call.ms for call in group)) for line, group in groups.items()]
    return sorted(waits, key=lambda wait: -wait.ms)


def _pageable(activities: Sequence[Activity], calls: Sequence[HostCall],
              pinned: Callable[[Op, int], tuple[float, str]]) -> list[PageableCopies]:
    made = {call.correlation: call for call in calls}
    groups: dict[tuple, list[Activity]] = {}
    for activity in activities:
        if activity.op in LINK and activity.host_memory == "pageable":
            call = made.get(activity.correlation)
            groups.setdefault((activity.op, activity.bytes, line_of_frames(call.frames) if call else ""),
                              []).append(activity)
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
