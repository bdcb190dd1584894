"""Finding where a thread waits for the GPU: a watcher thread reads the region's Python stack every half millisecond
while the device-wide hold (:mod:`bench.measure.hold`) keeps every kernel from starting.

A call that needs the GPU's results cannot return while the GPU is held; PyTorch, CuPy, numba-cuda and JAX release
the GIL while they wait, so the watcher sees the waiting thread stand still at one place with the GIL free (a thread
that runs Python keeps the GIL and is caught at the same instruction, a loop's jump, every time Python hands the GIL
over: a poll that had to wait for the GIL never counts as standing still). Once it has stood still for
``settle_s``, the watcher takes its stack (and, with CUPTI, the CUDA driver call it is in), releases the hold, notes
when the thread moves on, and holds the GPU again for the next wait. Without a hold the same watcher measures how
long the thread stands at each line on its own (:class:`Dwell`): what a place costs in a normal run, and whether a
place that stood still under the hold was only busy on the host.
"""

from __future__ import annotations

import functools
import linecache
import re
import sys
import sysconfig
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType

POLL_S = 0.0005
STARVED_WITHIN_S = 0.1  # a thread that let the GIL go this soon after the hold's watchdog ended it waited for it
GIL_FREE_S = 0.8 * sys.getswitchinterval()  # a poll that overslept by more found the GIL taken: a thread running
# Python hands it over only after the switch interval (5 ms); a busy machine's scheduler oversleeps by less
GPU_LIBRARIES = {"torch": "torch", "cupy": "cupy", "cupyx": "cupy", "cupy_backends": "cupy", "jax": "jax",
                 "jaxlib": "jax", "numba": "numba-cuda", "numba_cuda": "numba-cuda", "triton": "triton",
                 "flax": "jax", "optax": "jax"}  # top-level package -> the library it belongs to
KNOWN = {*GPU_LIBRARIES, "numpy", "timm", "transformers", "torchvision", "accelerate", "safetensors", "huggingface_hub"}
BENCH = str(Path(__file__).resolve().parents[1])
STDLIB = tuple(str(Path(sysconfig.get_paths()[key]).resolve()) for key in ("stdlib", "platstdlib"))


@dataclass(frozen=True)
class Frame:
    """One Python frame of a stack: where, and whose code it is ("" for the user's own)."""

    file: str
    line: int
    function: str
    library: str

    @property
    def source(self) -> str:
        return linecache.getline(self.file, self.line).strip()

    def __str__(self) -> str:
        return f"{self.file}:{self.line} in {self.function}"


@functools.lru_cache(maxsize=8192)
def library_of(file: str) -> str:
    """The library a source file belongs to (remembered per file: a trace asks in CUPTI's callbacks): a GPU library's
    name ('torch', 'cupy', 'jax', 'numba-cuda'), another installed package's top-level name, 'python' for the
    standard library, 'bench', or '' for the user's code."""
    if file.startswith("<"):
        return "python" if file.startswith("<frozen") else ""
    path = str(Path(file).resolve())
    if path.startswith(BENCH + "/"):
        return "bench"
    for entry in sorted(sys.path, key=len, reverse=True):
        if entry and path.startswith(str(Path(entry).resolve()) + "/"):
            top = Path(path[len(str(Path(entry).resolve())) + 1:]).parts[0].removesuffix(".py")
            if top in KNOWN or "-packages" in entry:
                return GPU_LIBRARIES.get(top, top)
            break
    if path.startswith(STDLIB):
        return "python"
    return ""


def places_of(frame, stop=None, *, to_user_line: bool = False) -> tuple[tuple[CodeType, int], ...]:
    """Each frame's code and line from ``frame`` out to ``stop``'s callee (or the outermost), innermost first;
    ``to_user_line``: only out to the innermost frame of the user's own code. Quick to take (a trace takes it in
    CUPTI's callbacks); :func:`frames_of` names them."""
    places = []
    while frame is not None and frame is not stop:
        code = frame.f_code
        places.append((code, frame.f_lineno or 0))
        if to_user_line and library_of(code.co_filename) == "":
            break
        frame = frame.f_back
    return tuple(places)


