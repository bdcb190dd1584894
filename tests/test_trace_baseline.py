"""``bench trace --baseline`` without a GPU: a trace's rows (synthetic, saved as ``bench trace --save`` saves them)
against an earlier trace's, each regression named by line and stream, its three output forms, and the command
line's refusals."""

import pandas as pd
import pytest

from bench.usercode.trace.compare import read
from bench.usercode.trace.gate import github, summary, text
from bench.usercode.trace.regressions import Kind, regressions
from commands import assert_refused, bench
from test_compare_traces import saved, traced

SYNC = "cuStreamSynchronize"


@pytest.fixture
def rows(tmp_path) -> pd.DataFrame:
    return read(saved(tmp_path / "base.parquet", traced([2.0, 2.1, 2.0])))


def added(rows: pd.DataFrame, *extra: dict) -> pd.DataFrame:
    """The rows with ``extra`` rows (each like the first row, changed as given)."""
    first = rows.iloc[0].to_dict()
    return pd.concat([rows, pd.DataFrame([{**first, "name": "", "bytes": 0, **row} for row in extra])],
                     ignore_index=True)


def kinds(found) -> list[tuple[str, str]]:
    return [(str(regression.kind), regression.where) for regression in found]


def test_a_trace_against_itself_has_no_regression(rows):
    assert regressions(rows, rows) == []


def test_a_new_host_wait_is_named_by_its_line_and_a_moved_one_is_not(rows):
    wait = {"op": "wait", "stream": -2, "call": SYNC, "start_ms": 1.0, "end_ms": 1.5}
    before = added(rows, {**wait, "line": "/p/train.py:20"})
    moved = added(rows, {**wait, "line": "/p/train.py:24"})  # code added above it: the same file and call
    assert regressions(before, moved) == []
    more = added(rows, {**wait, "line": "/p/train.py:24"}, {**wait, "line": "/p/train.py:31", "start_ms": 1.6})
    found = regressions(before, more)
    assert kinds(found) == [("host wait", "/p/train.py:24")]
    assert found[0].text == f"2 waits in {SYNC} at /p/train.py, 1 before"


def test_a_copy_that_became_pageable_and_an_idle_gap_after_a_new_wait(rows):
    copy = {"op": "H2D", "stream": 9, "bytes": 1 << 20, "line": "/p/load.py:8", "start_ms": 0.1, "end_ms": 0.4}
    before = added(rows, {**copy, "host_memory": "pinned"})
    idle = {"op": "idle", "stream": -1, "call": "cuMemcpyHtoD_v2", "line": "/p/load.py:8", "start_ms": 3.0,
            "end_ms": 3.2}
    after = added(rows, {**copy, "host_memory": "pageable"}, idle)
    assert kinds(regressions(before, after)) == [("idle after a wait", "/p/load.py:8"),
                                                 ("pageable copy", "/p/load.py:8")]


def test_streams_whose_kernels_ran_at_once_and_now_serialize(rows):
    kernel = {"op": "kernel", "name": "k"}
    together = added(rows, {**kernel, "stream": 7, "start_ms": 0.0, "end_ms": 1.0},
                     {**kernel, "stream": 8, "start_ms": 0.5, "end_ms": 1.5})
    apart = added(rows, {**kernel, "stream": 7, "start_ms": 0.0, "end_ms": 1.0},
                  {**kernel, "stream": 8, "start_ms": 1.0, "end_ms": 2.0})
    found = regressions(together, apart)
    assert kinds(found) == [("streams serialize", "")] and found[0].streams == (7, 8)
    assert regressions(apart, together) == []  # streams that now overlap: better, not a regression


def test_copies_hidden_beyond_both_traces_runs_fail(tmp_path, rows):
    shorter = read(saved(tmp_path / "new.parquet", traced([0.1, 0.1, 0.12])))  # the upload no longer hides
    found = [regression for regression in regressions(rows, shorter) if regression.kind == Kind.SHARE]
    assert [regression.text.split(" fell")[0] for regression in found] == ["copies hidden"]


def test_the_forms_name_the_line_and_escape_what_it_holds(rows):
    wait = {"op": "wait", "stream": -2, "call": "cu%Sync\ncall", "start_ms": 1.0, "end_ms": 1.5,
            "line": "/p/a,b:c.py:12"}
    found = regressions(rows, added(rows, wait))
    lines = github(found, "t", "base.parquet").splitlines()
    assert lines[0].startswith("::error file=/p/a%2Cb%3Ac.py,line=12,title=bench trace%3A host wait::1 wait in "
                               "cu%25Sync\\ncall at")  # the line break shown, never a new command
    assert lines[-1].startswith("::error title=bench trace::t against base.parquet: worse: 1 regression")
    assert "\n" not in text(found, "t", "b").splitlines()[1]
    row = summary(found, "t", "b").splitlines()[-1]  # one row: its cells' Markdown escaped, the line break a space
    assert row.startswith("| host wait | /p/a,b\\:c\\.py\\:12 | \\- | 1 wait in cu%Sync call at")
    assert row.count(" | ") == 3


