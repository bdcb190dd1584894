"""``bench.allow_waits`` without a GPU: its scopes (per thread, per asyncio task, nested), the watcher's waits made
in one (a fake hold, as tests/test_watcher.py's), their places apart from the counted ones, and ``assert_async``'s
count (``max_waits``) on the watcher's waits."""

import asyncio
import inspect
import threading

import pytest

import bench
from bench.pytest_plugin import WaitedForGpu, check_waits
from bench.usercode.allowance import allowed
from bench.usercode.stacks import Frame
from bench.usercode.syncs.result import SyncsResult, places
from bench.usercode.waits import Wait
import test_watcher
from test_watcher import FakeCalls, FakeHold, watched


def test_a_scope_allows_its_threads_waits_the_innermost_reason_first():
    me = threading.get_ident()
    assert allowed(me) == ""
    with bench.allow_waits("log   every 10 steps"):
        assert allowed(me) == "log every 10 steps"
        with bench.allow_waits("checkpoint"):
            assert allowed(me) == "checkpoint"
        assert allowed(me) == "log every 10 steps"
        seen = []
        other = threading.Thread(target=lambda: seen.append(allowed(threading.get_ident())))
        other.start()
        other.join()
        assert seen == [""]  # another thread's waits are not this scope's
    assert allowed(me) == ""


def test_a_scope_leaves_on_an_exception_and_needs_a_reason():
    with pytest.raises(KeyError):
        with bench.allow_waits("eval"):
            raise KeyError("inside")
    assert allowed(threading.get_ident()) == ""
    for reason in ("", "   ", None):
        with pytest.raises(ValueError, match="needs a reason"):
            with bench.allow_waits(reason):
                pass


def test_a_scope_entered_in_a_task_allows_that_task_alone():
    """Task A enters a scope and awaits; task B runs on the same thread meanwhile. What a watcher on another thread
    sees while each stands in a (blocking) wait."""
    seen: dict[str, str] = {}
    asked, answered = threading.Event(), threading.Event()
    loop_thread: list[int] = []

    def stand(name: str) -> None:  # a blocking wait: the watcher looks now
        seen[name] = ""
        asked.set()
        answered.wait(5)
        answered.clear()

    async def first(inside: asyncio.Event, done: asyncio.Event) -> None:
        with bench.allow_waits("task A's log"):
            stand("A inside")
            inside.set()
            await done.wait()  # suspended inside its scope while B runs

    async def second(inside: asyncio.Event, done: asyncio.Event) -> None:
        await inside.wait()
        stand("B outside")
        with bench.allow_waits("task B's eval"):
            stand("B inside")
        done.set()

    async def main() -> None:
        loop_thread.append(threading.get_ident())
        inside, done = asyncio.Event(), asyncio.Event()
        await asyncio.gather(first(inside, done), second(inside, done))

    runner = threading.Thread(target=asyncio.run, args=(main(),))
    runner.start()
    for name in ("A inside", "B outside", "B inside"):
        assert asked.wait(5)
        asked.clear()
        seen[name] = allowed(loop_thread[0])
        answered.set()
    runner.join(5)
    assert seen == {"A inside": "task A's log", "B outside": "", "B inside": "task B's eval"}


