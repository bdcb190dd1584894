"""What a trace found, as its outputs read it: :class:`Trace`, its numbers, rows and JSON, and the figures it holds of
each GPU, each run, its pageable copies and its host waits."""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass, field
from typing import NamedTuple

from bench.analysis.escape import json_text
from bench.timing import shared
from bench.usercode.activity import Activity, HostCall, Op
from bench.usercode.trace.outputs import WAIT_NS, finite, line_of_frames
from bench.usercode.trace.overlap import LINK, Gap, Overlap, engine_of

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
    change only beyond that spread (:mod:`bench.usercode.trace.compare`)."""

    makespan_ms: float
    efficiency: float | None
    hidden: float | None
    idle_ms: float
    pageable_cost_ms: float
    kernel_ms: dict[str, float]  # the time the kernels of each name ran, in all
    comm_hidden: float | None = None


@dataclass(frozen=True)
class GpuFigures:
    """One GPU's part of the described run: its analysis (ns), its bound (ms; None without one) and the rank that
    traced it (None for one process)."""

    device: int
    overlap: Overlap
    bound_ms: float | None
    rank: int | None = None

    @property
    def makespan_ms(self) -> float:
        return self.overlap.makespan_ns / 1e6

    @property
    def hidden(self) -> float | None:
        return self.overlap.hidden_ns / self.overlap.copy_ns if self.overlap.copy_ns else None

    @property
    def comm_hidden(self) -> float | None:
        return self.overlap.comm_hidden_ns / self.overlap.comm_ns if self.overlap.comm_ns else None

    @property
    def efficiency(self) -> float | None:
        return self.bound_ms / self.makespan_ms if self.bound_ms is not None and self.makespan_ms else None

    def as_dict(self) -> dict:
        """Its numbers (ms), as the JSON output and the results file's ``gpu_*`` columns carry them."""
        o = self.overlap
        return {"device": self.device, "rank": self.rank, "makespan_ms": self.makespan_ms,
                **{f"busy_{engine}_ms": ns / 1e6 for engine, ns in o.busy_ns.items()}, "copy_ms": o.copy_ns / 1e6,
                "hidden_ms": o.hidden_ns / 1e6, "hidden": self.hidden, "idle_ms": sum(gap.ms for gap in o.gaps),
                "comm_ms": o.comm_ns / 1e6, "comm_hidden_ms": o.comm_hidden_ns / 1e6, "comm_hidden": self.comm_hidden,
                "comm_exposed_ms": (o.comm_ns - o.comm_hidden_ns) / 1e6, "comm_idle_ms": o.comm_idle_ns / 1e6,
                "bound_ms": self.bound_ms, "efficiency": self.efficiency}


@dataclass(frozen=True)
class Records:
    """What ran in the described run: its records (on CUPTI's clock) and the watched driver calls; ``origin_ns``, the
    run's first GPU start, is where the rows' times start."""

    activities: list[Activity]
    calls: list[HostCall]
    origin_ns: int


