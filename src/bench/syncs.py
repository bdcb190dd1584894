"""Where does *my* code wait? Every place a region of your code waited for the GPU, named by its line.

    import bench
    found = bench.syncs(train_step, model, batch)   # any library, any stream
    print(found)                                     # one row per line that waited

:func:`syncs` calls ``fn(*args, **kwargs)`` three times: once to warm up (compiling, caches), once as it is (how long
it stands at each line on its own), and once under the device-wide hold (:mod:`bench.usercode.hold`), which keeps every
kernel of every stream from starting. Under the hold a call that needs the GPU's results cannot return; a watcher
thread sees the region's thread stand still, takes its stack, releases the hold and holds again for the next wait
(:mod:`bench.usercode.waits`). A place that stood still as long without the hold was busy on the host, not waiting:
it is listed apart (``own_work``). With CUPTI (the ``cupti`` extra) each wait also names the CUDA driver call it
waited in. Make the callable repeatable.

:func:`held_region` is the same hold and watcher around a ``with`` block (the pytest plugin's ``assert_async``);
regions nest: an inner region joins the outer one's hold.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.errors import UsageError
from bench.libraries import loaded_versions

DEFAULT_SETTLE_MS = 100.0  # how long a thread stands still under the hold before it counts as waiting
HOLD_TIMEOUT_S = 0.25  # the hold's watchdog: no launch of it holds the GPU longer (a wait made holding the GIL is
# found only when the watchdog ends it: at most this much hold)
TABLE = "syncs"  # the results side table of syncs rows
WITHOUT_CUPTI = ("without CUPTI the GPU is held again only once a thread that waited moves on: a wait right after "
                 "another (the next line, the next pass of a loop) can be missed")


@dataclass(frozen=True)
class Place:
    """One line of the region's code that waited for the GPU (or stood still on its own), over all its waits."""

    file: str
    line: int
    function: str
    source: str
    library: str  # the GPU library it waited in ("" where not told)
    count: int  # how many times it waited there
    held_ms: float  # how long the host stood there under the hold, in all (the hold's settle included)
    natural_ms: float  # how long it stood there without the hold, in all (0: never seen standing)
    hold_ms: float  # what finding its waits cost: how long the GPU stayed held while it stood there, in all
    cuda_calls: tuple[str, ...]  # the CUDA driver calls it waited in (CUPTI); empty where not known
    into_library: tuple[str, ...]  # the frames below the line, outermost first, of its first wait
    calls: tuple[str, ...]  # the region's frames down to the line (file:line in function), outermost first
    thread: str = ""  # the thread whose line it is ("": the region's own)
    on_thread: str = ""  # the region's line waited on this thread, which waited for the GPU ("": on the GPU itself)

    @property
    def where(self) -> str:
        """'train.py:21': the file relative to the current directory where it is below it."""
        path = Path(self.file)
        with contextlib.suppress(ValueError):
            path = path.relative_to(Path.cwd())
        return f"{path}:{self.line}"

    @property
    def who(self) -> str:
        """Which thread waited, and on what: '' for the region's thread waiting on the GPU."""
        return " ".join(part for part in (f"thread {self.thread}" if self.thread else "",
                                          f"on thread {self.on_thread}" if self.on_thread else "") if part)

    def collapsed(self) -> str:
        """The frames into the library, the first and the last with the count between."""
        frames = self.into_library
        if len(frames) <= 2:
            return " → ".join(frames)
        return f"{frames[0]} → … {len(frames) - 2} frames … → {frames[-1]}"


