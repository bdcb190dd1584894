"""Finding waits without a GPU: the watcher against a stand-in hold whose "GPU work" is an event that its release
sets, so a region "waits for the GPU" exactly when it waits on that event; and the grouping, the filter that tells
host work from waits, the table and the rows."""

from __future__ import annotations

import sys
import threading
import inspect
import time

import pytest

from bench.syncs import SyncsResult
from bench.usercode.stacks import Frame, library_of, stack_of, user_index
from bench.usercode.syncs.result import places
from bench.usercode.waits import Wait
from bench.usercode.watcher import Watcher


class FakeHold:
    """The hold's interface; ``gpu`` is set while released (what a held kernel's result waits on)."""

    def __init__(self) -> None:
        self.gpu = threading.Event()
        self.launches = 0
        self.releases = 0

    def launch(self, timeout_s: float) -> None:
        self.launches += 1
        self.gpu.clear()

    def release(self) -> None:
        self.releases += 1
        self.gpu.set()

    def ended(self) -> bool:
        return self.gpu.is_set()

    def beat(self) -> None:
        pass

    def full(self) -> bool:
        return True


def waits_on_gpu(hold: FakeHold) -> None:
    hold.gpu.wait(5)  # the line a region waits at


def watched(region, hold=None, settle_s=0.03):
    watcher = Watcher(threading.get_ident(), hold=hold, settle_s=settle_s, entry=sys._getframe()).start()
    try:
        region()
    finally:
        watcher.stop()
    return watcher


def held_again(hold: FakeHold, launches: int) -> None:
    """Until the watcher has held the GPU ``launches`` times (5 s at most: a loaded machine is slow, not wrong)."""
    deadline = time.perf_counter() + 5
    while hold.launches < launches and time.perf_counter() < deadline:
        time.sleep(0.001)


def test_a_region_that_waits_is_found_at_its_line_and_the_hold_comes_back():
    hold = FakeHold()
    hold.launch(1)
    watcher = watched(lambda: [waits_on_gpu(hold), held_again(hold, 2), waits_on_gpu(hold)], hold)
    assert len(watcher.waits) == 2  # the second wait only if the watcher held the GPU again after the first
    for wait in watcher.waits:
        assert wait.line.function == "waits_on_gpu" and "hold.gpu.wait(5)" in wait.line.source
        assert (wait.released_s - wait.first_seen_s) * 1e3 >= 25  # it stood there about the settle (30 ms) first
        assert wait.resumed_s >= wait.released_s


def test_a_region_that_only_runs_python_waits_nowhere():
    hold = FakeHold()
    hold.launch(1)

    def busy():
        deadline = time.perf_counter() + 0.2
        total = 0
        while time.perf_counter() < deadline:
            total += 1

    watcher = watched(busy, hold)
    assert watcher.waits == [] and hold.releases == 0


def test_without_a_hold_the_watcher_measures_how_long_each_line_stands():
    """A line counts once the watcher has seen its thread there on two polls in a row, each on time. On a loaded
    machine a poll wakes late (4 to 12 ms on 2 cores with 10 busy processes), which the watcher cannot tell from a
    poll that waited for the GIL, and it forgets where the thread stood: a single 0.1 s sleep could pass with no two
    polls in a row on time, and nothing measured (25 of 600 so). The line sleeps until the watcher has measured
    some of it (5 s at most: a loaded machine is slow, not wrong)."""
    began = time.perf_counter()
    watcher = Watcher(threading.get_ident(), settle_s=0.03, entry=sys._getframe()).start()
    sleeping = (__file__, inspect.currentframe().f_lineno + 3)  # time.sleep is C: the test's own line is the innermost
    try:
        while sleeping not in watcher.dwell.ms and time.perf_counter() - began < 5:
            time.sleep(0.1)
    finally:
        watcher.stop()
    elapsed_ms = (time.perf_counter() - began) * 1e3
    assert sleeping in watcher.dwell.ms, dict(watcher.dwell.ms)
    assert 0 < watcher.dwell.ms[sleeping] <= elapsed_ms, (dict(watcher.dwell.ms), elapsed_ms)  # never more than it took


