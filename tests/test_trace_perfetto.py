"""The Perfetto timeline of a trace (``bench trace --perfetto``, ``TraceResult.to_perfetto``), read back with a reader
written from the Trace Event format's description, not from the writer: the JSON object form ("traceEvents"), complete
events ("X": ts and dur in µs), metadata events naming processes and threads ("M"), flow events ("s" bound to the
slice enclosing it, "f" with "bp": "e" bound to the slice enclosing it, paired by category and id). Perfetto does not
support slices that overlap on one track, so none may. The trace is built from synthetic records (ns, CUPTI's
clock)."""

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench import cli
from bench.trace import WAIT_NS, result_of
from bench.usercode.activity import Activity, HostCall, Op, Recording
from bench.usercode.stacks import Frame

US = 1_000  # ns
MIB = 1 << 20
ORIGIN = 7 * 10**12  # CUPTI's clock is far from zero


# --- a reader of the Trace Event format ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Slice:
    process: str
    thread: str
    ts: float
    dur: float
    name: str
    category: str
    args: dict
    pid: int
    tid: int

    def encloses(self, ts: float) -> bool:
        return self.ts <= ts <= self.ts + self.dur


@dataclass
class Timeline:
    slices: list[Slice]
    flows: list[tuple[Slice, Slice]]  # (the slice its "s" binds to, the slice its "f" binds to)
    other: dict


def read_timeline(path: Path) -> Timeline:
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    assert isinstance(document, dict) and isinstance(document["traceEvents"], list)
    names: dict[tuple, str] = {}
    completes, flow_events = [], {}
    for event in document["traceEvents"]:
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int), event
        if event["ph"] == "M":
            assert event["name"] in ("process_name", "thread_name", "process_sort_index", "thread_sort_index")
            if event["name"] == "process_name":
                names[("process", event["pid"])] = event["args"]["name"]
            elif event["name"] == "thread_name":
                names[("thread", event["pid"], event["tid"])] = event["args"]["name"]
        elif event["ph"] == "X":
            assert isinstance(event["name"], str) and event["dur"] >= 0 and isinstance(event["ts"], (int, float))
            completes.append(event)
        elif event["ph"] in ("s", "f"):
            key = (event["cat"], event["id"])
            assert event["ph"] not in flow_events.setdefault(key, {}), f"two {event['ph']} events of flow {key}"
            flow_events[key][event["ph"]] = event
        else:
            raise AssertionError(f"an event of phase {event['ph']!r}")
    slices = [Slice(names[("process", e["pid"])], names[("thread", e["pid"], e["tid"])], e["ts"], e["dur"], e["name"],
                    e.get("cat", ""), e.get("args", {}), e["pid"], e["tid"]) for e in completes]

    def bound(event) -> Slice:
        (found,) = [s for s in slices if (s.pid, s.tid) == (event["pid"], event["tid"]) and s.encloses(event["ts"])]
        return found

    flows = []
    for key, pair in flow_events.items():
        assert set(pair) == {"s", "f"}, f"flow {key} lacks a phase: {sorted(pair)}"
        assert pair["f"].get("bp") == "e", "an f event binds to its enclosing slice only with bp e"
        flows.append((bound(pair["s"]), bound(pair["f"])))
    return Timeline(slices, flows, document.get("otherData", {}))


# --- the trace -------------------------------------------------------------------------------------------------------

def at(file, line):
    return (Frame("/u/main.py", 1, "<module>", ""), Frame(file, line, "step", ""),
            Frame("/site-packages/torch/cuda/__init__.py", 900, "synchronize", "torch"))


def kernel(stream, start, end, name, correlation=0, device=0):
    return Activity(Op.KERNEL, stream, ORIGIN + start, ORIGIN + end, name=name, correlation=correlation,
                    device=device)


def copy(op, stream, start, end, memory, correlation, device=0):
    return Activity(op, stream, ORIGIN + start, ORIGIN + end, bytes=MIB, host_memory=memory, correlation=correlation,
                    device=device)


def call(name, start, end, correlation, line):
    return HostCall(name, ORIGIN + start, ORIGIN + end, correlation, at("/u/x.py", line))


