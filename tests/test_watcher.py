"""The watcher without a GPU: a fake hold (an event that a "GPU call" waits on) and fake CUDA calls with the real
gate, so that what the watcher counts, in which thread, and how it holds again can be checked exactly."""

from __future__ import annotations

import queue
import sys
import threading
import time

from bench.usercode.probe import outlasting
from bench.usercode.syncs.result import places
from bench.usercode.watcher import FAST_SETTLE_S, KNOWN_AFTER, Gate, Watcher


class FakeHold:
    """The hold's interface: ``gpu`` is set while nothing holds (what a held kernel's result waits on)."""

    def __init__(self) -> None:
        self.gpu = threading.Event()
        self.launches = 0

    def launch(self, timeout_s: float) -> None:
        self.launches += 1
        self.gpu.clear()

    def release(self) -> None:
        self.gpu.set()

    def ended(self) -> bool:
        return self.gpu.is_set()

    def expired(self) -> bool:
        return False

    def beat(self) -> None:
        pass

    def full(self) -> bool:
        return not self.gpu.is_set()


class FakeCalls:
    """CUDA calls as CUPTI's callbacks see them: a thread in a call, and the gate at its return."""

    def __init__(self) -> None:
        self.gate = Gate()
        self.inside: dict[int, str] = {}

    def current(self, thread_id: int) -> str:
        return self.inside.get(thread_id, "")

    def threads_inside(self) -> list[int]:
        return list(self.inside)

    def synchronize(self, hold: FakeHold) -> None:
        """A cuStreamSynchronize of work behind the hold."""
        thread = threading.get_ident()
        self.inside[thread] = "cuStreamSynchronize"
        hold.gpu.wait(5)
        del self.inside[thread]
        self.gate.leaving(thread)


def watched(region, hold, calls=None, settle_s=0.03) -> Watcher:
    watcher = Watcher(threading.get_ident(), hold=hold, settle_s=settle_s, cuda_calls=calls,
                      entry=sys._getframe()).start()
    try:
        region()
    finally:
        watcher.stop()
    return watcher


def test_the_gate_keeps_a_named_thread_at_its_calls_return_until_opened():
    gate, returned = Gate(), threading.Event()
    gate.close(frozenset({threading.get_ident() + 1}))
    gate.leaving(threading.get_ident())  # another thread's return passes
    assert not gate.left()
    worker = threading.Thread(target=lambda: (gate.leaving(threading.get_ident()), returned.set()))
    gate.close(frozenset({0}))  # replaced below once the worker's id is known
    worker.start()
    worker.join()  # not named: passes at once
    assert returned.is_set()
    returned.clear()
    kept = threading.Thread(target=lambda: (gate.leaving(threading.get_ident()), returned.set()))
    kept.start()
    gate.close(frozenset({kept.ident}))
    kept.join(0.05)
    # the thread may have returned before the gate closed on it; if it is still there, it must stay until opened
    if kept.is_alive():
        assert gate.left() and not returned.wait(0.05)
        gate.open()
        kept.join(1)
    assert returned.is_set() and gate.timeouts == 0


def test_ten_waits_on_consecutive_lines_are_each_found_with_the_gate():
    hold, calls = FakeHold(), FakeCalls()
    hold.launch(1)

    def region():
        for _ in range(10):
            calls.synchronize(hold)  # the next wait follows at once: only a hold in place before it returns finds it

    watcher = watched(region, hold, calls)
    assert len(watcher.waits) == 10
    assert {wait.cuda_call for wait in watcher.waits} == {"cuStreamSynchronize"}
    assert calls.gate.timeouts == 0 and watcher.late_holds == 0


