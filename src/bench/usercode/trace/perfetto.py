"""A trace's timeline for Perfetto (ui.perfetto.dev) and chrome://tracing: the JSON object form of the Chrome Trace
Event format, written with the standard library.

A process per GPU with a track per stream (records that overlap in time go on further tracks) and an "idle" track; a
"host" process per rank with the watched driver calls (those of :data:`~bench.usercode.trace.outputs.WAIT_NS` or more
on "host waits"); a flow from each watched call to the copies and memsets it enqueued, by CUPTI's correlation id.
What each event holds: docs/trace.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bench.analysis.escape import json_text
from bench.platform.units import format_size
from bench.usercode.activity import Activity, HostCall, Op
from bench.usercode.trace.collectives import is_collective
from bench.usercode.trace.model import Trace
from bench.usercode.trace.outputs import WAIT_NS, finite, line_of_frames
from bench.results.writes import MAKER

HOST = 0  # the host's process id; GPU d's is d + 1
RANK_HOSTS = 1 << 16  # a merged trace's host of rank r is process RANK_HOSTS + r


def lanes(spans: Sequence[tuple[int, int]]) -> list[int]:
    """The lane of each (start, end) span, in the order given, such that no two spans of a lane overlap (one may
    start where the last ended): in order of start, each takes the first lane free by then."""
    ends: list[int] = []
    found = [0] * len(spans)
    for index in sorted(range(len(spans)), key=lambda index: spans[index]):
        start, end = spans[index]
        lane = next((lane for lane, last in enumerate(ends) if last <= start), len(ends))
        if lane == len(ends):
            ends.append(end)
        ends[lane] = end
        found[index] = lane
    return found


class _Timeline:
    """The events being written: processes and their tracks named as they are first used."""

    def __init__(self, zero_ns: int) -> None:
        self.zero_ns = zero_ns
        self.events: list[dict] = []
        self._threads: dict[tuple[int, str], int] = {}

    def process(self, pid: int, name: str) -> None:
        self.events += [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}},
                        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}}]

    def thread(self, pid: int, name: str) -> int:
        """The track ``name`` of process ``pid`` (a thread id, numbered from 1 in the order tracks are asked)."""
        if (pid, name) not in self._threads:
            tid = self._threads[(pid, name)] = len(self._threads) + 1
            self.events += [{"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}},
                            {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                             "args": {"sort_index": tid}}]
        return self._threads[(pid, name)]

    def us(self, ns: int) -> float:
        return (ns - self.zero_ns) / 1000

    def slice(self, pid: int, tid: int, start_ns: int, end_ns: int, name: str, category: str, args: dict) -> dict:
        event = {"ph": "X", "name": name, "cat": category, "pid": pid, "tid": tid, "ts": self.us(start_ns),
                 "dur": (end_ns - start_ns) / 1000, "args": args}
        self.events.append(event)
        return event

    def laid_out(self, pid: int, track: str, spans: Sequence[tuple[int, int]]) -> list[int]:
        """The track of each span: ``track``, then ``track (2)``, ... where spans overlap."""
        placed = lanes(spans)
        tids = [self.thread(pid, track if lane == 0 else f"{track} ({lane + 1})")
                for lane in range(max(placed, default=-1) + 1)]
        return [tids[lane] for lane in placed]


def _named(activity: Activity) -> tuple[str, str]:
    """A record's slice name and category."""
    if activity.op == Op.KERNEL:
        return activity.name or "kernel", "kernel,communication" if is_collective(activity.name) else "kernel"
    size = format_size(activity.bytes)
    if activity.op == Op.MEMSET:
        return f"memset {size}", "memset"
    if activity.host_memory == "pageable":
        return f"{activity.op} {size} pageable", "copy,pageable"
    return f"{activity.op} {size}", "copy"


def _gpu_work(timeline: _Timeline, result: Trace) -> dict[tuple, list[tuple[Activity, dict]]]:
    """Every record's slice on its GPU's stream tracks; (rank, correlation id) -> the records it enqueued, with their
    slices."""
    streams: dict[tuple[int, int], list[Activity]] = {}
    for activity in sorted(result.records.activities, key=lambda a: (a.start_ns, a.end_ns)):
        streams.setdefault((activity.device, activity.stream), []).append(activity)
    enqueued: dict[tuple, list[tuple[Activity, dict]]] = {}
    for (device, stream), records in sorted(streams.items()):
        tids = timeline.laid_out(device + 1, f"stream {stream}", [(a.start_ns, a.end_ns) for a in records])
        for activity, tid in zip(records, tids):
            call = result.maker(activity)
            args = {"op": str(activity.op), "device": activity.device, "stream": stream,
                    **({"rank": activity.rank} if activity.rank is not None else {}),
                    "correlation": activity.correlation, **({"bytes": activity.bytes} if activity.bytes else {}),
                    **({"host_memory": activity.host_memory} if activity.host_memory else {}),
                    **({"call": call.call, "line": line_of_frames(call.frames)} if call else {})}
            event = timeline.slice(device + 1, tid, activity.start_ns, activity.end_ns, *_named(activity), args)
            enqueued.setdefault((activity.rank, activity.correlation), []).append((activity, event))
    return enqueued


