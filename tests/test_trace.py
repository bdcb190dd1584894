"""``bench trace`` without a GPU: the overlap arithmetic, the bound, the gaps joined with the host calls that caused
them, the pageable copies and host waits, on recordings built by hand (times in ns on CUPTI's clock); the rows, the
results file, the report section and the figure; the command line's refusals and ``assert_overlap``'s arguments."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import synthetic
from bench import cli, report
from bench.analysis import plots
from bench.results import store
from bench.trace import GAP_NS, JOIN_NS, WAIT_NS, HostWait, describe, result_of, save
from bench.usercode.activity import Activity, HostCall, Op, Recording
from bench.usercode.stacks import Frame
from bench.usercode.tools import tool
from paths import with_path

SRC = str(Path(__file__).resolve().parents[1] / "src")
US = 1_000  # ns
MS = 1_000_000
MIB = 1 << 20
TRACE = tool("trace")


# --- building recordings -------------------------------------------------------------------------------------------

def kernel(stream, start, end, name="k", correlation=0):
    return Activity(Op.KERNEL, stream, start, end, name=name, correlation=correlation)


def copy(op, stream, start, end, nbytes=MIB, memory="pinned", correlation=0):
    return Activity(op, stream, start, end, bytes=nbytes, host_memory=memory, correlation=correlation)


def at(file, line):
    """The frames of a call made at ``file:line`` in the user's code, through a library below it."""
    return (Frame("/u/main.py", 1, "<module>", ""), Frame(file, line, "step", ""),
            Frame("/site-packages/torch/cuda/__init__.py", 900, "synchronize", "torch"))


def call(name, start, end, correlation=0, frames=()):
    return HostCall(name, start, end, correlation, frames=frames)


def analysed(activities, calls=(), copy_bound=None, pinned=None, **kwargs):
    """The result of one recording; ``copy_bound`` and ``pinned`` fail the test unless given."""
    def unexpected(*args):
        raise AssertionError(f"not expected to be asked: {args}")

    return result_of([Recording(list(activities), list(calls))], copy_bound=copy_bound or unexpected,
                     pinned=pinned or unexpected, **kwargs)


# µs: H2D s1 0-100; kernels s2 50-150 and s1 100-300; D2H s2 150-250; memset s3 300-320; a gap of exactly GAP_NS;
# D2D s3 330-380; a gap of 5 µs; H2D s1 385-400 beside D2H s2 390-420.
PIPELINE = [copy(Op.H2D, 1, 0, 100 * US), kernel(2, 50 * US, 150 * US), kernel(1, 100 * US, 300 * US),
            copy(Op.D2H, 2, 150 * US, 250 * US), Activity(Op.MEMSET, 3, 300 * US, 320 * US, bytes=4096),
            copy(Op.D2D, 3, 330 * US, 380 * US, 4 * MIB, "device"), copy(Op.H2D, 1, 385 * US, 400 * US, 2 * MIB),
            copy(Op.D2H, 2, 390 * US, 420 * US, 3 * MIB)]


# --- the overlap arithmetic and the bound ----------------------------------------------------------------------------

def test_overlap_arithmetic_of_a_pipeline():
    found = analysed(PIPELINE, copy_bound=lambda h2d, d2h: (0.2, 2))
    assert found.makespan_ms == 0.42 and found.runs.makespans_ms == [0.42] and found.records.origin_ns == 0
    whole = found.whole
    assert whole.busy_ms == {"compute": 0.27, "H2D": 0.115, "D2H": 0.13, "D2D": 0.05}  # compute: 50-320, memset too
    assert whole.copy_ms == 0.235  # 0-100, 150-250, 385-420
    assert whole.hidden_ms == 0.15 and found.hidden == pytest.approx(0.15 / 0.235)  # 50-100 and 150-250
    assert whole.duplex_ms == 0.01 and whole.concurrent_kernels_ms == 0.05
    assert whole.fill_ms == 0.05 and whole.drain_ms == 0.1  # compute ends with the memset at 320
    assert [(gap.start_ns, gap.end_ns, gap.wait) for gap in found.gaps] == [(320 * US, 330 * US, None)]
    assert GAP_NS == 10 * US and found.idle_ms == pytest.approx(0.01)  # the 5 µs gap is launch latency


@pytest.mark.parametrize("idle_ns, gaps", [(GAP_NS - 1, 0), (GAP_NS, 1)])
def test_gaps_shorter_than_gap_ns_are_not_gaps(idle_ns, gaps):
    found = analysed([kernel(1, 0, 100 * US), kernel(1, 100 * US + idle_ns, 200 * US + idle_ns)])
    assert len(found.gaps) == gaps and found.whole.busy_ms["compute"] == 0.2