def test_a_known_place_counts_its_further_waits_after_a_short_settle(monkeypatch):
    hold, calls, settle_s = FakeHold(), FakeCalls(), 0.05
    hold.launch(1)
    chosen = []  # each settle the watcher chose for the thread, with how many waits it had found by then
    settle_for = Watcher._settle_for

    def spied(self, tid, frame):
        chosen.append((len(self.waits), settle_for(self, tid, frame)))
        return chosen[-1][1]

    monkeypatch.setattr(Watcher, "_settle_for", spied)
    watcher = watched(lambda: [calls.synchronize(hold) for _ in range(KNOWN_AFTER + 5)], hold, calls, settle_s)
    settles = [wait.released_s - wait.first_seen_s for wait in watcher.waits]
    assert len(settles) == KNOWN_AFTER + 5
    assert all(settle >= settle_s for settle in settles[:KNOWN_AFTER])  # the full settle: it cannot be shorter
    # the decision, not its timing: the full settle until the place has waited KNOWN_AFTER times, the short one after
    # (the thread seen between its calls, outside any, still gets the full settle: only a known call is short)
    assert {settle for found, settle in chosen if found < KNOWN_AFTER} == {settle_s}
    assert FAST_SETTLE_S in {settle for found, settle in chosen if found >= KNOWN_AFTER}


def test_a_wait_in_a_thread_the_region_starts_is_named_and_the_join_waited_on_it():
    hold, calls = FakeHold(), FakeCalls()
    hold.launch(1)

    def region():
        worker = threading.Thread(target=lambda: calls.synchronize(hold), name="metrics")
        worker.start()
        worker.join()

    watcher = watched(region, hold, calls)
    in_thread = [wait for wait in watcher.waits if wait.thread == "metrics"]
    on_thread = [wait for wait in watcher.waits if wait.on_thread == "metrics"]
    assert len(in_thread) == 1 and in_thread[0].cuda_call == "cuStreamSynchronize"
    assert len(on_thread) == 1 and on_thread[0].thread == "" and "worker.join()" in on_thread[0].line.source
    found, _ = places(watcher.waits, {}, 30.0)
    assert {(place.thread, place.on_thread) for place in found} == {("metrics", ""), ("", "metrics")}


def test_an_idle_thread_is_not_a_wait():
    hold, calls = FakeHold(), FakeCalls()
    hold.launch(1)
    jobs: queue.Queue = queue.Queue()
    idle = threading.Thread(target=jobs.get, name="idle", daemon=True)
    idle.start()
    try:
        watcher = watched(lambda: time.sleep(0.15), hold, calls)
    finally:
        jobs.put(None)
    assert [wait.thread for wait in watcher.waits if wait.thread] == []


def test_holds_launch_where_none_holds_and_end_with_any(monkeypatch):
    from bench.usercode import hold as module

    class Fake:
        def __init__(self, device):
            self.device, self.launched, self.is_live, self.is_ended = device, 0, False, False

        def live(self):
            return self.is_live

        def launch(self, timeout_s):
            self.launched += 1
            self.is_live = True

        def ended(self):
            return self.is_ended

    monkeypatch.setattr(module, "on_device", lambda device: __import__("contextlib").nullcontext())
    first, second = Fake(0), Fake(1)
    holds = module.Holds([first, second])
    second.is_live = True
    holds.launch(1.0)
    assert (first.launched, second.launched) == (1, 0)
    assert not holds.ended()
    second.is_ended = True
    assert holds.ended() and holds.devices == [0, 1]


def test_the_probe_holds_longer_than_the_call_takes_on_its_own():
    assert outlasting(20.0, 300.0) > 300.0 * 2
    assert outlasting(20.0, 0.0) == 20.0


def test_a_thread_that_waits_later_than_the_region_joins_it_is_still_found():
    hold, calls = FakeHold(), FakeCalls()
    hold.launch(1)

    def setup_then_wait():
        time.sleep(0.08)  # host work (a new thread's CUDA context, its cuBLAS handle) longer than the settle, first
        calls.synchronize(hold)

    def region():
        worker = threading.Thread(target=setup_then_wait, name="reader")
        worker.start()
        worker.join()  # stands still before the worker waits: it must not be taken for the region's own wait

    watcher = watched(region, hold, calls, settle_s=0.05)
    assert sorted((wait.thread, wait.on_thread) for wait in watcher.waits) == [("", "reader"), ("reader", "")]