def test_the_watcher_marks_waits_made_in_a_scope_and_syncs_keeps_them_apart():
    hold, calls = FakeHold(), FakeCalls()
    hold.launch(1)

    def region():
        calls.synchronize(hold)  # counted
        with bench.allow_waits("log the loss"):
            calls.synchronize(hold)  # allowed

    watcher = watched(region, hold, calls)
    assert [wait.allowed for wait in watcher.waits] == ["", "log the loss"]
    waited, _ = places(watcher.waits, {}, 30.0)
    result = SyncsResult([place for place in waited if not place.allowed], [], 1.0, 1.0, 30.0,
                         allowed=[place for place in waited if place.allowed])
    assert len(result.places) == 1 and result.waited and [place.allowed for place in result.allowed] == [
        "log the loss"]
    # both waited at one line of the fake's: apart, by the scope they were made in
    line = inspect.getsource(test_watcher).splitlines().index("        hold.gpu.wait(5)") + 1
    assert [place.where for place in result.places] == [f"tests/test_watcher.py:{line}"]
    assert str(result).endswith(f"\nallowed: tests/test_watcher.py:{line} waited 1 time (log the loss): "
                                "hold.gpu.wait(5)")
    assert [row["allowed"] for row in result.rows()] == ["", "log the loss"]
    with pytest.raises(WaitedForGpu, match="1 time"):
        check_waits(watcher.waits)  # the allowed wait does not count, the other does


def wait(line: int, allowed: str = "") -> Wait:
    frame = Frame("/x/train.py", line, "step", "")
    return Wait((frame,), "torch", "cuStreamSynchronize", 0.0, 0.1, 0.1, True, allowed=allowed)


def test_max_waits_fails_only_above_the_count_and_names_every_counted_line():
    waits = [wait(10), wait(12), wait(14, "eval")]
    check_waits(waits, max_waits=2)
    with pytest.raises(WaitedForGpu) as failed:
        check_waits(waits, max_waits=1)
    message = str(failed.value)
    assert "2 times, more than the 1 allowed" in message
    assert "/x/train.py:10 " in message and "/x/train.py:12 " in message and "/x/train.py:14" not in message


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_max_waits_is_a_whole_number(bad):
    from bench.pytest_plugin import assert_async

    with pytest.raises(ValueError, match="max_waits must be a whole number"):
        with assert_async(max_waits=bad):
            pass


def test_a_line_waiting_in_and_out_of_a_scope_splits_its_time_without_the_hold():
    """Without the hold the line stood 4 × 40 ms; under it, once outside a scope and three times inside, 100 ms
    each. The counted wait gets a quarter of the 160 ms, so it stays a wait (before, it got all of it: host work)."""
    waits = [wait(10), wait(10, "log"), wait(10, "log"), wait(10, "log")]
    waited, own = places(waits, {("/x/train.py", 10): 160.0}, settle_ms=100.0)
    assert own == [] and [(place.allowed, place.count, place.natural_ms) for place in waited] == [
        ("", 1, 40.0), ("log", 3, 120.0)]


class _Told:
    def __init__(self):
        self.said = []

    def entered(self, reason):
        self.said.append(("in", reason))

    def left(self):
        self.said.append(("out",))


def test_a_listener_hears_its_own_threads_scopes_while_it_listens():
    from bench.usercode.allowance import listening

    told = _Told()
    with bench.allow_waits("before"):  # entered before listening: not heard, nor its leaving
        with listening(told):
            with bench.allow_waits("log"):
                with bench.allow_waits("eval"):
                    pass
            def elsewhere():
                with bench.allow_waits("elsewhere"):
                    pass

            other = threading.Thread(target=elsewhere)
            other.start()
            other.join()
            with pytest.raises(RuntimeError, match="already listened"):
                with listening(_Told()):
                    pass
    assert told.said == [("in", "log"), ("in", "eval"), ("out",), ("out",)]
    with bench.allow_waits("after"):  # no longer listened to
        pass
    assert len(told.said) == 4


def test_a_scope_left_in_a_later_listening_tells_that_listening_nothing():
    from bench.usercode.allowance import listening

    told = _Told()
    scope = bench.allow_waits("a generator's")
    with listening(told):
        scope.__enter__()  # entered in the first listening ...
    with listening(told):  # ... the same listener listens again (probe's next repeat)
        scope.__exit__(None, None, None)  # left now: not this listening's scope
        with bench.allow_waits("its own"):
            pass
    assert told.said == [("in", "a generator's"), ("in", "its own"), ("out",)]
