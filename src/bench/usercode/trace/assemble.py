"""The result of the traced runs: each run's records analysed (:mod:`bench.usercode.trace.overlap`), the run of median
makespan described (its bound, pageable copies and host waits), and every run's headline numbers, whose spread tells
a change from noise when two traces are compared."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bench.usercode.activity import Activity, HostCall, Op, Recording
from bench.usercode.trace.model import (Bound, GpuFigures, HostWait, PageableCopies, Provenance, Records, RunFigures,
                                        Runs, Whole)
from bench.usercode.trace.outputs import WAIT_NS, line_of_frames, source_of_frames
from bench.usercode.trace.overlap import LINK, Overlap, combined, per_gpu
from bench.usercode.trace.result import TraceResult


def waits_of(calls: Sequence[HostCall], sources: bool = True) -> list[HostWait]:
    """The host waits: the watched calls of :data:`WAIT_NS` or more, by line, the longest first (``sources``: with
    each line's source text, read from the file; a trace read back from a results file names files of another
    machine, so it reads none)."""
    groups: dict[str, list[HostCall]] = {}
    for call in calls:
        if call.end_ns - call.start_ns >= WAIT_NS:
            groups.setdefault(line_of_frames(call.frames), []).append(call)
    waits = [HostWait(line, source_of_frames(group[0].frames) if sources else "",
                      ", ".join(sorted({call.call for call in group})), len(group), sum(call.ms for call in group))
             for line, group in groups.items()]
    return sorted(waits, key=lambda wait: -wait.ms)


def pageable_of(activities: Sequence[Activity], calls: Sequence[HostCall],
                pinned: Callable[[Op, int], tuple[float, str]]) -> list[PageableCopies]:
    """The pageable copies, by direction, size and line, each group against ``pinned(op, bytes)``."""
    made = {(call.rank, call.correlation): call for call in calls}
    groups: dict[tuple, list[Activity]] = {}
    for activity in activities:
        if activity.op in LINK and activity.host_memory == "pageable":
            call = made.get((activity.rank, activity.correlation))
            groups.setdefault((activity.op, activity.bytes, line_of_frames(call.frames) if call else ""),
                              []).append(activity)
    found = []
    for (op, nbytes, line), group in groups.items():
        pinned_ms, reference = pinned(op, nbytes)
        host_ms = (sum(made[(a.rank, a.correlation)].ms for a in group if (a.rank, a.correlation) in made) if calls
                   else None)
        found.append(PageableCopies(op, nbytes, len(group), sum((a.end_ns - a.start_ns) / 1e6 for a in group),
                                    pinned_ms, reference, host_ms, line))
    return found


def _memo(function: Callable | None) -> Callable | None:
    """``function`` asked once per distinct arguments (a reference copy measured once, however many runs need it)."""
    if function is None:
        return None
    known: dict = {}

    def remembered(*args):
        if args not in known:
            known[args] = function(*args)
        return known[args]

    return remembered


def _bound(activities: Sequence[Activity], overlap: Overlap,
           copy_bound: Callable[[int, int], tuple[float, int]] | None) -> tuple[float | None, dict, int | None]:
    """The bound of one GPU's work of one run (None without a copy bound where it copied), its terms and the copy
    engines. Communication (NCCL's kernels) is in none of the terms: its time includes waiting for other GPUs."""
    h2d = sum(a.bytes for a in activities if a.op == Op.H2D)
    d2h = sum(a.bytes for a in activities if a.op == Op.D2H)
    terms = {"compute": overlap.busy_ns["compute"] / 1e6}
    engines = None
    if (h2d or d2h) and copy_bound is not None:
        terms["copies"], engines = copy_bound(h2d, d2h)
    if overlap.busy_ns["D2D"]:
        terms["D2D"] = overlap.busy_ns["D2D"] / 1e6
    bound = max(terms.values()) if activities and (copy_bound is not None or not (h2d or d2h)) else None
    return bound, terms, engines


def _gpus(activities: Sequence[Activity], calls: Sequence[HostCall],
          copy_bound: Callable[[int, int], tuple[float, int]] | None) -> tuple[dict[int, GpuFigures], dict, int | None]:
    """Each GPU's figures of one run; the bound's terms, each the largest of any GPU's; the copy engines."""
    mine: dict[int, list[Activity]] = {}
    for activity in activities:
        mine.setdefault(activity.device, []).append(activity)
    gpus, terms, engines = {}, {}, None
    for device, overlap in per_gpu(activities, calls).items():
        bound, found, engines_here = _bound(mine[device], overlap, copy_bound)
        gpus[device] = GpuFigures(device, overlap, bound)
        for term, ms in found.items():
            terms[term] = max(terms.get(term, ms), ms)
        engines = engines if engines is not None else engines_here
    return gpus, terms, engines


def whole_bound(gpus: dict[int, GpuFigures]) -> float | None:
    """The least time of the whole: the slowest GPU's bound (None where a GPU has none, or there is no GPU)."""
    bounds = [figures.bound_ms for figures in gpus.values()]
    return max(bounds) if bounds and None not in bounds else None


def _figures(recording: Recording, gpus: dict[int, GpuFigures], pinned_ms: Callable[[Op, int], float]) -> RunFigures:
    """One run's headline numbers (``pinned_ms(op, bytes)``: one pinned copy's time)."""
    kernel_ms: dict[str, float] = {}
    pageable_ms = 0.0
    for a in recording.activities:
        if a.op == Op.KERNEL:
            kernel_ms[a.name] = kernel_ms.get(a.name, 0.0) + (a.end_ns - a.start_ns) / 1e6
        elif a.op in LINK and a.host_memory == "pageable":
            pageable_ms += (a.end_ns - a.start_ns) / 1e6 - pinned_ms(a.op, a.bytes)
    overlap = combined([figures.overlap for figures in gpus.values()])
    makespan_ms, bound = overlap.makespan_ns / 1e6, whole_bound(gpus)
    return RunFigures(makespan_ms, bound / makespan_ms if bound is not None and makespan_ms else None,
                      overlap.hidden_ns / overlap.copy_ns if overlap.copy_ns else None,
                      sum(gap.ms for gap in overlap.gaps), pageable_ms, kernel_ms,
                      overlap.comm_hidden_ns / overlap.comm_ns if overlap.comm_ns else None)


def described(activities: Sequence[Activity], calls: Sequence[HostCall], gpus: dict[int, GpuFigures], *,
              bound_terms: dict[str, float], copy_engines: int | None, pageable: list[PageableCopies],
              waits: list[HostWait], runs: Runs, provenance: Provenance) -> TraceResult:
    """The result of a run from its records and each GPU's figures: the whole combined from them, its bound the
    slowest GPU's (``bound_terms`` and ``copy_engines``: the rest of it)."""
    overlap = combined([figures.overlap for figures in gpus.values()])
    return TraceResult(Records(list(activities), list(calls), overlap.start_ns), Whole.of(overlap),
                       Bound(whole_bound(gpus), bound_terms, copy_engines), pageable, waits, gpus, runs, provenance)


def result_of(recordings: Sequence[Recording], *, copy_bound: Callable[[int, int], tuple[float, int]] | None,
              pinned: Callable[[Op, int], tuple[float, str]], untraced_ms: Sequence[float] = (),
              traced_ms: Sequence[float] = (), target: str = "", rank: int | None = None,
              sources: bool = True) -> TraceResult:
    """The result from each traced run's recording: the run of median makespan described, and every run's headline
    numbers. ``copy_bound(h2d_bytes, d2h_bytes)`` gives the copies' least time and the copy engines (None: no
    reference), asked once per distinct byte counts (of each GPU); ``pinned(op, bytes)`` one pinned copy's time and
    where it comes from, asked for each group of pageable copies of the described run, and once for a size only other
    runs copied. ``rank``: the rank that traced it, where several processes trace at once."""
    copy_bound = _memo(copy_bound)
    runs = [_gpus(recording.activities, recording.calls, copy_bound) for recording in recordings]
    makespans = [combined([figures.overlap for figures in gpus.values()]).makespan_ns / 1e6 for gpus, _, _ in runs]
    order = sorted(range(len(runs)), key=lambda index: makespans[index])
    chosen = order[(len(order) - 1) // 2]
    recording, (gpus, terms, engines) = recordings[chosen], runs[chosen]
    pageable = pageable_of(recording.activities, recording.calls, pinned)
    known = {(group.op, group.bytes): group.pinned_ms for group in pageable}
    asked = _memo(pinned)

    def pinned_ms(op: Op, nbytes: int) -> float:
        return known[(op, nbytes)] if (op, nbytes) in known else asked(op, nbytes)[0]

    per_run = [_figures(run, figures, pinned_ms) for run, (figures, _, _) in zip(recordings, runs)]
    gpus = {device: GpuFigures(device, figures.overlap, figures.bound_ms, rank) for device, figures in gpus.items()}
    return described(recording.activities, recording.calls, gpus, bound_terms=terms, copy_engines=engines,
                     pageable=pageable, waits=waits_of(recording.calls, sources),
                     runs=Runs(makespans, list(untraced_ms), list(traced_ms), per_run),
                     provenance=Provenance(target, rank))