# Two GPUs. GPU 0: stream 7 runs gemm and, overlapping it (as a record can), fill; stream 8 a pinned upload made at
# line 5 and a pageable one made at line 6 (a host wait of 120 µs); a memset at line 7. GPU 1: a kernel on stream 3.
# GPU 0 stands idle from 160 to 300 µs (after the memset's call at line 7) and from 420 to 500 µs while the host waits
# at line 9; two short calls overlap (two threads).
ACTIVITIES = [kernel(7, 0, 100 * US, "gemm<float>"), kernel(7, 50 * US, 150 * US, "fill"),
              copy(Op.H2D, 8, 20 * US, 60 * US, "pinned", 2), copy(Op.H2D, 8, 300 * US, 420 * US, "pageable", 5),
              Activity(Op.MEMSET, 8, ORIGIN + 150 * US, ORIGIN + 160 * US, bytes=4096, correlation=6),
              kernel(3, 160 * US, 300 * US, "relu", device=1), kernel(7, 500 * US, 600 * US, "add")]
CALLS = [call("cuMemcpyHtoDAsync", -10 * US, -5 * US, 2, 5), call("cuMemcpyHtoD", 295 * US, 425 * US, 5, 6),
         call("cuMemsetD8Async", 140 * US, 145 * US, 6, 7), call("cuStreamSynchronize", 420 * US, 495 * US, 8, 9),
         call("cuMemFree", 141 * US, 143 * US, 9, 10)]


@pytest.fixture(scope="module")
def found():
    return result_of([Recording(ACTIVITIES, CALLS)], copy_bound=lambda h2d, d2h: (0.1, 2),
                     pinned=lambda op, nbytes: (0.05, "measured"), target="x.py:step")


@pytest.fixture(scope="module")
def timeline(found, tmp_path_factory):
    path = tmp_path_factory.mktemp("perfetto") / "step.json"
    assert found.to_perfetto(path) == path
    return read_timeline(path)


def stream_of(thread: str) -> int | None:
    match = re.fullmatch(r"stream (-?\d+)(?: \(\d+\))?", thread)
    return int(match.group(1)) if match else None


def test_every_record_is_a_slice_of_its_gpu_and_stream_at_its_time(found, timeline):
    earliest_ns = min([a.start_ns for a in found.records.activities] + [c.start_ns for c in found.records.calls])
    earliest_us = min(s.ts for s in timeline.slices)
    work = sorted((s.process, stream_of(s.thread), round(s.ts - earliest_us, 6), round(s.dur, 6))
                  for s in timeline.slices if stream_of(s.thread) is not None)
    expected = sorted((f"GPU {a.device}", a.stream, round((a.start_ns - earliest_ns) / 1000, 6),
                       round((a.end_ns - a.start_ns) / 1000, 6)) for a in found.records.activities)
    assert work == expected
    names = {s.name for s in timeline.slices if stream_of(s.thread) is not None}
    assert {"gemm<float>", "fill", "relu", "add"} <= names  # kernels by their names


def test_no_two_slices_overlap_on_a_track_and_a_stream_spreads_over_tracks_where_its_records_overlap(timeline):
    tracks: dict[tuple, list[Slice]] = {}
    for s in timeline.slices:
        tracks.setdefault((s.pid, s.tid), []).append(s)
    for mine in tracks.values():
        mine.sort(key=lambda s: s.ts)
        assert all(later.ts >= earlier.ts + earlier.dur for earlier, later in zip(mine, mine[1:])), mine
    stream_7 = {s.thread for s in timeline.slices if stream_of(s.thread) == 7}
    assert len(stream_7) == 2  # gemm and fill overlap
    assert len({s.thread for s in timeline.slices if s.process.startswith("host") and s.name.startswith("cuMem")
                and s.dur < 50}) == 2  # two short calls at once: two tracks


def test_pageable_copies_are_marked_and_pinned_ones_are_not(timeline):
    copies = {s.args.get("correlation"): s for s in timeline.slices if s.name.startswith("H2D")}
    assert "pageable" in copies[5].name and "pageable" in copies[5].category
    assert copies[5].args["host_memory"] == "pageable"
    assert "pageable" not in copies[2].name + copies[2].category and copies[2].args["host_memory"] == "pinned"


def test_the_hosts_waits_are_on_a_host_track_with_the_line_that_waited(found, timeline):
    waits = sorted((s.name, round(s.dur, 6), s.args["line"]) for s in timeline.slices
                   if s.process.startswith("host") and s.thread.startswith("host waits"))
    assert waits == sorted((c.call, (c.end_ns - c.start_ns) / 1000, f"/u/x.py:{line}")
                           for c, line in zip(CALLS, (5, 6, 7, 9, 10)) if c.end_ns - c.start_ns >= WAIT_NS)
    assert [w[0] for w in waits] == ["cuMemcpyHtoD", "cuStreamSynchronize"]
    idle = sorted((s.process, round(s.dur, 6), s.args["after"], s.args["line"]) for s in timeline.slices
                  if s.thread == "idle")
    assert idle == [("GPU 0", 80.0, "cuStreamSynchronize", "/u/x.py:9"),
                    ("GPU 0", 140.0, "cuMemsetD8Async", "/u/x.py:7")]  # each GPU's own gaps, on its process


