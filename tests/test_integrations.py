"""The training-framework callbacks' shared part without a GPU (:class:`bench.integrations.step.StepWatch`): which step
is watched how, a framework's frames counted as the region's code, the table, the files, the verdicts, and a step
that never ends let go. The hold and the watcher are stood in for; the frameworks' own callbacks are tested with the
real packages on a GPU (tests/test_gpu_integrations.py)."""

import contextlib
import json
import threading
import time

import pytest

from bench.platform.errors import UsageError
from bench.integrations.step import StepWatch
from bench.usercode.stacks import Frame
from bench.usercode.syncs.checks import WaitedForGpu
from bench.usercode.waits import Wait

LOOP = Frame("/venv/site-packages/lightning/pytorch/loops/fit.py", 210, "advance", "lightning")
STEP = Frame("/home/me/model.py", 14, "training_step", "")
TORCH = Frame("/venv/site-packages/torch/_tensor.py", 40, "item", "torch")
LOGGER = Frame("/venv/site-packages/lightning/pytorch/loggers/base.py", 77, "log_metrics", "lightning")


def _wait(*frames, allowed=""):
    return Wait(frames, "torch", "cuStreamSynchronize", 0.0, 0.2, 0.2, True, allowed=allowed)


class FakeRegion:
    def __init__(self, waits):
        self.waits = waits
        self.watcher = type("W", (), {"hold": type("H", (), {"describe": lambda self: "264 blocks"})()})()


@pytest.fixture
def fakes(monkeypatch):
    """A hold that finds the given waits, and a watcher that found the given dwell; what ran, in order."""
    from bench.usercode import hold, watcher
    from bench.usercode.syncs import run

    seen = {"events": [], "waits": [], "dwell": {}}

    @contextlib.contextmanager
    def held_region(settle_ms, entry=None, cuda_calls=None):
        seen["events"].append("held")
        region = FakeRegion([])
        try:
            yield region
        finally:
            region.waits = list(seen["waits"])
            seen["events"].append("released")

    class Watcher:
        def __init__(self, thread_id, settle_s):
            self.dwell = type("D", (), {"ms": seen["dwell"]})()

        def start(self):
            seen["events"].append("watched")
            return self

        def stop(self):
            seen["events"].append("unwatched")

    monkeypatch.setattr(run, "held_region", held_region)
    monkeypatch.setattr(watcher, "Watcher", Watcher)
    monkeypatch.setattr(hold, "devices_in_use", lambda: [])
    monkeypatch.setattr(hold, "synchronize", lambda devices: None)
    return seen


def _run(watch, steps):
    said = []
    for step in range(steps):
        said += watch.close_step()
        watch.open_step(step)
    return said + watch.close_step()


def test_the_step_before_is_watched_as_it_is_then_the_step_held(fakes):
    fakes["waits"] = [_wait(LOOP, STEP, TORCH), _wait(LOOP, LOGGER, TORCH)]
    watch = StepWatch(3, frozenset({"lightning"}))
    said = _run(watch, 6)
    assert fakes["events"] == ["watched", "unwatched", "held", "released"]
    found = watch.found.syncs
    # the user's training_step and Lightning's logger: each named at its own line, a framework's frames being the
    # step's code while it is watched
    assert [(place.file, place.line) for place in found.places] == [(STEP.file, 14), (LOGGER.file, 77)]
    assert said[0].startswith("bench syncs of step 3: 2 waits at 2 lines") and watch.done


def test_a_line_that_stands_as_long_as_it_is_is_host_work(fakes):
    fakes["waits"] = [_wait(LOOP, STEP, TORCH)]
    fakes["dwell"] = {(TORCH.file, TORCH.line): 10_000.0}  # stood there 10 s without the hold: not a wait
    watch = StepWatch(2, frozenset({"lightning"}), fail_on_wait=True)
    _run(watch, 3)
    assert not watch.found.syncs.places and len(watch.found.syncs.own_work) == 1
    watch.verdict()  # host work fails nothing


def test_fail_on_wait_names_the_lines_and_allowed_waits_pass(fakes):
    fakes["waits"] = [_wait(LOOP, STEP, TORCH, allowed="the loss, logged")]
    watch = StepWatch(2, frozenset({"lightning"}), fail_on_wait=True)
    _run(watch, 3)
    watch.verdict()
    fakes["waits"] = [_wait(LOOP, STEP, TORCH)]
    watch = StepWatch(2, frozenset({"lightning"}), fail_on_wait=True)
    _run(watch, 3)
    with pytest.raises(WaitedForGpu, match=r"(?s)step 2 waited for the GPU: 1 wait at 1 line.*model.py:14"):
        watch.verdict()


