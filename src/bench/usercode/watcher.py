"""The watcher: finds where the threads of a region wait for the GPU, reading every Python thread's stack every half
millisecond while the device-wide hold (:mod:`bench.usercode.hold`) keeps every kernel from starting.

A thread that stands still with the GIL free for ``settle_s`` in a GPU library's call (the region's own thread:
anywhere) has waited: the watcher takes its stack (with CUPTI, the driver call it is in), releases the hold and holds
the GPU again before that thread runs its next line. With CUPTI, :class:`Gate` keeps the thread at its driver call's
return until the new hold is full; without it, the hold comes back once the thread has moved on. A place that has
waited ``KNOWN_AFTER`` times counts its further waits after ``FAST_SETTLE_S``. Without a hold the same watcher
measures how long each thread stands at each line on its own (:class:`Dwell`). How it finds a wait, in full:
docs/syncs.md.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass

from bench.usercode.allowance import allowed
from bench.usercode.stacks import Frame, position, stack_of, waited_in
from bench.usercode.waits import Dwell, Wait

POLL_S = 0.0005
STARVED_WITHIN_S = 0.1  # a thread that let the GIL go this soon after the hold's watchdog ended it waited for it
GIL_FREE_S = 0.8 * sys.getswitchinterval()  # a poll that overslept by more found the GIL taken: a thread running
# Python hands it over only after the switch interval (5 ms); a busy machine's scheduler oversleeps by less
KNOWN_AFTER = 3  # waits at one place (line and driver call) after which it is known
FAST_SETTLE_S = 0.003  # how long a thread stands at a known place, in a GPU call, before its wait counts
GATE_TIMEOUT_S = 3.0  # the longest a thread is kept at a driver call's return (the new hold did not fill)
FULL_WITHIN_S = 2.0  # the new hold fills within this, or the region goes on without it
STANDING_S = 4 * POLL_S  # the region's thread standing this long while another thread's wait is found waits on it
OWN_THREAD_PREFIX = "bench-"  # bench's own threads are never watched


class Gate:
    """Keeps the threads named by :meth:`close` at the return of a driver call (CUPTI's exit callback, in that
    thread) until :meth:`open`; waiting needs no CUDA call. :meth:`left` says one of them has returned."""

    def __init__(self) -> None:
        self._threads: frozenset[int] = frozenset()
        self._open = threading.Event()
        self._open.set()
        self._left = threading.Event()
        self.timeouts = 0  # threads let go by GATE_TIMEOUT_S, not by open()

    def close(self, threads: frozenset[int]) -> None:
        self._left.clear()
        self._threads = threads
        self._open.clear()

    def open(self) -> None:
        self._threads = frozenset()
        self._open.set()

    def left(self) -> bool:
        return self._left.is_set()

    def leaving(self, thread_id: int) -> None:
        """A driver call of ``thread_id`` returns: keep it here while the gate is closed on it."""
        if thread_id in self._threads and not self._open.is_set():
            self._left.set()
            if not self._open.wait(GATE_TIMEOUT_S):
                self.timeouts += 1


@dataclass
class _Seen:
    """One thread as the watcher last saw it."""

    where: tuple | None = None  # position(): frame, instruction, line
    since: float = 0.0  # when it was first seen there
    frame: object = None
    standing: tuple[str, int] | None = None  # without a hold: the place it stands at (for Dwell)


@dataclass
class _Pending:
    """The region's thread, seen standing outside the GPU while another thread's wait was found."""

    frames: tuple[Frame, ...]
    since: float
    where: tuple | None
    on_thread: str
    released_s: float
    full: bool
    confirmed: bool = True  # seen standing there STANDING_S (else it must be, before it counts)
    allowed: str = ""  # the allow_waits scope the region's thread stood in (its reason)


def thread_name(thread_id: int) -> str:
    thread = threading._active.get(thread_id)  # noqa: SLF001 (the names of running threads, by id)
    return thread.name if thread is not None else f"thread {thread_id}"


class Watcher:
    """Watches the region's thread ``thread_id`` and every other Python thread from a thread of its own (see the
    module docstring). With ``hold`` (launched and full before :meth:`start`), finds waits; without, measures
    dwell."""

    def __init__(self, thread_id: int, *, hold=None, settle_s: float = 0.1, hold_timeout_s: float = 1.0,
                 cuda_calls=None, entry=None) -> None:
        self.thread_id = thread_id
        self.hold = hold
        self.settle_s = settle_s
        self.hold_timeout_s = hold_timeout_s
        self.cuda_calls = cuda_calls
        self.gate: Gate | None = getattr(cuda_calls, "gate", None)
        self.entry = entry  # the frame that entered the region: its stacks stop above it
        self.waits: list[Wait] = []
        self.dwell = Dwell()
        self.late_holds = 0  # new holds that did not fill within FULL_WITHIN_S
        self.error: BaseException | None = None
        self._known: Counter = Counter()
        self._seen: dict[int, _Seen] = {}
        self._pending: list[_Pending] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{OWN_THREAD_PREFIX}wait-watcher", daemon=True)

    def start(self) -> Watcher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self.gate is not None:
            self.gate.open()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        try:
            self._watch()
        except BaseException as error:  # handed to the region's thread, which raises it
            self.error = error
            if self.hold is not None:
                self.hold.release()
        finally:
            if self.gate is not None:
                self.gate.open()

    def _watched(self, frames: dict) -> dict:
        own = threading.get_ident()
        return {tid: frame for tid, frame in frames.items()
                if tid != own and not thread_name(tid).startswith(OWN_THREAD_PREFIX)}

    def _watch(self) -> None:
        last: dict[int, tuple] = {}  # each thread's newest frame, its line then, its position (a wait holding the GIL)
        while not self._stop.is_set():
            if self.hold is not None:
                self.hold.beat()
            before = time.perf_counter()
            time.sleep(POLL_S)
            frames = self._watched(sys._current_frames())
            now = time.perf_counter()
            overslept = now - before > POLL_S + GIL_FREE_S  # the GIL was taken: a thread ran Python
            if overslept:
                self._overslept(last, frames, before, now)
            standing = self._update(frames, now, before if overslept else now, overslept)
            last = {tid: (frame, frame.f_lineno or 0, position(frame)) for tid, frame in frames.items()}
            if self.hold is not None:
                self._settle_pending(frames)
                if standing:
                    self._found(standing)
                elif self.hold.ended() and not self._stop.is_set():
                    self.hold.launch(self.hold_timeout_s)  # its watchdog ended it while the region enqueued on

    def _overslept(self, last: dict[int, tuple], frames: dict, before: float, now: float) -> None:
        """A poll that found the GIL taken: a thread may have waited holding it (see :meth:`_starved`); without a
        hold, a long stand of the region's thread counts as dwell."""
        if self.hold is not None and now - before >= self.settle_s and self.hold.expired() and \
                now - (before + self.hold_timeout_s) < STARVED_WITHIN_S:
            self._starved_in(last, frames, before, now)
        elif self.hold is None and now - before >= self.settle_s / 2 and self.thread_id in last:
            frame, line, _ = last[self.thread_id]
            self.dwell.add((frame.f_code.co_filename, line), now - before)

    def _starved_in(self, last: dict[int, tuple], frames: dict, before: float, now: float) -> None:
        """Which thread waited holding the GIL: one other than the region's that moved meanwhile, or was born
        meanwhile (it ran from its start), else the region's; the region's thread standing outside the GPU then
        may have waited on it (:meth:`_settle_pending`)."""
        born = [tid for tid in frames if tid not in last and tid != self.thread_id]
        moved = [tid for tid, (_, _, where) in last.items() if position(frames.get(tid)) != where]
        starved = next((tid for tid in moved + born if tid != self.thread_id), self.thread_id)
        if starved in last:
            self._starved(starved, *last[starved][:2], before, now)
        elif frames.get(starved) is not None:
            self._starved(starved, frames[starved], frames[starved].f_lineno or 0, before, now)
        region = frames.get(self.thread_id)
        if starved == self.thread_id or region is None:
            return
        stack = stack_of(region, self.entry)
        if not self._in_gpu(self.thread_id, stack, region):
            self._pending.append(_Pending(stack, before, position(region), thread_name(starved), now, True,
                                          confirmed=self.thread_id not in moved, allowed=allowed(self.thread_id)))

    def _update(self, frames: dict, now: float, end: float, overslept: bool) -> list[tuple[int, object, float]]:
        """Each thread's place; the threads that have stood still long enough to count, with since when."""
        standing = []
        for tid in set(self._seen) - set(frames):
            del self._seen[tid]
        for tid, frame in frames.items():
            seen = self._seen.setdefault(tid, _Seen())
            where = None if overslept else position(frame)
            if where != seen.where or where is None:
                if seen.standing is not None:
                    self.dwell.add(seen.standing, max(0.0, end - seen.since))
                self._seen[tid] = _Seen(where, now, frame)
            elif self.hold is None:
                seen.standing = (frame.f_code.co_filename, frame.f_lineno or 0)
            elif frame is not None and now - seen.since >= self._settle_for(tid, frame) and \
                    not any(pending.where == where for pending in self._pending):
                standing.append((tid, frame, seen.since))
        return standing

    def _call(self, tid: int) -> str:
        return self.cuda_calls.current(tid) if self.cuda_calls is not None else ""

    def _key(self, tid: int, frame) -> tuple:
        return frame.f_code.co_filename, frame.f_lineno or 0, self._call(tid)

    def _settle_for(self, tid: int, frame) -> float:
        known = self._known[self._key(tid, frame)] >= KNOWN_AFTER and (self.cuda_calls is None or self._call(tid))
        return FAST_SETTLE_S if known else self.settle_s

    def _in_gpu(self, tid: int, frames: tuple[Frame, ...], frame) -> str:
        """The GPU library (or CUDA call) a thread stands in; '' for none."""
        return self._call(tid) or waited_in(frames, frame)

    def _found(self, standing: list[tuple[int, object, float]]) -> None:
        """Record the waits of the threads standing still; the region's thread standing outside the GPU while
        another thread waits is pending (:meth:`_settle_pending`)."""
        found, aside = [], []
        for tid, frame, since in standing:  # everything read of a frame is read before its thread moves on
            stack = stack_of(frame, self.entry if tid == self.thread_id else None)
            (found if self._in_gpu(tid, stack, frame) else aside).append((tid, frame, since, stack))
        libraries = {tid: waited_in(stack, frame) for tid, frame, _, stack in found + aside}
        if not found:
            if self._not_yet(aside):
                return
            found = [item for item in aside if item[0] == self.thread_id]  # the region's own thread, anywhere
            aside = []
        if not found:
            return
        region = self._seen.get(self.thread_id)
        if region is not None and region.where is not None and self.thread_id not in {tid for tid, *_ in found} | \
                {tid for tid, *_ in aside} and time.perf_counter() - region.since >= STANDING_S:
            stack = stack_of(region.frame, self.entry)
            if not self._in_gpu(self.thread_id, stack, region.frame):  # a wait of its own is found on its own
                aside.append((self.thread_id, region.frame, region.since, stack))
        calls = {tid: self._call(tid) for tid, *_ in found}
        keys = {tid: self._key(tid, frame) for tid, frame, *_ in found}  # before the frames move on
        reasons = {tid: allowed(tid) for tid, *_ in found + aside}  # ... and before they leave their scopes
        places = {tid: position(frame) for tid, frame, *_ in found + aside}
        full = self.hold.full()
        self._close_gate(found, calls)
        self.hold.release()
        released = time.perf_counter()
        resumed = self._until_moved({tid: places[tid] for tid, *_ in found})
        self._rearm()
        for tid, frame, since, stack in found:
            name = "" if tid == self.thread_id else thread_name(tid)
            library = libraries[tid]
            self.waits.append(Wait(stack, library, calls[tid], since, released, resumed, full, thread=name,
                                   allowed=reasons[tid]))
            if library or calls[tid]:
                self._known[keys[tid]] += 1
        waiter = next((tid for tid, *_ in found if tid != self.thread_id), None)
        if waiter is None:
            return
        for pending in self._pending:  # still standing on a thread that waits again
            pending.on_thread, pending.released_s = thread_name(waiter), released
        for tid, frame, since, stack in aside:
            if tid == self.thread_id:
                self._pending.append(_Pending(stack, since, places[tid], thread_name(waiter), released, full,
                                              allowed=reasons[tid]))

    def _not_yet(self, aside: list) -> bool:
        """Whether the region's thread, standing outside the GPU, waits for something else first: another thread
        stands in a GPU call (its wait, not yet a settle, comes first), or, with CUPTI, the region stands in Python's
        own waiting (a join, a queue, a lock) while no thread is in a driver call (it waits on a thread or the host,
        not on the GPU; a wait for the GPU in a thread without Python is in a driver call)."""
        if self._other_in_gpu():
            return True
        if not hasattr(self.cuda_calls, "threads_inside"):
            return False
        inside = set(self.cuda_calls.threads_inside()) - {self.thread_id}
        if inside & set(self._seen):  # a Python thread in a driver call: its wait, if it is one, settles first
            return True
        region = next((stack for tid, _, _, stack in aside if tid == self.thread_id), ())
        return bool(region) and region[-1].library == "python" and not inside

    def _other_in_gpu(self) -> bool:
        """Whether a thread other than the region's has stood still in a GPU library or driver call a while."""
        now = time.perf_counter()
        return any(tid != self.thread_id and seen.where is not None and seen.frame is not None and
                   now - seen.since >= STANDING_S and self._in_gpu(tid, stack_of(seen.frame), seen.frame)
                   for tid, seen in list(self._seen.items()))

    def _close_gate(self, found: list, calls: dict[int, str]) -> None:
        """Close the gate on the threads whose driver calls return when the released work is done: those that
        waited in one, else every thread in one (JAX waits on threads of its own)."""
        if self.gate is None:
            return
        threads = frozenset(tid for tid, *_ in found if calls[tid])
        if not threads and hasattr(self.cuda_calls, "threads_inside"):
            threads = frozenset(self.cuda_calls.threads_inside()) - {threading.get_ident()}
        self.gate.close(threads)

    def _until_moved(self, where: dict[int, tuple | None]) -> float:
        """Wait until a thread that waited moves on, or one the gate keeps has returned; when that was."""
        while not self._stop.is_set():
            if self.gate is not None and self.gate.left():
                break
            current = sys._current_frames()
            if any(position(current.get(tid)) != place for tid, place in where.items()):
                break
            time.sleep(POLL_S / 5)
        return time.perf_counter()

    def _rearm(self) -> None:
        """Hold again and wait until the hold is full (beating meanwhile), then open the gate."""
        try:
            if self._stop.is_set():
                return
            self.hold.launch(self.hold_timeout_s)
            deadline = time.perf_counter() + FULL_WITHIN_S
            while not self.hold.full() and not self._stop.is_set():
                if time.perf_counter() > deadline:
                    self.late_holds += 1
                    break
                self.hold.beat()
                time.sleep(POLL_S / 5)
        finally:
            if self.gate is not None:
                self.gate.open()
        for seen in self._seen.values():  # what stood during the release does not count towards the next wait
            seen.where = None

    def _settle_pending(self, frames: dict) -> None:
        """The region's thread waited on another thread where, having stood still, it moves on within a settle of
        that wait's end."""
        keep = []
        for pending in self._pending:
            now = time.perf_counter()
            if position(frames.get(self.thread_id)) != pending.where:
                if pending.confirmed:
                    self.waits.append(Wait(pending.frames, "", "", pending.since, pending.released_s, now,
                                           pending.full, on_thread=pending.on_thread, allowed=pending.allowed))
                continue
            pending.confirmed = pending.confirmed or now - pending.released_s >= STANDING_S
            if now - pending.released_s < self.settle_s + self.hold_timeout_s:
                keep.append(pending)
        self._pending = keep

    def _starved(self, tid: int, frame, line: int, since: float, now: float) -> None:
        """A wait a thread made holding the GIL (a CuPy launch that loads its kernel lazily waits for the GPU to be
        idle; a thread's first cuBLAS call): the watcher could not run (nor beat) until the hold's watchdog ended
        it, and the thread let the GIL go within ``STARVED_WITHIN_S`` of that (host work that holds the GIL ends
        when it ends, not when the hold does). The thread: the one that moved meanwhile, other than the region's
        own where one did; its place: where it was last seen before."""
        frames = stack_of(frame, self.entry if tid == self.thread_id else None)
        if frames:
            frames = (*frames[:-1], Frame(frames[-1].file, line, frames[-1].function, frames[-1].library))
        library = waited_in(frames, frame)
        name = "" if tid == self.thread_id else thread_name(tid)
        self.waits.append(Wait(frames, library, "", since, now, now, True, gil_held=True, thread=name,
                               allowed=allowed(tid)))