def test_a_flow_runs_from_each_call_to_the_gpu_work_it_enqueued(found, timeline):
    made = {c.correlation: c for c in found.records.calls}
    expected = sorted((made[a.correlation].call, round((a.start_ns - made[a.correlation].start_ns) / 1000, 6))
                      for a in found.records.activities if a.correlation in made)
    assert len(expected) == 3  # the two uploads and the memset; kernel launches are not watched
    flows = sorted((source.name, round(target.ts - source.ts, 6)) for source, target in timeline.flows)
    assert flows == expected
    assert all(source.process.startswith("host") and target.process.startswith("GPU")
               for source, target in timeline.flows)


def test_the_file_carries_the_traces_numbers_and_every_gpu_has_a_process(found, timeline):
    assert timeline.other["target"] == "x.py:step" and timeline.other["makespan_ms"] == found.makespan_ms
    assert {s.process for s in timeline.slices} == {"host: x.py:step", "GPU 0", "GPU 1"}


def test_a_trace_of_nothing_is_an_empty_timeline(tmp_path):
    found = result_of([Recording([], [])], copy_bound=None, pinned=None)
    timeline = read_timeline(found.to_perfetto(tmp_path / "nothing.json"))
    assert timeline.slices == [] and timeline.flows == []


def test_trace_refuses_a_perfetto_file_that_is_not_json_before_looking_for_a_gpu(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["trace", "--perfetto", "t.pftrace", "json:dumps"]) == 2
    err = capsys.readouterr().err
    assert err == "bench: error: --perfetto: t.pftrace is not a .json file\n" and not list(tmp_path.iterdir())
    (tmp_path / "d.json").mkdir()
    assert cli.main(["trace", "--perfetto", "d.json", "json:dumps"]) == 2
    assert "--perfetto: d.json is a directory" in capsys.readouterr().err


def test_trace_with_perfetto_without_a_gpu_writes_nothing(tmp_path, monkeypatch, capsys, no_gpu):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["trace", "--perfetto", "t.json", "json:dumps"]) == 2
    assert f"trace needs a GPU: {no_gpu}" in capsys.readouterr().err and not list(tmp_path.iterdir())


# --- the committed export of the README example, traced on a GPU -----------------------------------------------------

EXPORTS = [path for path in sorted((Path(__file__).resolve().parents[1] / "results" / "_trace").glob("*-readme-*.json"))
           if '"traceEvents"' in path.read_text(encoding="utf-8")]  # not bench trace --json's outputs


@pytest.mark.parametrize("export", EXPORTS, ids=[path.name for path in EXPORTS])
def test_a_committed_export_holds_its_saved_trace(export):
    """Each committed export of the README example (gpu_check trace-readme) reads back as a timeline whose GPU slices
    are the described run's kernels and copies of the rows saved beside it, none overlapping on a track, with a
    flow from every copy to the watched call that made it."""
    import pandas as pd

    timeline = read_timeline(export)
    rows = pd.read_parquet(export.with_suffix(".parquet"))
    gpu = [s for s in timeline.slices if s.process.startswith("GPU")]
    records = rows[rows["op"].isin(["kernel", "H2D", "D2H", "D2D", "memset"])]
    assert len(records) and sorted(s.dur for s in gpu if s.thread != "idle") == pytest.approx(
        sorted((records["end_ms"] - records["start_ms"]) * 1000), abs=1e-3)
    tracks: dict[tuple, list[Slice]] = {}
    for s in timeline.slices:
        tracks.setdefault((s.pid, s.tid), []).append(s)
    for mine in tracks.values():
        mine.sort(key=lambda s: s.ts)
        assert all(later.ts >= earlier.ts + earlier.dur - 1e-6 for earlier, later in zip(mine, mine[1:]))
    copies = [s for s in gpu if s.name.startswith(("H2D", "D2H"))]
    assert {id(target) for _, target in timeline.flows} >= {id(s) for s in copies}
    pageable = rows[(rows["op"].isin(["H2D", "D2H"])) & (rows["host_memory"] == "pageable")]
    assert sum("pageable" in s.category for s in copies) == len(pageable)