@pytest.mark.parametrize("arguments, fragment", [
    (["--format", "github", "m:f"], "--format github shows a gate: give --baseline"),
    (["--baseline", "missing.parquet", "m:f"], "missing.parquet is not a trace file"),
    (["--baseline", "base.parquet", "other.py:step"], "holds no trace of other.py:step (it holds x.py:step)"),
    (["--merge", "base.parquet", "--baseline", "base.parquet"], "trace --merge takes no --baseline"),
    (["--summary", "s.md", "m:f"], "--summary appends the gate's summary: give --baseline"),
])
def test_the_command_line_refuses_a_mistake_before_anything_runs(tmp_path, arguments, fragment):
    saved(tmp_path / "base.parquet", traced([2.0, 2.1]))
    assert_refused(bench("trace", *arguments, cwd=tmp_path, without_cuda=True), fragment)


def test_a_tests_trace_baseline_is_written_then_gates_the_next_trace(tmp_path, monkeypatch):
    import bench.platform.cuda
    import bench.platform.env
    import synthetic
    from bench.pytest_plugin import DidNotOverlap, gate_trace

    class Runtime:
        @staticmethod
        def getDevice() -> int:
            return 0

    monkeypatch.setattr(bench.platform.cuda, "runtime", Runtime())
    monkeypatch.setattr(bench.platform.env, "gpu_environment", lambda device: synthetic.environment())
    stored = tmp_path / "baselines" / "test_pipeline.parquet"
    gate_trace(traced([2.0]), stored, update=True)
    gate_trace(traced([2.0]), stored, update=True)  # written again, in place: the test's own file
    assert [path.name for path in stored.parent.iterdir()] == [stored.name]
    gate_trace(traced([2.1]), stored, update=False)
    with pytest.raises(DidNotOverlap, match="pageable copy: 1 × H2D of 1,048,576 bytes from pageable memory"):
        gate_trace(traced([2.0], pageable_ms=3.0), stored, update=False)
    with pytest.raises(DidNotOverlap, match="no trace baseline yet"):
        gate_trace(traced([2.0]), tmp_path / "none.parquet", update=False)
    paged = tmp_path / "paged.parquet"  # read back from a file, the copies' rows match those made in memory
    gate_trace(traced([2.0], pageable_ms=3.0), paged, update=True)
    gate_trace(traced([2.0], pageable_ms=3.0), paged, update=False)


def test_a_baseline_of_another_target_is_used_when_it_is_the_only_one_and_refused_among_several(tmp_path,
                                                                                                monkeypatch):
    import bench.platform.cuda
    import bench.platform.env
    import synthetic
    from bench.pytest_plugin import DidNotOverlap, gate_trace

    monkeypatch.setattr(bench.platform.cuda, "runtime", type("Runtime", (), {"getDevice": staticmethod(lambda: 0)})())
    monkeypatch.setattr(bench.platform.env, "gpu_environment", lambda device: synthetic.environment())
    one = saved(tmp_path / "one.parquet", traced([2.0], target="train.py:step"))
    with pytest.raises(DidNotOverlap, match="pageable copy"):  # gated against train.py:step, its only trace
        gate_trace(traced([2.0], pageable_ms=3.0), one, update=False)
    both = saved(tmp_path / "both.parquet", traced([2.0], target="a.py:f"), traced([2.0], target="b.py:g"))
    kept = both.read_bytes()
    for update in (False, True):
        with pytest.raises(DidNotOverlap, match="holds the traces of a.py:f, b.py:g"):
            gate_trace(traced([2.0]), both, update=update)
    assert both.read_bytes() == kept  # nothing written over it


def test_streams_of_two_gpus_are_never_a_pair(rows):
    kernel = {"op": "kernel", "name": "k", "stream": 7}
    together = added(rows, {**kernel, "device": 0, "start_ms": 0.0, "end_ms": 1.0},
                     {**kernel, "device": 1, "stream": 8, "start_ms": 0.5, "end_ms": 1.5})
    apart = added(rows, {**kernel, "device": 0, "start_ms": 0.0, "end_ms": 1.0},
                  {**kernel, "device": 1, "stream": 8, "start_ms": 1.0, "end_ms": 2.0})
    assert regressions(together, apart) == []