@dataclass
class SyncsResult:
    """What :func:`syncs` found."""

    places: list[Place]  # lines that waited for the GPU, first waited first
    own_work: list[Place] = field(default_factory=list)  # lines that stood still as long without the hold
    region_ms: float = 0.0  # the region without the hold
    held_region_ms: float = 0.0  # the region under the hold
    settle_ms: float = DEFAULT_SETTLE_MS
    hold: str = ""  # the hold's shape: "264 blocks × 1024 threads on 132 SMs"
    cuda_calls: str = ""  # why CUDA calls are not named ("" where CUPTI named them)
    libraries: dict[str, str] = field(default_factory=dict)  # the GPU libraries loaded as it ran: column -> version

    @property
    def waited(self) -> bool:
        return bool(self.places)

    def __str__(self) -> str:
        if not self.places:
            text = f"no waits: the region returned while the GPU was held ({self.region_ms:.1f} ms without the hold)"
        else:
            waits = sum(place.count for place in self.places)
            text = (f"{waits} wait{'s' * (waits != 1)} at {len(self.places)} line{'s' * (len(self.places) != 1)} "
                    f"(region {self.region_ms:.1f} ms without the hold):\n")
            threads = any(place.who for place in self.places)
            rows = [("line", *(("thread",) if threads else ()), "library", "waits", "ms on its own", "CUDA call",
                     "code")]
            rows += [(place.where, *((place.who or "-",) if threads else ()), place.library or "?", str(place.count),
                      f"{place.natural_ms:.1f}", ", ".join(place.cuda_calls) or "-", place.source)
                     for place in self.places]
            widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
            text += "\n".join("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1]
                              for row in rows)
            text += "".join(f"\n  {place.where} waited in: {place.collapsed()}" for place in self.places
                            if place.into_library)
        for place in self.own_work:
            text += (f"\nnot a wait: {place.where} stood still {place.held_ms:.0f} ms under the hold and "
                     f"{place.natural_ms:.0f} ms without it (host work): {place.source}")
        if self.cuda_calls:
            text += f"\n{self.cuda_calls}"
        return text

    def to_dict(self) -> dict:
        return {**asdict(self), "waited": self.waited}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def rows(self) -> list[dict]:
        """One row per place (waits and own work), for the ``syncs`` side table."""
        return [{"file": place.file, "line": place.line, "function": place.function, "source": place.source,
                 "library": place.library, "waits": place.count, "held_ms": place.held_ms,
                 "natural_ms": place.natural_ms, "hold_ms": place.hold_ms, "cuda_calls": ", ".join(place.cuda_calls),
                 "into_library": " → ".join(place.into_library), "thread": place.thread,
                 "on_thread": place.on_thread, "waited": waited}
                for waited, places in ((True, self.places), (False, self.own_work)) for place in places]


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

    hold = in_use()
    synchronize(hold.devices)
    hold.launch(HOLD_TIMEOUT_S)
    watcher = Watcher(thread_id, hold=hold, settle_s=settle_ms / 1e3, hold_timeout_s=HOLD_TIMEOUT_S,
                      cuda_calls=cuda_calls, entry=entry if entry is not None else sys._getframe(2).f_back)
    region = Region(watcher, 0)
    _ACTIVE[thread_id] = watcher
    finished = False
    try:
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


def places(waits: list, natural: dict, settle_ms: float) -> tuple[list[Place], list[Place]]:
    """The waits grouped by the user's line, first waited first: (waits for the GPU, host work). ``natural``: ms
    stood still at each place without the hold (:class:`bench.usercode.waits.Dwell`). A line is host work where,
    at the places it stood, it stood still without the hold nearly as long as under it (less than half a settle
    longer: one wait for the GPU adds about a settle, host work adds nothing). A place where JAX waits and then
    works on the host for long is still a wait: a rule of half a settle per wait missed one on an H200."""
    grouped: dict[tuple[str, str, int], list] = {}
    for wait in waits:
        grouped.setdefault((wait.thread, wait.line.file, wait.line.line), []).append(wait)
    waited, own = [], []
    for (thread, file, line), group in grouped.items():
        first = group[0]
        held = sum(wait.held_ms for wait in group)
        place = Place(file, line, first.line.function, first.line.source,
                      next((wait.library for wait in group if wait.library), ""), len(group), held,
                      sum(natural.get(where, 0.0) for where in dict.fromkeys(wait.place for wait in group)),
                      sum(wait.released_s - wait.first_seen_s for wait in group) * 1e3,
                      tuple(dict.fromkeys(wait.cuda_call for wait in group if wait.cuda_call)),
                      tuple(str(frame) for frame in first.into_library),
                      tuple(str(frame) for frame in first.frames[:first.frames.index(first.line) + 1]),
                      thread, next((wait.on_thread for wait in group if wait.on_thread), ""))
        (waited if held - place.natural_ms >= settle_ms / 2 else own).append(place)
    return waited, own