@dataclass(frozen=True)
class Whole:
    """The described run's times (ms) of all its GPUs: each GPU's summed (GPU time) but the makespan, from the first
    start on any GPU to the last end on any; and its idle gaps."""

    makespan_ms: float
    busy_ms: dict[str, float]
    copy_ms: float
    hidden_ms: float
    duplex_ms: float
    concurrent_kernels_ms: float
    gaps: list[Gap]
    fill_ms: float
    drain_ms: float
    comm_ms: float = 0.0  # NCCL's kernels ran (GPU time)
    comm_hidden_ms: float = 0.0  # of that, while compute ran on the same GPU
    comm_idle_ms: float = 0.0  # compute idle while only communication ran, between a GPU's first and last compute

    @classmethod
    def of(cls, overlap: Overlap) -> Whole:
        """The times of an analysis (ns; :func:`bench.usercode.trace.overlap.combined` of every GPU's)."""
        return cls(makespan_ms=overlap.makespan_ns / 1e6,
                   busy_ms={engine: ns / 1e6 for engine, ns in overlap.busy_ns.items()},
                   copy_ms=overlap.copy_ns / 1e6, hidden_ms=overlap.hidden_ns / 1e6, duplex_ms=overlap.duplex_ns / 1e6,
                   concurrent_kernels_ms=overlap.concurrent_kernels_ns / 1e6, gaps=overlap.gaps,
                   fill_ms=overlap.fill_ns / 1e6, drain_ms=overlap.drain_ns / 1e6, comm_ms=overlap.comm_ns / 1e6,
                   comm_hidden_ms=overlap.comm_hidden_ns / 1e6, comm_idle_ms=overlap.comm_idle_ns / 1e6)

    @property
    def hidden(self) -> float | None:
        return self.hidden_ms / self.copy_ms if self.copy_ms else None

    @property
    def comm_hidden(self) -> float | None:
        """HTA's communication overlap: compute time during communication / communication time."""
        return self.comm_hidden_ms / self.comm_ms if self.comm_ms else None

    @property
    def comm_exposed_ms(self) -> float:
        """Communication time with no compute beside it on its GPU."""
        return self.comm_ms - self.comm_hidden_ms

    @property
    def idle_ms(self) -> float:
        return sum(gap.ms for gap in self.gaps)


@dataclass(frozen=True)
class Bound:
    """The least time the described run's work can take with perfect overlap (None: no bound), the terms it is the
    largest of (each the largest of any GPU's), and the copy engines its copies' term counted."""

    ms: float | None
    terms: dict[str, float]
    copy_engines: int | None


@dataclass(frozen=True)
class Runs:
    """Every traced run: its makespan and headline numbers, in run order; and the host time of each traced run and of
    each untraced one (their ratio is the tracing overhead)."""

    makespans_ms: list[float]
    untraced_ms: list[float] = field(default_factory=list)  # host time of each untraced run
    traced_ms: list[float] = field(default_factory=list)
    per_run: list[RunFigures] = field(default_factory=list)

    @property
    def overhead(self) -> float | None:
        """What tracing added to a run's host time: the median over runs of each traced run's time over the untraced
        run just before it, less one (runs alternate, and a host's speed drifts over seconds: a pair shares it);
        the ratio of the medians where the runs do not pair."""
        if not self.untraced_ms or not self.traced_ms:
            return None
        if len(self.untraced_ms) == len(self.traced_ms):
            return statistics.median(t / u for t, u in zip(self.traced_ms, self.untraced_ms) if u > 0) - 1
        return statistics.median(self.traced_ms) / statistics.median(self.untraced_ms) - 1


@dataclass(frozen=True)
class Provenance:
    """What was traced and where: the target's name, the rank that traced it (torchrun's RANK; None for one process or
    a merged trace), the GPU libraries loaded as it ran (column -> version) and a read or merged trace's
    environments, by rank."""

    target: str = ""
    rank: int | None = None
    libraries: dict[str, str] = field(default_factory=dict)
    environments: dict[int | None, dict] = field(default_factory=dict)


class Span(NamedTuple):
    """Where and when one row's record ran: its GPU (None: the host), rank, stream, start and end (ns)."""

    device: int | None
    rank: int | None
    stream: int
    start_ns: int
    end_ns: int