def frames_of(places: tuple[tuple[CodeType, int], ...]) -> tuple[Frame, ...]:
    """The frames of :func:`places_of`'s places, outermost first."""
    return tuple(Frame(code.co_filename, line, code.co_name, library_of(code.co_filename))
                 for code, line in reversed(places))


def stack_of(frame, stop=None) -> tuple[Frame, ...]:
    """The frames from ``stop``'s callee (or the outermost) down to ``frame``, outermost first."""
    return frames_of(places_of(frame, stop))


def library_on_line(frame) -> str:
    """The GPU library a line calls into, guessed from the names it uses: the first name whose value (a module, or an
    object of a library's type) belongs to one."""
    source = linecache.getline(frame.f_code.co_filename, frame.f_lineno or 0)
    scopes = (frame.f_locals, frame.f_globals, vars(__builtins__) if not isinstance(__builtins__, dict) else {})
    for name in re.findall(r"[A-Za-z_]\w*", source):
        for scope in scopes:
            if name in scope:
                value = scope[name]
                module = value.__name__ if isinstance(value, type(sys)) else type(value).__module__
                top = (module or "").split(".")[0]
                if top in GPU_LIBRARIES:
                    return GPU_LIBRARIES[top]
                break
    return ""


def waited_in(frames: tuple[Frame, ...], frame) -> str:
    """The GPU library a thread waits in: the first GPU library's frame below the user's line, else the one the
    line's names belong to (``frame``: the innermost frame, whose line it is)."""
    below = frames[user_index(frames) + 1:]
    return next((f.library for f in below if f.library in GPU_LIBRARIES.values()), "") or library_on_line(frame)


def user_index(frames: tuple[Frame, ...]) -> int:
    """The index of the innermost frame of the user's own code (the last frame where there is none)."""
    for index in range(len(frames) - 1, -1, -1):
        if frames[index].library == "":
            return index
    return len(frames) - 1


@dataclass(frozen=True)
class Wait:
    """One place where the thread stood still while the GPU was held."""

    frames: tuple[Frame, ...]  # outermost first, from the region's entry down
    library: str  # the GPU library it waited in ("" where neither its frames nor its line tell)
    cuda_call: str  # the CUDA driver call the thread was in (CUPTI), "" where not known
    first_seen_s: float  # perf_counter: when the thread was first seen there
    released_s: float  # when the hold was released for it
    resumed_s: float  # when the thread moved on
    hold_full: bool  # the hold filled the GPU when the wait was found
    gil_held: bool = False  # it waited holding the GIL: found once the hold's watchdog ended the wait

    @property
    def place(self) -> tuple[str, int]:
        """Where the thread stood: its innermost frame's (file, line)."""
        return (self.frames[-1].file, self.frames[-1].line) if self.frames else ("?", 0)

    @property
    def line(self) -> Frame:
        return self.frames[user_index(self.frames)] if self.frames else Frame("?", 0, "?", "")

    @property
    def into_library(self) -> tuple[Frame, ...]:
        """The frames below the user's line: where the library waited."""
        return self.frames[user_index(self.frames) + 1:]

    @property
    def held_ms(self) -> float:
        return (self.resumed_s - self.first_seen_s) * 1e3

    @property
    def after_release_ms(self) -> float:
        return (self.resumed_s - self.released_s) * 1e3


@dataclass
class Dwell:
    """How long the thread stood still at each place without a hold (the GIL free, as under the hold): total ms by
    its innermost frame's (file, line), the place a wait is found at."""

    ms: dict[tuple[str, int], float] = field(default_factory=lambda: defaultdict(float))

    def add(self, place: tuple[str, int], seconds: float) -> None:
        self.ms[place] += seconds * 1e3


def position(frame) -> tuple | None:
    """Where a thread is: its innermost frame and the instruction in it."""
    return None if frame is None else (id(frame), frame.f_lasti, frame.f_lineno)