@pytest.mark.parametrize("copies_ms, engines, bound", [(0.2, 2, 0.27), (0.3, 1, 0.3)])
def test_the_bound_is_the_largest_of_compute_the_copies_and_d2d(copies_ms, engines, bound):
    asked = []
    found = analysed(PIPELINE, copy_bound=lambda h2d, d2h: asked.append((h2d, d2h)) or (copies_ms, engines))
    assert asked == [(3 * MIB, 4 * MIB)]  # the bytes of each direction, D2D not among them
    assert found.bound.terms == {"compute": 0.27, "copies": copies_ms, "D2D": 0.05}
    assert found.bound_ms == bound and found.efficiency == bound / 0.42 and found.bound.copy_engines == engines


def test_d2d_can_be_the_bound():
    found = analysed([kernel(1, 0, 100 * US), copy(Op.D2D, 2, 0, 500 * US, memory="device")])
    assert found.bound.terms == {"compute": 0.1, "D2D": 0.5} and found.bound_ms == 0.5 and found.efficiency == 1.0


def test_without_copies_the_bound_is_compute_and_copy_bound_is_not_asked():
    found = analysed([kernel(1, 0, 100 * US), kernel(1, 150 * US, 250 * US)])
    assert found.bound.terms == {"compute": 0.2} and found.bound_ms == 0.2 and found.efficiency == 0.2 / 0.25
    assert found.bound.copy_engines is None and found.hidden is None and found.whole.copy_ms == 0


def test_copies_without_a_copy_bound_have_no_bound():
    found = result_of([Recording(PIPELINE, [])], copy_bound=None, pinned=lambda op, nbytes: (0.0, "measured"))
    assert found.bound_ms is None and found.efficiency is None and found.bound.terms == {"compute": 0.27, "D2D": 0.05}
    assert found.whole.hidden_ms == 0.15  # the rest is measured as before
    assert not any(line.startswith("runs at") for line in describe(found))


def test_nothing_recorded_is_a_result_of_nothing():
    found = analysed([])
    assert found.makespan_ms == 0 and found.bound_ms is None and found.efficiency is None and found.gaps == []
    assert describe(found) == ["makespan 0.000 ms: 0 kernels, 0 copies on 0 streams", "busy ms: nothing ran",
                               "idle 0.000 ms in 0 gaps"]


def test_describe_says_the_numbers():
    found = analysed(PIPELINE, copy_bound=lambda h2d, d2h: (0.2, 2))
    assert describe(found) == [
        "makespan 0.420 ms: 2 kernels, 5 copies on 3 streams",
        "runs at 64% of what its copies and kernels allow: bound 0.270 ms (compute 0.270, copies 0.200, D2D 0.050); "
        "fill 0.050 ms, drain 0.100 ms",
        "busy ms: compute 0.270, H2D 0.115, D2H 0.130, D2D 0.050",
        "copies hidden behind compute: 64% (0.150 of 0.235 ms); H2D and D2H at once 0.010 ms; kernels at once "
        "0.050 ms",
        "idle 0.010 ms in 1 gap"]
    assert str(found) == "\n".join(describe(found))


# --- several runs ----------------------------------------------------------------------------------------------------

def test_the_run_of_median_makespan_is_described():
    recordings = [Recording([kernel(1, start, start + ms * MS, name=f"run{ms}")], [])
                  for start, ms in ((10 * MS, 5), (20 * MS, 9), (30 * MS, 7))]
    found = result_of(recordings, copy_bound=None, pinned=None, untraced_ms=[2.0, 4.0, 3.0],
                      traced_ms=[2.2, 4.8, 3.9])
    assert found.runs.makespans_ms == [5.0, 9.0, 7.0] and found.makespan_ms == 7.0
    assert [activity.name for activity in found.records.activities] == ["run7"] and found.records.origin_ns == 30 * MS
    assert found.overhead == pytest.approx(0.2)  # the runs paired: 1.1, 1.2, 1.3 (the medians' ratio: 1.3)
    summary = found.summary()
    assert (summary["makespan_min_ms"], summary["makespan_max_ms"], summary["runs"]) == (5.0, 9.0, 3)
    assert (summary["untraced_host_ms"], summary["traced_host_ms"]) == (3.0, 3.9)


