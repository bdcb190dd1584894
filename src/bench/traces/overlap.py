"""One run's records analysed: the makespan, each engine's busy time, the copies hidden behind compute, the GPU's
idle gaps joined with the driver call the host was in. Pure arithmetic over execution intervals (ns, CUPTI's clock)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.measure.activity import Activity, HostCall, Op
from bench.timing import concurrent, gaps, length, shared, union

GAP_NS = 10_000  # shorter idle stretches are launch latency, not a gap
JOIN_NS = 50_000  # a call that returned this soon before the GPU ran dry still counts as the one it waited in
LINK = (Op.H2D, Op.D2H)
ENGINES = ("compute", "H2D", "D2H", "D2D")


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
    """The overlap arithmetic of one run (see :mod:`bench.trace`)."""
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