def test_a_baseline_fails_only_a_new_place(fakes, tmp_path):
    from bench.usercode.stacks import own_libraries
    from bench.usercode.syncs.checks import gate_waits

    model = tmp_path / "model.py"
    model.write_text("def training_step(batch):\n    return batch.loss.item()\n")
    line = Frame(str(model), 2, "training_step", "")
    stored = tmp_path / "baseline.json"
    with own_libraries(frozenset({"lightning"})):
        gate_waits([_wait(LOOP, line, TORCH)], stored, update=True)
    fakes["waits"] = [_wait(LOOP, line, TORCH)]
    watch = StepWatch(2, frozenset({"lightning"}), baseline=stored)
    _run(watch, 3)
    watch.verdict()
    fakes["waits"] = [_wait(LOOP, line, TORCH), _wait(LOOP, LOGGER, TORCH)]
    watch = StepWatch(2, frozenset({"lightning"}), baseline=stored)
    _run(watch, 3)
    with pytest.raises(WaitedForGpu, match="base.py:77"):
        watch.verdict()


def test_the_files_go_where_the_framework_keeps_its_outputs_never_over_another(fakes, tmp_path):
    fakes["waits"] = [_wait(LOOP, STEP, TORCH)]
    watch = StepWatch(2, frozenset({"lightning"}))
    _run(watch, 3)
    written = watch.save(tmp_path / "logs", rank=1)
    assert [path.suffix for path in written] == [".txt", ".json"] and all("rank1" in path.name for path in written)
    assert json.loads(written[1].read_text())["waited"] and "model.py:14" in written[0].read_text()
    assert watch.save(tmp_path / "logs") == []  # written once


def test_a_step_that_never_ends_is_let_go_and_a_gate_that_cannot_tell_fails(fakes):
    watch = StepWatch(2, frozenset({"lightning"}), timeout_s=0.2, fail_on_wait=True)
    watch.open_step(1)
    watch.close_step()
    watch.open_step(2)  # the framework stops on an exception (or the step runs on): no next step, no end of training
    deadline = time.monotonic() + 5
    while fakes["events"][-1] != "released" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fakes["events"][-2:] == ["held", "released"]
    said = watch.close_step()
    assert said and "let go after 0.2 s" in said[0] and watch.found.syncs is None
    with pytest.raises(WaitedForGpu, match="whether it waited is not known"):
        watch.verdict()
    assert not [thread for thread in threading.enumerate() if isinstance(thread, threading.Timer) and thread.is_alive()]


def test_a_step_runs_to_the_next_ones_start_and_training_end_closes_the_last(fakes):
    watch = StepWatch(2, frozenset({"lightning"}))
    for step in range(3):
        assert watch.close_step() == []
        watch.open_step(step)
    assert fakes["events"] == ["watched", "unwatched", "held"]  # step 1 ended where step 2 began
    said = watch.close_step()  # training ended after step 2: it ends there
    assert fakes["events"][-1] == "released" and said[0].startswith("bench syncs of step 2")


def test_a_late_timer_closes_only_its_own_step(fakes):
    watch = StepWatch(3, frozenset({"lightning"}))
    watch.open_step(2)
    stale = watch._stack  # the step the late timer was for
    watch.close_step()
    watch.open_step(3)
    watch._expire(stale)  # fired as step 2 ended, and ran only now
    assert fakes["events"][-1] == "held"  # step 3 is still held
    watch.close_step()


@pytest.mark.parametrize("step", [0, 1, -3, 2.5, True, "10"])
def test_a_step_to_watch_comes_after_two(step):
    with pytest.raises(UsageError, match="at least 2"):
        StepWatch(step, frozenset())


@pytest.mark.parametrize("module, extra", [("lightning", "lightning"), ("transformers", "transformers")])
def test_a_callback_without_its_framework_says_how_to_install_it(module, extra):
    import importlib
    import importlib.util

    if importlib.util.find_spec("lightning" if module == "lightning" else "transformers"):
        pytest.skip(f"{module} is installed here")
    with pytest.raises(ImportError, match=rf"pip install 'cuda-sync-bench\[{extra}\]'"):
        importlib.import_module(f"bench.integrations.{module}")


def test_a_frameworks_frames_count_as_own_while_any_block_of_it_is_open_in_any_order():
    from bench.usercode.stacks import is_own, own_libraries

    first, second = own_libraries(frozenset({"lightning"})), own_libraries(frozenset({"lightning", "accelerate"}))
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # the outer one ends first (a step closed while its lines are worked out)
    assert is_own("lightning") and is_own("accelerate") and is_own("") and not is_own("torch")
    ended = threading.Thread(target=lambda: second.__exit__(None, None, None))  # ended on another thread
    ended.start()
    ended.join()
    assert not is_own("lightning") and not is_own("accelerate") and is_own("")


def test_a_callback_says_the_step_before_then_opens_the_next(fakes):
    from bench.integrations.step import StepCallback

    class Callback(StepCallback):
        FRAMEWORKS = frozenset({"lightning"})

    callback, heard = Callback(step=2), []
    for _ in range(4):
        callback._step_starts(lambda lines: heard.append((list(fakes["events"]), lines)))
    assert callback.steps == 4 and callback.watch.frameworks == {"lightning"}
    events, lines = heard[3]  # at step 3's start: step 2 closed and said, with nothing open yet for step 3
    assert events == ["watched", "unwatched", "held", "released"] and lines[0].startswith("bench syncs of step 2")
    assert callback.found is callback.watch.found