def frame(file: str, line: int, library: str = "") -> Frame:
    return Frame(file, line, "f", library)


def wait(line: int, held_s: float, library: str = "torch", call: str = "cuStreamSynchronize") -> Wait:
    frames = (frame("/u/train.py", 3), frame("/u/train.py", line), frame("/site/torch/x.py", 9, "torch"))
    return Wait(frames, library, call, 0.0, 0.1, held_s, True)


def test_places_group_by_line_and_tell_host_work_from_waits():
    waits = [wait(10, 0.15), wait(10, 0.16), wait(20, 0.3, library="")]
    waits[2] = Wait(waits[2].frames[:2], "", "", 0.0, 0.1, 0.3, True)  # stood at line 20 itself
    natural = {("/site/torch/x.py", 9): 40.0, ("/u/train.py", 20): 290.0}  # line 20 stands as long on its own
    waited, own = places(waits, natural, settle_ms=100)
    assert [(p.line, p.count, p.natural_ms) for p in waited] == [(10, 2, 40.0)]
    assert [p.line for p in own] == [20]
    assert waited[0].cuda_calls == ("cuStreamSynchronize",) and waited[0].into_library == ("/site/torch/x.py:9 in f",)
    result = SyncsResult(waited, own, region_ms=50.0)
    text = str(result)
    assert "2 waits at 1 line" in text and "/u/train.py:10" in text and "not a wait: /u/train.py:20" in text
    assert "/u/train.py:10 waited in: /site/torch/x.py:9 in f" in text
    rows = result.rows()
    assert [(row["line"], row["waited"]) for row in rows] == [(10, True), (20, False)]
    assert waited[0].hold_ms == pytest.approx(200.0)  # released 0.1 s after first seen, twice


def test_no_waits_reads_as_such():
    assert str(SyncsResult([], region_ms=3.0)).startswith("no waits")


def test_library_of_knows_user_code_libraries_and_python():
    assert library_of(pytest.__file__) == "pytest"
    assert library_of(threading.__file__) == "python"
    assert library_of(__file__) == ""


def test_user_index_is_the_innermost_user_frame():
    frames = (frame("/u/a.py", 1), frame("/u/a.py", 2), frame("/s/torch/x.py", 3, "torch"))
    assert user_index(frames) == 1
    assert stack_of(sys._getframe(), sys._getframe().f_back)[-1].function == (
        "test_user_index_is_the_innermost_user_frame")


def test_saved_rows_are_typed_never_replace_a_file_and_make_a_report_section(tmp_path):
    import synthetic

    from bench import report
    from bench.results import store
    from bench.usercode.tools import tool

    waited, own = places([wait(10, 0.15)], {}, settle_ms=100)
    found = SyncsResult(waited, own, region_ms=12.5)
    path = tmp_path / "results" / "_syncs" / "run.parquet"
    path.parent.mkdir(parents=True)
    from bench.syncs import save

    written = save([("train.py:step", found), ("idle:step", SyncsResult([], region_ms=1.0))],
                   synthetic.environment(), path)
    assert written == path
    rows = store.named_tables(tmp_path / "results", "syncs")
    assert rows[["target", "line", "library", "waits", "waited"]].values.tolist() == [
        ["train.py:step", 10, "torch", 1, True]]
    assert rows["gpu_uuid"].iloc[0] == synthetic.ENV["gpu_uuid"]
    first = path.read_bytes()
    again = save([("train.py:step", found)], synthetic.environment(), path)
    assert again != path and path.read_bytes() == first  # a new file beside it, never a replacement
    syncs = tool("syncs")
    section = report.tool_section(syncs, syncs.section(rows))
    assert "Where code waited" in section and "train.py" in section and "cuStreamSynchronize" in section