def syncs(fn: Callable, *args, settle_ms: float = DEFAULT_SETTLE_MS, cuda_calls: bool = True,
          **kwargs) -> SyncsResult:
    """Every line of ``fn(*args, **kwargs)`` that waited for the GPU (see the module docstring). Raises
    :class:`bench.errors.UsageError` where no GPU is usable."""
    from bench.env import no_gpu_reason

    reason = no_gpu_reason()
    if reason:
        raise UsageError(f"bench syncs needs a GPU: {reason}")
    from bench.usercode.hold import devices_in_use, synchronize

    call = lambda: fn(*args, **kwargs)  # noqa: E731
    call()
    synchronize(devices_in_use())
    natural, region_ms = _dwell(call, settle_ms)
    tracker, why = (None, "CUDA calls not named (cuda_calls=False)")
    if cuda_calls:
        from bench.usercode.cuda_calls import open_cuda_calls

        tracker, why = open_cuda_calls()
    try:
        started = time.perf_counter()
        with held_region(settle_ms, tracker, entry=sys._getframe()) as region:
            call()
        synchronize(region.watcher.hold.devices)
        held_ms = (time.perf_counter() - started) * 1e3
    finally:
        if tracker is not None:
            tracker.close()
    waited, own = places(region.waits, natural, settle_ms)
    return SyncsResult(waited, own, region_ms, held_ms, settle_ms, region.watcher.hold.describe(),
                       why and f"{why}; {WITHOUT_CUPTI}", loaded_versions())


def columns() -> tuple:
    """The typed columns of a ``syncs`` results file: the target, each place's columns, the environment (and the
    versions of the GPU libraries loaded)."""
    from bench.schema import FLAG, FLOAT, INT, TEXT, column, environment_columns

    return (
        column("target", TEXT, "what was run: MODULE:FUNCTION or a script"),
        column("file", TEXT, "the source file of the line"),
        column("line", INT, "its line number"),
        column("function", TEXT, "the function it is in"),
        column("source", TEXT, "the line's code"),
        column("library", TEXT, "the GPU library it waited in (empty: not told)"),
        column("waits", INT, "how many times it stood still there under the hold"),
        column("held_ms", FLOAT, "how long it stood there under the hold, in all (the settle included)"),
        column("natural_ms", FLOAT, "how long it stood there without the hold, in all (0: never seen standing)"),
        column("hold_ms", FLOAT, "how long the GPU stayed held while it stood there: what finding its waits cost"),
        column("cuda_calls", TEXT, "the CUDA driver calls it waited in (CUPTI; empty: not known)"),
        column("into_library", TEXT, "the frames below the line, outermost first"),
        column("thread", TEXT, "the thread whose line it is (empty: the region's own)"),
        column("on_thread", TEXT, "the region's line waited on this thread, which waited for the GPU (empty: on the "
                                  "GPU itself)"),
        column("waited", FLAG, "a wait for the GPU (false: it stood as long without the hold: host work)"),
        column("region_ms", FLOAT, "the region without the hold"),
        column("settle_ms", FLOAT, "how long a line stood still under the hold before it counted"),
        *environment_columns(),
    )


def save(found: Sequence[tuple[str, SyncsResult]], environment, path) -> object:
    """Write the rows of each (target, result) (one per place; none for a result that found nothing) to a new
    results file ``path``."""
    from bench import store
    from bench.schema import schema_of

    rows = [{"target": target, "region_ms": result.region_ms, "settle_ms": result.settle_ms,
             **environment.as_dict(), **result.libraries, **row} for target, result in found for row in result.rows()]
    return store.write(path, rows, schema_of(columns()), {"table": TABLE}, new=True)