def test_every_traced_run_keeps_its_numbers_and_the_results_file_their_spread(tmp_path):
    """Each run's makespan, efficiency, hidden share, idle time, pageable cost and time per kernel name, as a
    comparison of two traces judges a change against them; a reference asked once however many runs need it."""
    def recording(start, gemm_ms, gap_ms, pageable_bytes):  # relu and a pageable upload gap_ms after gemm
        relu = start + (gemm_ms + gap_ms) * MS
        return Recording([copy(Op.H2D, 1, start, start + MS // 2), kernel(2, start, start + gemm_ms * MS, "gemm"),
                          kernel(2, relu, relu + MS, "relu"), copy(Op.H2D, 1, relu, relu + MS, pageable_bytes,
                                                                   "pageable")], [])

    bounds, references = [], []
    found = result_of([recording(0, 4, 0, MIB), recording(100 * MS, 2, 1, MIB), recording(200 * MS, 3, 1, 2 * MIB)],
                      copy_bound=lambda h2d, d2h: bounds.append((h2d, d2h)) or (3.0, 2),
                      pinned=lambda op, nbytes: references.append(nbytes) or (0.5 * nbytes / MIB, "measured"))
    assert found.runs.makespans_ms == [5.0, 4.0, 5.0] and found.makespan_ms == 5.0
    assert found.records.origin_ns == 0  # the first
    assert [run.makespan_ms for run in found.runs.per_run] == found.runs.makespans_ms
    assert [run.kernel_ms for run in found.runs.per_run] == [{"gemm": 4.0, "relu": 1.0}, {"gemm": 2.0, "relu": 1.0},
                                                             {"gemm": 3.0, "relu": 1.0}]
    assert [run.idle_ms for run in found.runs.per_run] == [0.0, 1.0, 1.0]  # the gap between gemm and relu
    assert [run.pageable_cost_ms for run in found.runs.per_run] == [0.5, 0.5, 0.0]  # 1 ms against 0.5 and 1 ms pinned
    assert [run.efficiency for run in found.runs.per_run] == [1.0, 0.75, 0.8]  # max(compute, copies 3 ms) / makespan
    assert [run.hidden for run in found.runs.per_run] == [1.0, 1.0, 1.0]
    assert found.runs.per_run[0].efficiency == found.efficiency and found.runs.per_run[0].idle_ms == found.idle_ms
    assert bounds == [(2 * MIB, 0), (3 * MIB, 0)]  # the described run's bytes, then the third run's: once each
    assert references == [MIB, 2 * MIB]  # the described run's group, then the size only the third run copied
    path = save([("x.py:step", found)], synthetic.environment(), tmp_path / "_trace" / "x.parquet")
    rows = store.named_tables(tmp_path, "trace")
    assert path.is_file() and set(map(tuple, rows["makespan_runs_ms"])) == {(5.0, 4.0, 5.0)}
    assert set(map(tuple, rows["idle_runs_ms"])) == {(0.0, 1.0, 1.0)}
    kernels = rows[rows["op"] == "kernel"]
    assert {name: tuple(runs) for name, runs in zip(kernels["name"], kernels["name_runs_ms"])} == {
        "gemm": (4.0, 2.0, 3.0), "relu": (1.0, 1.0, 1.0)}
    assert rows[rows["op"] != "kernel"]["name_runs_ms"].isna().all()


def test_a_run_without_a_number_keeps_nan_in_the_spread_and_none_without_any(tmp_path):
    """Hidden share: a run that copied nothing has none; efficiency: runs that copied have no bound without a copy
    bound. The file keeps NaN for that run, and nothing where no run has the number."""
    copied = [kernel(1, 0, MS, "k"), copy(Op.H2D, 2, 0, MS // 2)]
    found = result_of([Recording(copied, []), Recording(copied[:1], []), Recording(copied, [])], copy_bound=None,
                      pinned=None)
    assert [run.hidden for run in found.runs.per_run] == [1.0, None, 1.0]
    assert [run.efficiency for run in found.runs.per_run] == [None, 1.0, None]
    save([("x", found)], synthetic.environment(), tmp_path / "_trace" / "x.parquet")
    rows = store.named_tables(tmp_path, "trace")
    hidden, efficiency = rows["hidden_runs"].iloc[0], rows["efficiency_runs"].iloc[0]
    assert hidden[0] == 1.0 and hidden[1] != hidden[1] and efficiency[1] == 1.0 and efficiency[0] != efficiency[0]
    other = result_of([Recording(copied, [])] * 2, copy_bound=None, pinned=None)
    save([("y", other)], synthetic.environment(), tmp_path / "_trace" / "y.parquet")
    rows = store.named_tables(tmp_path, "trace")
    assert rows[rows["target"] == "y"]["efficiency_runs"].isna().all()


# --- gaps joined with the host's calls -------------------------------------------------------------------------------

@pytest.mark.parametrize("start, end, joined", [
    (50 * US, 900 * US, True),  # under way when the GPU ran dry at 100 µs, returned before it resumed
    (0, 100 * US - JOIN_NS, True),  # returned just JOIN_NS before: still the call it waited in
    (0, 100 * US - JOIN_NS - 1, False),  # returned earlier: the host ran Python meanwhile
    (50 * US, 1000 * US + 1, False),  # returned after the gap ended: not what the GPU waited for
    (150 * US, 900 * US, False),  # began after the GPU ran dry
])
def test_a_gap_is_joined_with_the_call_the_host_was_in(start, end, joined):
    waited = call("cuStreamSynchronize", start, end, frames=at("/u/train.py", 12))
    found = analysed([kernel(1, 0, 100 * US), kernel(1, 1000 * US, 1100 * US)], [waited])
    assert [(gap.start_ns, gap.end_ns) for gap in found.gaps] == [(100 * US, 1000 * US)]
    assert found.gaps[0].wait == (waited if joined else None)
    assert found.summary()["gaps_after_waits"] == joined
    idle = [row for row in found.table() if row["op"] == "idle"]
    assert [(row["call"], row["line"]) for row in idle] == [
        ("cuStreamSynchronize", "/u/train.py:12") if joined else ("", "")]  # the innermost user frame


def test_of_the_calls_under_way_the_last_to_return_is_joined():
    first = call("cuMemcpyDtoH", 20 * US, 400 * US, frames=at("/u/a.py", 3))
    last = call("cuCtxSynchronize", 60 * US, 800 * US, frames=at("/u/a.py", 4))
    found = analysed([kernel(1, 0, 100 * US), kernel(1, 1000 * US, 1100 * US)], [last, first])
    assert found.gaps[0].wait == last
    assert any(line == "  0.900 ms after cuCtxSynchronize (0.740 ms) at /u/a.py:4" for line in describe(found))


# --- pageable copies and host waits ----------------------------------------------------------------------------------

def test_pageable_copies_group_by_direction_size_and_line():
    here, there = at("/u/load.py", 7), at("/u/load.py", 9)
    activities = [copy(Op.H2D, 1, 0, 300 * US, MIB, "pageable", correlation=1),
                  copy(Op.H2D, 1, 300 * US, 600 * US, MIB, "pageable", correlation=2),
                  copy(Op.H2D, 1, 600 * US, 1000 * US, 2 * MIB, "pageable", correlation=3),
                  copy(Op.H2D, 1, 1000 * US, 1200 * US, MIB, "pageable", correlation=4),
                  copy(Op.D2H, 1, 1200 * US, 1500 * US, MIB, "pageable", correlation=5),
                  copy(Op.H2D, 1, 1500 * US, 1600 * US, MIB, "pinned", correlation=6)]
    calls = [call("cuMemcpyHtoD", 0, 350 * US, 1, here), call("cuMemcpyHtoD", 350 * US, 700 * US, 2, here),
             call("cuMemcpyHtoD", 700 * US, 1100 * US, 3, here), call("cuMemcpyHtoD", 1100 * US, 1250 * US, 4, there),
             call("cuMemcpyDtoH", 1250 * US, 1600 * US, 5, here), call("cuMemcpyHtoD", 1600 * US, 1610 * US, 6, here)]
    asked = []
    found = analysed(activities, calls, copy_bound=lambda h2d, d2h: (1.0, 2),
                     pinned=lambda op, nbytes: asked.append((op, nbytes)) or (0.1 * nbytes / MIB, "measured"))
    groups = {(group.op, group.bytes, group.line): group for group in found.pageable}
    assert set(groups) == {(Op.H2D, MIB, "/u/load.py:7"), (Op.H2D, 2 * MIB, "/u/load.py:7"),
                           (Op.H2D, MIB, "/u/load.py:9"), (Op.D2H, MIB, "/u/load.py:7")}  # the pinned copy: none
    assert sorted(asked) == sorted((op, nbytes) for op, nbytes, _ in groups)  # one reference per group
    pair = groups[(Op.H2D, MIB, "/u/load.py:7")]
    assert (pair.count, pair.pinned_ms, pair.reference) == (2, 0.1, "measured")
    assert pair.ms == pytest.approx(0.6) and pair.host_ms == pytest.approx(0.7)
    assert pair.cost_ms == pytest.approx(0.6 - 2 * 0.1)
    larger = groups[(Op.H2D, 2 * MIB, "/u/load.py:7")]
    assert (larger.count, larger.ms, larger.pinned_ms, larger.host_ms) == (1, 0.4, 0.2, 0.4)
    assert found.pageable_cost_ms == pytest.approx(0.4 + 0.2 + 0.1 + 0.2)
    assert found.summary()["pageable_copies"] == 5


def test_without_the_driver_calls_a_pageable_copys_host_time_is_unknown_not_zero():
    found = analysed([copy(Op.H2D, 1, 0, 300 * US, MIB, "pageable", correlation=1)],
                     copy_bound=lambda h2d, d2h: (1.0, 2), pinned=lambda op, nbytes: (0.1, "measured"))  # --no-lines
    assert found.pageable[0].host_ms is None and "host" not in str(found).split("pageable cop")[1].splitlines()[1]
    assert json.loads(found.to_json())["pageable"][0]["host_ms"] is None


def test_host_waits_group_by_line_and_leave_short_calls_out():
    calls = [call("cuStreamSynchronize", 0, 100 * US, frames=at("/u/a.py", 3)),
             call("cuCtxSynchronize", 200 * US, 260 * US, frames=at("/u/a.py", 3)),
             call("cuStreamSynchronize", 300 * US, 300 * US + WAIT_NS, frames=at("/u/b.py", 8)),
             call("cuMemcpyHtoD", 400 * US, 400 * US + WAIT_NS - 1, frames=at("/u/a.py", 3))]
    found = analysed([kernel(1, 0, 1000 * US)], calls)
    assert found.waits == [HostWait("/u/a.py:3", "", "cuCtxSynchronize, cuStreamSynchronize", 2, pytest.approx(0.16)),
                           HostWait("/u/b.py:8", "", "cuStreamSynchronize", 1, 0.05)]  # the longest first


# --- rows, JSON and the copies exposed longest -----------------------------------------------------------------------

ORIGIN = 7 * 10**12  # CUPTI's clock is far from zero


def timeline():
    """A kernel and a copy beside it on two streams, a gap of 100 µs after a host wait, a second kernel."""
    sync = call("cuStreamSynchronize", ORIGIN + 90 * US, ORIGIN + 180 * US, 3, at("/u/x.py", 9))
    upload = call("cuMemcpyHtoDAsync", ORIGIN + 10 * US, ORIGIN + 15 * US, 2, at("/u/x.py", 5))
    activities = [kernel(7, ORIGIN + 200 * US, ORIGIN + 250 * US, "add", 4),
                  copy(Op.H2D, 8, ORIGIN + 20 * US, ORIGIN + 60 * US, 4096, "pinned", 2),
                  kernel(7, ORIGIN, ORIGIN + 100 * US, "gemm", 1)]
    return analysed(activities, [upload, sync], copy_bound=lambda h2d, d2h: (0.04, 2), target="x.py:step")


def row(op, stream, start_ms, end_ms, nbytes=0, memory="", name="", made="", line="", device=0, correlation=None,
        call_ms=(None, None)):
    return {"op": op, "device": device, "rank": None, "stream": stream, "start_ms": start_ms, "end_ms": end_ms,
            "bytes": nbytes, "host_memory": memory, "name": name, "call": made, "line": line,
            "correlation": correlation, "call_start_ms": call_ms[0], "call_end_ms": call_ms[1], "pinned_ms": None}


def test_the_table_has_a_row_per_activity_gap_and_wait_from_the_first_gpu_start():
    assert timeline().table() == [
        row("kernel", 7, 0.0, 0.1, name="gemm", correlation=1),
        row("H2D", 8, 0.02, 0.06, 4096, "pinned", made="cuMemcpyHtoDAsync", line="/u/x.py:5", correlation=2,
            call_ms=(0.01, 0.015)),
        row("kernel", 7, 0.2, 0.25, name="add", correlation=4),
        row("idle", -1, 0.1, 0.2, made="cuStreamSynchronize", line="/u/x.py:9", correlation=3, call_ms=(0.09, 0.18)),
        row("wait", -2, 0.09, 0.18, made="cuStreamSynchronize", line="/u/x.py:9", device=None, correlation=3,
            call_ms=(0.09, 0.18))]


def test_json_has_no_nan():
    def no_constants(name):
        raise AssertionError(f"{name} in the JSON")

    found = analysed([copy(Op.H2D, 1, 0, 100 * US, MIB, "pageable")], copy_bound=lambda h2d, d2h: (0.05, 2),
                     pinned=lambda op, nbytes: (float("nan"), "measured"))  # a reference that could not be had
    assert found.pageable[0].cost_ms != found.pageable[0].cost_ms
    parsed = json.loads(found.to_json(), parse_constant=no_constants)
    assert parsed["pageable"][0]["pinned_ms"] is None and parsed["pageable"][0]["cost_ms"] is None
    assert parsed["pageable_cost_ms"] is None and parsed["overhead"] is None and parsed["hidden"] == 0.0
    assert parsed["activities"] == found.table() and parsed["makespan_ms"] == 0.1
    whole = json.loads(timeline().to_json(), parse_constant=no_constants)
    assert whole["target"] == "x.py:step" and whole["gaps_list"] == [
        {"start_ms": 0.1, "ms": 0.1, "device": 0, "call": "cuStreamSynchronize", "line": "/u/x.py:9"}]
    assert whole["waits"] == [{"line": "/u/x.py:9", "source": "", "call_names": "cuStreamSynchronize", "count": 1,
                               "ms": 0.09}]


def test_worst_copies_are_ordered_by_time_exposed_outside_compute():
    hidden = copy(Op.H2D, 1, 0, 80 * US, correlation=1)  # all of it beside the kernel
    exposed = copy(Op.D2H, 2, 50 * US, 200 * US, correlation=2)  # 50 of its 150 µs beside the kernel
    partly = copy(Op.H2D, 1, 300 * US, 340 * US, correlation=3)  # 20 of its 40 µs beside the memset
    download = call("cuMemcpyDtoHAsync", 40 * US, 45 * US, 2, at("/u/x.py", 3))
    found = analysed([kernel(3, 0, 100 * US), Activity(Op.MEMSET, 3, 250 * US, 320 * US, bytes=64), hidden, exposed,
                      partly, copy(Op.D2D, 2, 400 * US, 900 * US, memory="device")], [download],
                     copy_bound=lambda h2d, d2h: (0.1, 2))
    assert found.worst_copies() == [(exposed, 0.1), (partly, 0.02), (hidden, 0.0)]  # D2D is no link copy
    assert found.worst_copies(1) == [(exposed, 0.1)]
    assert found.line_of(exposed) == "/u/x.py:3" and found.line_of(hidden) == ""


# --- the results file, the report and the figure ---------------------------------------------------------------------

@pytest.fixture
def saved(tmp_path):
    """The timeline saved as results/_trace/x.parquet: (its path, the rows read back)."""
    path = tmp_path / "_trace" / "x.parquet"
    assert save([("x.py:step", timeline())], synthetic.environment(), path) == path
    return path, store.named_tables(tmp_path, "trace")


def test_saved_rows_read_back_and_a_second_save_never_replaces_the_file(saved, tmp_path):
    from bench.results.schema import environment_columns
    from bench.trace import columns

    path, rows = saved
    names = [column.name for column in columns()]
    assert len(names) == len(set(names)) and set(rows.columns) == set(names)
    assert {column.name for column in environment_columns()} <= set(names)
    assert rows["op"].tolist() == ["kernel", "H2D", "kernel", "idle", "wait"]
    assert set(rows["target"]) == {"x.py:step"} and set(rows["makespan_ms"]) == {0.25} and set(rows["runs"]) == {1}
    assert set(rows["efficiency"]) == {0.15 / 0.25} and set(rows["gpu_uuid"]) == {synthetic.ENV["gpu_uuid"]}
    first = path.read_bytes()
    again = save([("x.py:step", timeline())], synthetic.environment(), path)
    assert again == path.with_name("x_2.parquet") and path.read_bytes() == first  # beside it, never over it


def test_the_report_section_names_the_target_and_embeds_the_timeline(saved):
    section = report.tool_section(TRACE, TRACE.section(saved[1]))
    assert "How much code overlapped (bench trace)" in section and "x.py:step" in section
    assert section.count("data:image/png;base64,") == 1


def test_the_figure_has_a_lane_per_stream_and_for_idle_and_waits(saved):
    figure = TRACE.figure(saved[1], "x.py:step on Test GPU")
    try:
        ticks = [label.get_text() for label in figure.axes[0].get_yticklabels()]
    finally:
        plots.pyplot().close(figure)
    assert ticks == ["stream 7", "stream 8", "GPU idle", "host waits"]


def test_a_file_from_before_the_device_column_read_with_newer_ones_draws_its_lanes(saved):
    rows = saved[1].astype({"device": "Int64"}).assign(device=pd.NA)  # as a frame of old and new files holds it
    figure = TRACE.figure(rows, "x.py:step on Test GPU")
    try:
        ticks = [label.get_text() for label in figure.axes[0].get_yticklabels()]
        bars = sum(len(collection.get_paths()) for collection in figure.axes[0].collections)
    finally:
        plots.pyplot().close(figure)
    assert ticks == ["stream 7", "stream 8", "GPU idle", "host waits"] and bars == len(rows)


# --- the command line and the pytest helper --------------------------------------------------------------------------

@pytest.fixture
def main(tmp_path, monkeypatch, capsys):
    """``bench`` in this process, in an empty directory: (exit status, stdout, stderr)."""
    monkeypatch.chdir(tmp_path)

    def run(*args):
        status = cli.main(list(args))
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    return run


def assert_refused(status, stderr, said, directory, before=()):
    """Exit 2, one line on stderr saying ``said``, nothing written to ``directory`` beyond ``before``."""
    assert status == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bench: error: ") and said in lines[0], stderr
    assert sorted(path.name for path in Path(directory).iterdir()) == sorted(before)


@pytest.mark.parametrize("args, said", [
    (["train"], "trace: 'train' is not MODULE:FUNCTION, FILE.py:FUNCTION or SCRIPT.py"),
    (["json:dumps", "--fast"], "trace: --fast: options go before the target (arguments follow only a script)"),
    (["missing.py"], "trace: missing.py is not a file"),
    (["--runs", "0", "json:dumps"], "argument --runs: '0' is not a positive whole number"),
    (["--plot", "out.txt", "json:dumps"], "--plot: out.txt is not a .png or .svg file"),
])
def test_trace_refuses_bad_arguments_before_looking_for_a_gpu(main, tmp_path, args, said):
    status, out, err = main("trace", *args)
    assert_refused(status, err, said, tmp_path)
    assert "needs a GPU" not in err


def test_trace_never_replaces_a_results_file(main, tmp_path):
    (tmp_path / "r.parquet").write_bytes(b"results")
    status, out, err = main("trace", "--save", "r.parquet", "json:dumps")
    assert_refused(status, err, "--save: r.parquet already exists; bench never replaces a results file", tmp_path,
                   ["r.parquet"])
    assert (tmp_path / "r.parquet").read_bytes() == b"results"


def test_trace_without_a_gpu(main, tmp_path, no_gpu):
    status, out, err = main("trace", "--save", "t.parquet", "--plot", "t.png", "json:dumps")
    assert_refused(status, err, f"trace needs a GPU: {no_gpu}", tmp_path)


def test_trace_refuses_from_a_real_process(tmp_path):
    result = subprocess.run([sys.executable, "-m", "bench", "trace", "train"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120, env={**os.environ, "PYTHONPATH": with_path(SRC)})
    assert_refused(result.returncode, result.stderr, "is not MODULE:FUNCTION", tmp_path)
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize("arguments, said", [({"min_hidden": 1.5}, "min_hidden must be between 0 and 1"),
                                             ({"min_efficiency": -0.1}, "min_efficiency must be between 0 and 1")])
def test_assert_overlap_refuses_shares_outside_0_to_1_before_tracing(arguments, said):
    from bench.pytest_plugin import assert_overlap

    with pytest.raises(ValueError, match=said):  # with or without a GPU: not TraceUnavailable, nothing traced
        with assert_overlap(**arguments):
            raise AssertionError("the block ran")


def test_bench_exposes_trace_and_importing_it_loads_no_gpu_library():
    """Nor numpy or pandas: ``import bench`` is what every command line start pays."""
    script = ("import sys\nimport bench\nimport bench.trace\n"
              "print(all(hasattr(bench, name) for name in ('trace', 'tracing', 'TraceResult')))\n"
              "print(sorted(m for m in sys.modules\n"
              "             if m.split('.')[0] in ('cupy', 'numba', 'torch', 'cupti', 'numpy', 'pandas')))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": with_path(SRC)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["True", "[]"]


def test_a_trace_of_nothing_draws_an_empty_timeline_that_says_so():
    figure = TRACE.figure(pd.DataFrame(analysed([]).table()), "nothing")
    try:
        (axes,) = figure.axes
        assert not axes.patches and not axes.collections  # no lane, no bar
        assert "nothing ran on the GPU" in [text.get_text() for text in axes.texts] + [axes.get_title()]
        assert plots.render(figure, "png").startswith(b"\x89PNG")
    finally:
        plots.pyplot().close(figure)


def test_a_trace_title_is_drawn_literally():
    svg = plots.rendered(TRACE.figure(pd.DataFrame(), "mod:step $\\bad{$ on GPU $5"), "svg").decode()
    assert "mod:step $\\bad{$ on GPU $5" in svg


def test_pinned_references_come_from_this_gpus_newest_pinned_bandwidth_rows():
    from bench.trace import pinned_results

    def row(uuid, memory, direction, nbytes, ms, run, status="ok", experiment="bandwidth"):
        return {"experiment": experiment, "gpu_uuid": uuid, "host_memory": memory, "direction": direction,
                "bytes": nbytes, "median_ms": ms, "status": status, "run_id": run}

    rows = pd.DataFrame([row("GPU-a", "pinned", "H2D", MIB, 0.4, "2"), row("GPU-a", "pinned", "H2D", MIB, 0.5, "1"),
                         row("GPU-a", "pageable", "H2D", MIB, 0.9, "2"), row("GPU-b", "pinned", "H2D", MIB, 0.1, "2"),
                         row("GPU-a", "pinned", "D2H", MIB, 0.6, "2", status="failed"),
                         row("GPU-a", "pinned", "D2H", 2 * MIB, 0.7, "2"),
                         row("GPU-a", "pinned", "H2D", 4 * MIB, 0.2, "2", experiment="zerocopy")])
    assert pinned_results(rows, "GPU-a") == {("H2D", MIB): 0.4, ("D2H", 2 * MIB): 0.7}
    assert pinned_results(rows, "GPU-c") == {} and pinned_results(pd.DataFrame({"x": [1]}), "GPU-a") == {}


def test_a_stack_to_the_user_line_stops_at_the_innermost_frame_of_the_users_code():
    from bench.usercode.stacks import frames_of, places_of, stack_of

    taken = {}

    def hook(document):  # called from json's own Python frames, below this test's
        caller = sys._getframe().f_back
        taken["short"], taken["whole"] = frames_of(places_of(caller, to_user_line=True)), stack_of(caller)
        return document

    json.loads("{}", object_hook=hook)
    short, whole = taken["short"], taken["whole"]
    assert short[0].library == "" and len(short) > 1 and {frame.library for frame in short[1:]} == {"python"}
    assert short[0].function == (
        "test_a_stack_to_the_user_line_stops_at_the_innermost_frame_of_the_users_code")
    assert whole[-len(short):] == short and len(whole) > len(short)


def test_the_copies_bound_counts_what_the_copy_engines_allow():
    from bench.usercode.pinned import CopyEngines

    assert CopyEngines(5.0, 5.2, engines=2, at_once=True).bound_ms() == 5.2  # both ways at once: the slower
    assert CopyEngines(5.0, 5.2, engines=1, at_once=False).bound_ms() == pytest.approx(10.2)  # one after the other
    assert CopyEngines(5.0, 0.0, engines=2, at_once=False).bound_ms() == 5.0  # one direction only


def test_the_text_shows_paths_below_the_working_directory_relative(tmp_path, monkeypatch):
    """As ``bench syncs`` does: the text names ``docs/examples/x.py:22``, not the checkout's absolute path (which
    the README would otherwise quote); the table keeps the whole path."""
    monkeypatch.chdir(tmp_path)
    here = str(tmp_path / "docs" / "train.py")
    last = call("cuCtxSynchronize", 60 * US, 800 * US, frames=at(here, 4))
    found = analysed([kernel(1, 0, 100 * US), kernel(1, 1000 * US, 1100 * US)], [last])
    text = describe(found)
    assert "  0.900 ms after cuCtxSynchronize (0.740 ms) at docs/train.py:4" in text, text
    assert "  host waited 0.740 ms in 1 × cuCtxSynchronize at docs/train.py:4" in text, text
    assert not any(str(tmp_path) in line for line in text)
    assert any(row["line"] == f"{here}:4" for row in found.table())


def test_a_wait_no_python_made_says_so_instead_of_an_empty_line():
    """A driver call from a library's own thread (PyTorch's autograd engine copying DDP's buckets) has no Python
    line: the text says so rather than ending in 'at '."""
    last = call("cuCtxSynchronize", 60 * US, 800 * US)
    text = describe(analysed([kernel(1, 0, 100 * US), kernel(1, 1000 * US, 1100 * US)], [last]))
    assert "  host waited 0.740 ms in 1 × cuCtxSynchronize in a thread without Python code" in text, text
    assert "  0.900 ms after cuCtxSynchronize (0.740 ms) in a thread without Python code" in text, text
    assert not any(line.rstrip().endswith(" at") for line in text)
