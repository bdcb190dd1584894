"""One run's records analysed, GPU by GPU: the makespan, each engine's busy time, the copies hidden behind compute,
the communication (NCCL's kernels) hidden behind compute, the GPU's idle gaps joined with the driver call the host
was in; and the whole of several GPUs. Pure arithmetic over execution intervals (ns, CUPTI's clock)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.timing import concurrent, gaps, length, shared, union
from bench.usercode.activity import Activity, HostCall, Op
from bench.usercode.trace.collectives import is_collective

GAP_NS = 10_000  # shorter idle stretches are launch latency, not a gap
JOIN_NS = 50_000  # a call that returned this soon before the GPU ran dry still counts as the one it waited in
LINK = (Op.H2D, Op.D2H)
ENGINES = ("compute", "H2D", "D2H", "D2D")


@dataclass(frozen=True)
class Gap:
    """A stretch with nothing running on GPU ``device`` (ns on CUPTI's clock) and the driver call the host was in
    when it began (None: the host was running Python or in a call bench does not watch)."""

    start_ns: int
    end_ns: int
    wait: HostCall | None
    device: int = 0

    @property
    def ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


@dataclass(frozen=True)
class Overlap:
    """One GPU's records of one run, analysed (or, :func:`combined`, several GPUs' summed)."""

    start_ns: int
    end_ns: int
    busy_ns: dict[str, int]
    copy_ns: int  # H2D and D2H copies, their union
    hidden_ns: int  # of that, while compute ran
    duplex_ns: int  # H2D and D2H at once
    concurrent_kernels_ns: int  # two or more compute kernels at once
    gaps: list[Gap]
    fill_ns: int
    drain_ns: int
    comm_ns: int = 0  # NCCL's kernels, their union
    comm_hidden_ns: int = 0  # of that, while compute ran
    comm_idle_ns: int = 0  # of the rest, between the GPU's first and last compute: compute stood idle

    @property
    def makespan_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def ran_compute(self) -> bool:
        return self.busy_ns.get("compute", 0) > 0


def engine_of(activity: Activity) -> str:
    """'compute' (a kernel other than NCCL's, a memset), 'comm' (NCCL's kernels), or the copy's direction."""
    if activity.op == Op.KERNEL:
        return "comm" if is_collective(activity.name) else "compute"
    return "compute" if activity.op == Op.MEMSET else activity.op.value


def per_gpu(activities: Sequence[Activity], calls: Sequence[HostCall]) -> dict[int, Overlap]:
    """Each GPU's analysis of one run, by device, in device order; the host's calls are joined with every GPU's
    gaps (one process watched them all)."""
    devices: dict[int, list[Activity]] = {}
    for activity in activities:
        devices.setdefault(activity.device, []).append(activity)
    return {device: one_gpu(devices[device], calls, device) for device in sorted(devices)}


def one_gpu(activities: Sequence[Activity], calls: Sequence[HostCall], device: int = 0) -> Overlap:
    """The overlap arithmetic of one GPU's records of one run (see :mod:`bench.trace`)."""
    if not activities:
        return Overlap(0, 0, dict.fromkeys(ENGINES, 0), 0, 0, 0, 0, [], 0, 0)
    spans: dict[str, list[tuple[int, int]]] = {engine: [] for engine in ENGINES}
    for activity in activities:
        spans.setdefault(engine_of(activity), []).append((activity.start_ns, activity.end_ns))
    communication = spans.pop("comm", [])
    start = min(activity.start_ns for activity in activities)
    end = max(activity.end_ns for activity in activities)
    link = spans["H2D"] + spans["D2H"]
    kernels = [(a.start_ns, a.end_ns) for a in activities if a.op == Op.KERNEL and not is_collective(a.name)]
    compute = union(spans["compute"])
    idle = [gap for gap in gaps([(a.start_ns, a.end_ns) for a in activities]) if gap[1] - gap[0] >= GAP_NS]
    comm_hidden = shared(communication, compute)
    within = shared(communication, [(compute[0][0], compute[-1][1])]) if compute else 0
    return Overlap(
        start, end, {engine: length(intervals) for engine, intervals in spans.items()},
        length(link), shared(link, compute), shared(spans["H2D"], spans["D2H"]), concurrent(kernels),
        [Gap(low, high, _waited_in(calls, low, high), device) for low, high in idle],
        (compute[0][0] - start) if compute else 0, (end - compute[-1][1]) if compute else 0,
        length(communication), comm_hidden, within - comm_hidden)


def combined(parts: Sequence[Overlap]) -> Overlap:
    """The whole of several GPUs (their clocks one: CUPTI's, on one host): from the first start to the last end;
    busy, copy, hidden, communication and idle times summed over the GPUs (GPU time); fill until compute first ran
    on any GPU, drain after it last ran on any. One GPU's is its own."""
    if len(parts) <= 1:
        return parts[0] if parts else one_gpu([], [])
    start, end = min(part.start_ns for part in parts), max(part.end_ns for part in parts)
    busy: dict[str, int] = {}
    for part in parts:
        for engine, ns in part.busy_ns.items():
            busy[engine] = busy.get(engine, 0) + ns
    computing = [part for part in parts if part.ran_compute]
    first = min((part.start_ns + part.fill_ns for part in computing), default=None)
    last = max((part.end_ns - part.drain_ns for part in computing), default=None)

    def total(name: str) -> int:
        return sum(getattr(part, name) for part in parts)

    return Overlap(start, end, busy, total("copy_ns"), total("hidden_ns"), total("duplex_ns"),
                   total("concurrent_kernels_ns"), sorted((gap for part in parts for gap in part.gaps),
                                                          key=lambda gap: (gap.start_ns, gap.device)),
                   0 if first is None else first - start, 0 if last is None else end - last,
                   total("comm_ns"), total("comm_hidden_ns"), total("comm_idle_ns"))


def overlap_of(activities: Sequence[Activity], calls: Sequence[HostCall]) -> Overlap:
    """One run's whole: each GPU analysed, then :func:`combined`."""
    return combined(list(per_gpu(activities, calls).values()))


def _waited_in(calls: Sequence[HostCall], low: int, high: int) -> HostCall | None:
    """The watched call the host was in when the GPU ran dry at ``low`` (it returned before ``high``): the latest to
    return of those under way then."""
    under_way = [call for call in calls if call.start_ns <= low <= call.end_ns + JOIN_NS and call.end_ns <= high]
    return max(under_way, key=lambda call: call.end_ns, default=None)
