"""Where does *my* code wait? Every place a region of your code waited for the GPU, named by its line.

    import bench
    found = bench.syncs(train_step, model, batch)   # any library, any stream
    print(found)                                     # one row per line that waited

:func:`syncs` calls ``fn(*args, **kwargs)`` three times: to warm up, as it is (how long it stands at each line on its
own), and under the device-wide hold (:mod:`bench.usercode.hold`) with the watcher (:mod:`bench.usercode.watcher`),
which finds where it waited; a place that stood still as long without the hold was host work (``own_work``). Make the
callable repeatable. :func:`held_region` is the same hold and watcher around a ``with`` block (``assert_async``;
regions nest). What it found: :mod:`bench.usercode.syncs.result`; its files: :mod:`bench.usercode.syncs.files`. The
method: docs/syncs.md.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from bench.platform.errors import UsageError
from bench.platform.libraries import loaded_versions
from bench.timing.phases import CUPTI_START, HOLD_SETUP, VERSIONS, WARM_UP, phase
from bench.usercode.syncs.result import DEFAULT_SETTLE_MS, SyncsResult, places

HOLD_TIMEOUT_S = 0.25  # the hold's watchdog: no launch of it holds the GPU longer (a wait made holding the GIL is
# found only when the watchdog ends it: at most this much hold)
WITHOUT_CUPTI = ("without CUPTI the GPU is held again only once a thread that waited moves on: a wait right after "
                 "another (the next line, the next pass of a loop) can be missed")


class Region:
    """A held, watched region of one thread: its waits once it ended."""

    def __init__(self, watcher, start: int) -> None:
        self.watcher = watcher
        self.start = start
        self.waits: list = []


_ACTIVE: dict[int, object] = {}  # thread id -> the outermost region's watcher


@contextmanager
def held_region(settle_ms: float = DEFAULT_SETTLE_MS, cuda_calls=None, entry=None) -> Iterator[Region]:
    """Hold the GPU and watch this thread until the block ends; the region's ``waits`` once it ended. Inside another
    held region of this thread, joins its hold. The hold is released at once on any exception or interrupt."""
    thread_id = threading.get_ident()
    outer = _ACTIVE.get(thread_id)
    if outer is not None:
        region = Region(outer, len(outer.waits))
        yield region
        region.waits = outer.waits[region.start:]
        return
    if _ACTIVE:
        raise UsageError("a held region is already running in another thread: the GPU has one hold")
    from bench.usercode.hold import in_use, synchronize
    from bench.usercode.watcher import Watcher

    with phase(HOLD_SETUP):
        hold = in_use()
        synchronize(hold.devices)
        hold.launch(HOLD_TIMEOUT_S)
    watcher = Watcher(thread_id, hold=hold, settle_s=settle_ms / 1e3, hold_timeout_s=HOLD_TIMEOUT_S,
                      cuda_calls=cuda_calls, entry=entry if entry is not None else sys._getframe(2).f_back)
    region = Region(watcher, 0)
    _ACTIVE[thread_id] = watcher
    finished = False
    try:
        with phase(HOLD_SETUP):
            hold.wait_full()
            watcher.start()
        yield region
        finished = True
    finally:
        try:
            hold.release()  # the GPU is free at once, whatever ended the region
            watcher.stop()
        finally:
            del _ACTIVE[thread_id]
            hold.finish()
        region.waits = list(watcher.waits)
    if watcher.error is not None and finished:  # the region's own exception comes first
        raise watcher.error


def _dwell(fn: Callable[[], object], settle_ms: float) -> tuple[dict, float]:
    """``fn()`` as it is, watched: ms stood at each place, and the whole call's ms."""
    from bench.usercode.hold import devices_in_use, synchronize
    from bench.usercode.watcher import Watcher

    synchronize(devices_in_use())
    watcher = Watcher(threading.get_ident(), settle_s=settle_ms / 1e3).start()
    started = time.perf_counter()
    try:
        fn()
        synchronize(devices_in_use())
    finally:
        watcher.stop()
    if watcher.error is not None:
        raise watcher.error
    return dict(watcher.dwell.ms), (time.perf_counter() - started) * 1e3


def syncs(fn: Callable, *args, settle_ms: float = DEFAULT_SETTLE_MS, cuda_calls: bool = True,
          **kwargs) -> SyncsResult:
    """Every line of ``fn(*args, **kwargs)`` that waited for the GPU (see the module docstring). Raises
    :class:`bench.platform.errors.UsageError` where no GPU is usable."""
    from bench.platform.env import no_gpu_reason

    reason = no_gpu_reason()
    if reason:
        raise UsageError(f"bench syncs needs a GPU: {reason}")
    from bench.usercode.hold import devices_in_use, synchronize

    call = lambda: fn(*args, **kwargs)  # noqa: E731
    with phase(WARM_UP):
        call()
        synchronize(devices_in_use())
    with phase("your code, watched as it is"):
        natural, region_ms = _dwell(call, settle_ms)
    tracker, why = (None, "CUDA calls not named (cuda_calls=False)")
    if cuda_calls:
        from bench.usercode.cuda_calls import open_cuda_calls

        with phase(CUPTI_START):
            tracker, why = open_cuda_calls()
    try:
        started = time.perf_counter()
        with phase("your code, held"), held_region(settle_ms, tracker, entry=sys._getframe()) as region:
            call()
        synchronize(region.watcher.hold.devices)
        held_ms = (time.perf_counter() - started) * 1e3
    finally:
        if tracker is not None:
            tracker.close()
    waited, own = places(region.waits, natural, settle_ms)
    with phase(VERSIONS):
        versions = loaded_versions()
    return SyncsResult([place for place in waited if not place.allowed], own, region_ms, held_ms, settle_ms,
                       region.watcher.hold.describe(), why and f"{why}; {WITHOUT_CUPTI}", versions,
                       [place for place in waited if place.allowed])