class Watcher:
    """Watches one thread from a thread of its own (see the module docstring). With ``hold`` (launched and full
    before :meth:`start`), finds waits; without, measures dwell."""

    def __init__(self, thread_id: int, *, hold=None, settle_s: float = 0.1, hold_timeout_s: float = 1.0,
                 cuda_calls=None, entry=None, device: int | None = None) -> None:
        self.thread_id = thread_id
        self.hold = hold
        self.settle_s = settle_s
        self.hold_timeout_s = hold_timeout_s
        self.cuda_calls = cuda_calls
        self.entry = entry  # the frame that entered the region: stacks stop above it
        self.device = device  # the GPU the hold is on, made current in the watcher's thread
        self.waits: list[Wait] = []
        self.dwell = Dwell()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-wait-watcher", daemon=True)

    def start(self) -> Watcher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _frame(self):
        return sys._current_frames().get(self.thread_id)

    def _run(self) -> None:
        try:
            if self.device is not None:  # this thread launches holds: on the hold's GPU
                from bench.env import use_device

                use_device(self.device)
            self._watch()
        except BaseException as error:  # handed to the region's thread, which raises it
            self.error = error
            if self.hold is not None:
                self.hold.release()

    def _watch(self) -> None:
        last, since, line = None, time.perf_counter(), None
        seen, seen_line = None, 0  # the newest frame seen, and its line then
        while not self._stop.is_set():
            if self.hold is not None:
                self.hold.beat()
            before = time.perf_counter()
            time.sleep(POLL_S)
            frame = self._frame()
            now = time.perf_counter()
            where, end = position(frame), now
            if now - before > POLL_S + GIL_FREE_S:  # the GIL was taken: the thread runs Python, it does not stand
                if self.hold is not None and now - before >= self.settle_s and self.hold.expired() and seen and \
                        now - (before + self.hold_timeout_s) < STARVED_WITHIN_S:
                    self._starved(seen, seen_line, before, now)  # ...or it waited holding the GIL
                elif self.hold is None and now - before >= self.settle_s / 2 and seen:  # as long, with no hold
                    self.dwell.add((seen.f_code.co_filename, seen_line), now - before)
                where, end = None, before
            seen, seen_line = frame, (frame.f_lineno or 0) if frame is not None else 0
            if where != last or where is None:
                if line is not None:
                    self.dwell.add(line, max(0.0, end - since))
                last, since, line = where, now, None
            elif self.hold is None:
                line = (frame.f_code.co_filename, frame.f_lineno or 0)
            elif frame is not None and now - since >= self.settle_s:
                self._found(frame, where, since)
                last, since = None, time.perf_counter()
                continue
            if self.hold is not None and self.hold.ended() and not self._stop.is_set():
                self.hold.launch(self.hold_timeout_s)  # its watchdog ended it while the region enqueued on

    def _starved(self, frame, line: int, since: float, now: float) -> None:
        """A wait the thread made holding the GIL (a CuPy launch that loads its kernel lazily waits for the GPU to be
        idle): the watcher could not run (nor beat) until the hold's watchdog ended it, and the thread let the GIL go
        within ``STARVED_WITHIN_S`` of that (host work that holds the GIL ends when it ends, not when the hold does).
        Its place: where the thread was last seen before."""
        frames = stack_of(frame, self.entry)
        if frames:
            frames = (*frames[:-1], Frame(frames[-1].file, line, frames[-1].function, frames[-1].library))
        library = waited_in(frames, frame)
        self.waits.append(Wait(frames, library, "", since, now, now, True, gil_held=True))

    def _found(self, frame, where, since: float) -> None:
        frames = stack_of(frame, self.entry)
        library = waited_in(frames, frame)
        cuda_call = self.cuda_calls.current(self.thread_id) if self.cuda_calls is not None else ""
        full = self.hold.full()
        self.hold.release()
        released = time.perf_counter()
        while not self._stop.is_set() and position(self._frame()) == where:
            time.sleep(POLL_S / 5)
        self.waits.append(Wait(frames, library, cuda_call, since, released, time.perf_counter(), full))
        if not self._stop.is_set():
            self.hold.launch(self.hold_timeout_s)