def _host(timeline: _Timeline, calls: Sequence[HostCall], pid: int) -> dict[tuple, dict]:
    """Every watched call's slice on the tracks of host process ``pid``; (rank, correlation id) -> its slice."""
    slices = {}
    for track, category, mine in (("host waits", "wait", [c for c in calls if c.end_ns - c.start_ns >= WAIT_NS]),
                                  ("driver calls", "driver call",
                                   [c for c in calls if c.end_ns - c.start_ns < WAIT_NS])):
        mine = sorted(mine, key=lambda call: (call.start_ns, call.end_ns))
        for call, tid in zip(mine, timeline.laid_out(pid, track, [(c.start_ns, c.end_ns) for c in mine])):
            slices[(call.rank, call.correlation)] = timeline.slice(
                pid, tid, call.start_ns, call.end_ns, call.call, category,
                {"line": line_of_frames(call.frames), "correlation": call.correlation, "ms": call.ms})
    return slices


def _hosts(timeline: _Timeline, result: Trace) -> dict[tuple, dict]:
    """The host's process, or in a merged trace one per rank, with its calls' slices."""
    name = f"host: {result.target}" if result.target else "host"
    ranks = sorted({call.rank for call in result.records.calls if call.rank is not None})
    if not ranks:
        timeline.process(HOST, name)
        return _host(timeline, result.records.calls, HOST)
    slices = {}
    for rank in ranks:
        timeline.process(RANK_HOSTS + rank, f"{name} (rank {rank})")
        slices.update(_host(timeline, [call for call in result.records.calls if call.rank == rank], RANK_HOSTS + rank))
    return slices


def _flows(timeline: _Timeline, calls: dict[tuple, dict],
           enqueued: dict[tuple, list[tuple[Activity, dict]]]) -> None:
    """A flow from each call's slice to each slice of the work it enqueued: ``s`` and ``f`` (bound to the enclosing
    slice) at the middle of each."""
    flow = 0
    for correlation, call in calls.items():
        for _, work in enqueued.get(correlation, []):
            flow += 1
            for phase, source in (("s", call), ("f", work)):
                event = {"ph": phase, "id": flow, "name": "enqueued", "cat": "flow", "pid": source["pid"],
                         "tid": source["tid"], "ts": source["ts"] + source["dur"] / 2}
                timeline.events.append({**event, "bp": "e"} if phase == "f" else event)


def trace_events(result: Trace) -> dict:
    """The timeline of ``result``'s described run as a Trace Event document (a JSON object)."""
    starts = [a.start_ns for a in result.records.activities] + [call.start_ns for call in result.records.calls]
    timeline = _Timeline(min(starts, default=result.records.origin_ns))
    calls = _hosts(timeline, result)
    for device in sorted({activity.device for activity in result.records.activities}
                         | {gap.device for gap in result.gaps}):
        rank = result.gpu_rank(device)
        timeline.process(device + 1, f"GPU {device}" + (f" (rank {rank})" if rank is not None else ""))
    enqueued = _gpu_work(timeline, result)
    for gap in result.gaps:
        timeline.slice(gap.device + 1, timeline.thread(gap.device + 1, "idle"), gap.start_ns, gap.end_ns, "idle",
                       "idle", {"ms": gap.ms, "after": gap.wait.call if gap.wait else "",
                                "line": line_of_frames(gap.wait.frames) if gap.wait else ""})
    _flows(timeline, calls, enqueued)
    return {"otherData": finite({"generator": MAKER, "target": result.target, "origin_ns": timeline.zero_ns,
                                 "clock": "CUPTI, ns",
                                 **{key: value for key, value in result.summary().items() if key != "target"}}),
            "traceEvents": timeline.events}  # the mark first: bench knows its file by its first bytes


def encoded(result: Trace) -> bytes:
    """The timeline's JSON, UTF-8, its control characters escaped (:func:`bench.analysis.escape.json_text`): kernel
    names and lines come from the user's code."""
    return json_text(trace_events(result), allow_nan=False).encode("utf-8")


def write(result: Trace, path: Path, force: bool = False) -> Path:
    """Write ``result``'s timeline to ``path`` (atomically, as bench writes every file): a file there only if bench
    wrote it (``force``: any regular file), as ``trace --perfetto`` does."""
    from bench.results import writes

    writes.replaceable(Path(path), writes.writer("trace", "--perfetto"), force)
    writes.write_bytes(Path(path), encoded(result))
    return Path(path)