@dataclass
class Trace:
    """What a trace found (times in ms; shares from 0 to 1; None where there is nothing to share), which its text,
    Perfetto export and results file read: :class:`bench.usercode.trace.result.TraceResult` is this with them. Its
    parts: the described run's records, the whole's times (of several GPUs, summed but the makespan), the bound, the
    pageable copies and host waits by line, each GPU's own figures, every traced run's numbers, and what was traced
    where. Its headline numbers read as attributes of their own (``makespan_ms``, ``hidden``, ``efficiency``...)."""

    records: Records  # of the described run, on CUPTI's clock (:meth:`table` starts them at 0)
    whole: Whole
    bound: Bound
    pageable: list[PageableCopies]
    waits: list[HostWait]
    gpus: dict[int, GpuFigures]  # each GPU's own numbers, by device
    runs: Runs
    provenance: Provenance = Provenance()

    @property
    def target(self) -> str:
        return self.provenance.target

    @property
    def makespan_ms(self) -> float:
        return self.whole.makespan_ms

    @property
    def bound_ms(self) -> float | None:
        return self.bound.ms

    @property
    def gaps(self) -> list[Gap]:
        return self.whole.gaps

    @property
    def hidden(self) -> float | None:
        return self.whole.hidden

    @property
    def comm_hidden(self) -> float | None:
        """HTA's communication overlap: compute time during communication / communication time."""
        return self.whole.comm_hidden

    @property
    def comm_exposed_ms(self) -> float:
        """Communication time with no compute beside it on its GPU."""
        return self.whole.comm_exposed_ms

    @property
    def efficiency(self) -> float | None:
        return self.bound.ms / self.makespan_ms if self.bound.ms is not None and self.makespan_ms else None

    @property
    def idle_ms(self) -> float:
        return self.whole.idle_ms

    @property
    def overhead(self) -> float | None:
        """What tracing added to a run's host time (:attr:`Runs.overhead`)."""
        return self.runs.overhead

    @property
    def pageable_cost_ms(self) -> float:
        return sum(group.cost_ms for group in self.pageable)

    def worst_copies(self, count: int = 3) -> list[tuple[Activity, float]]:
        """The H2D and D2H copies with the most time exposed (not hidden behind compute on their GPU), with that
        time (ms)."""
        compute: dict[int, list[tuple[int, int]]] = {}
        for a in self.records.activities:
            if engine_of(a) == "compute":
                compute.setdefault(a.device, []).append((a.start_ns, a.end_ns))
        exposed = [(a, (a.end_ns - a.start_ns - shared([(a.start_ns, a.end_ns)], compute.get(a.device, []))) / 1e6)
                   for a in self.records.activities if a.op in LINK]
        return sorted(exposed, key=lambda pair: -pair[1])[:count]

    def maker(self, activity: Activity) -> HostCall | None:
        """The watched call that enqueued ``activity`` (known for copies and memsets)."""
        return self.made_by.get((activity.rank, activity.correlation))

    def line_of(self, activity: Activity) -> str:
        """The line that enqueued ``activity`` (known for copies)."""
        made = self.maker(activity)
        return line_of_frames(made.frames) if made else ""

    @functools.cached_property
    def made_by(self) -> dict[tuple[int | None, int], HostCall]:
        """The watched call that enqueued each record, by rank and correlation id."""
        return {(call.rank, call.correlation): call for call in self.records.calls}

    def summary(self) -> dict:
        """The headline numbers, as the JSON output and the results file carry them."""
        whole, runs = self.whole, self.runs
        return {"target": self.target, "makespan_ms": whole.makespan_ms,
                "makespan_min_ms": min(runs.makespans_ms, default=None),
                "makespan_max_ms": max(runs.makespans_ms, default=None), "runs": len(runs.makespans_ms),
                "bound_ms": self.bound.ms, "efficiency": self.efficiency, "fill_ms": whole.fill_ms,
                "drain_ms": whole.drain_ms, **{f"busy_{engine}_ms": ms for engine, ms in whole.busy_ms.items()},
                "copy_ms": whole.copy_ms, "hidden_ms": whole.hidden_ms, "hidden": whole.hidden,
                "duplex_ms": whole.duplex_ms, "concurrent_kernels_ms": whole.concurrent_kernels_ms,
                "comm_ms": whole.comm_ms, "comm_hidden_ms": whole.comm_hidden_ms, "comm_hidden": whole.comm_hidden,
                "comm_exposed_ms": whole.comm_exposed_ms, "comm_idle_ms": whole.comm_idle_ms,
                "idle_ms": whole.idle_ms, "gaps": len(whole.gaps),
                "gaps_after_waits": sum(gap.wait is not None for gap in whole.gaps),
                "pageable_copies": sum(group.count for group in self.pageable),
                "pageable_cost_ms": self.pageable_cost_ms, "copy_engines": self.bound.copy_engines,
                "overhead": runs.overhead, "gpus": len(self.gpus),
                "untraced_host_ms": statistics.median(runs.untraced_ms) if runs.untraced_ms else None,
                "traced_host_ms": statistics.median(runs.traced_ms) if runs.traced_ms else None,
                **{f"bound_{term}_ms": ms for term, ms in self.bound.terms.items()}}

    def table(self) -> list[dict]:
        """One row per kernel, copy and memset, per idle gap (``op`` idle, on stream -1, with the wait that caused
        it) and per host wait (``op`` wait, stream -2, no device), times in ms from the run's first GPU start; each
        with the call that made it or that the host was in (its correlation id and host interval)."""
        pinned = {(group.op, group.bytes, group.line): group.pinned_ms for group in self.pageable}
        rows = []
        for a in sorted(self.records.activities, key=lambda a: (a.start_ns, a.device, a.stream)):
            made = self.maker(a)
            line = line_of_frames(made.frames) if made else ""
            rows.append(self._row(str(a.op), Span(a.device, self._rank(a.rank), a.stream, a.start_ns, a.end_ns), made,
                                  a, _known(pinned.get((a.op, a.bytes, line)))))
        rows += [self._row("idle", Span(gap.device, self._rank(self.gpu_rank(gap.device)), -1, gap.start_ns,
                                        gap.end_ns), gap.wait) for gap in self.gaps]
        rows += [self._row("wait", Span(None, self._rank(call.rank), -2, call.start_ns, call.end_ns), call)
                 for call in self.records.calls if call.end_ns - call.start_ns >= WAIT_NS]
        return rows

    def gpu_rank(self, device: int) -> int | None:
        return self.gpus[device].rank if device in self.gpus else None

    def _rank(self, rank: int | None) -> int | None:
        return self.provenance.rank if rank is None else rank

    def _row(self, op: str, span: Span, call: HostCall | None, record: Activity | None = None,
             pinned_ms: float | None = None) -> dict:
        """One row of :meth:`table`: ``record``, the kernel, copy or memset it is (None for a gap or a wait)."""
        def ms(ns: int) -> float:
            return (ns - self.records.origin_ns) / 1e6

        correlation = record.correlation if record is not None else None
        return {"op": op, "device": span.device, "rank": span.rank, "stream": span.stream,
                "start_ms": ms(span.start_ns), "end_ms": ms(span.end_ns),
                "bytes": record.bytes if record is not None else 0,
                "host_memory": record.host_memory if record is not None else "",
                "name": record.name if record is not None else "", "call": call.call if call else "",
                "line": line_of_frames(call.frames) if call else "",
                "correlation": correlation if correlation is not None else (call.correlation if call else None),
                "call_start_ms": ms(call.start_ns) if call else None, "call_end_ms": ms(call.end_ns) if call else None,
                "pinned_ms": pinned_ms}

    def to_dict(self) -> dict:
        origin_ns = self.records.origin_ns
        return {**self.summary(),
                "per_gpu": [figures.as_dict() for figures in self.gpus.values()],
                "gaps_list": [{"start_ms": (gap.start_ns - origin_ns) / 1e6, "ms": gap.ms, "device": gap.device,
                               "call": gap.wait.call if gap.wait else None,
                               "line": line_of_frames(gap.wait.frames) if gap.wait else None} for gap in self.gaps],
                "pageable": [{"op": str(group.op), "bytes": group.bytes, "count": group.count, "ms": group.ms,
                              "pinned_ms": group.pinned_ms, "cost_ms": group.cost_ms, "host_ms": group.host_ms,
                              "reference": group.reference, "line": group.line} for group in self.pageable],
                "waits": [vars(wait) for wait in self.waits],
                "activities": self.table()}

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON, its control characters escaped (:func:`bench.analysis.escape.json_text`)."""
        return json_text(finite(self.to_dict()), indent=2)


def _known(value: float | None) -> float | None:
    """``value``, None where it is not a finite number (a reference copy that could not be had)."""
    return value if value is not None and math.isfinite(value) else None
