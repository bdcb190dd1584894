"""Stack attribution: where a thread stands, as frames named by their library (the user's own code, a GPU library,
Python's), the user's line among them, and the GPU library a line waits in. The watcher (:mod:`bench.usercode.watcher`)
reads a waiting thread's stack with it, a trace (:mod:`bench.usercode.activity`) a driver call's.
"""

from __future__ import annotations

import functools
import linecache
import re
import sys
import sysconfig
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import CodeType

from bench.platform.libraries import BY_NAME, BY_PREFIX

KNOWN = {*BY_PREFIX, "numpy", "timm", "transformers", "torchvision", "accelerate", "safetensors", "huggingface_hub"}
BENCH = str(Path(__file__).resolve().parents[1])
STDLIB = tuple(str(Path(sysconfig.get_paths()[key]).resolve()) for key in ("stdlib", "platstdlib"))
_OWNED_LOCK = threading.Lock()
_OWNED: Counter[str] = Counter()  # libraries whose frames count as the region's own code, beside the user's (''):
# a count per library, so blocks that overlap in any order, or end on another thread, leave it right


@contextmanager
def own_libraries(libraries: frozenset[str]) -> Iterator[None]:
    """While the block runs, a frame of one of ``libraries`` (a training framework's: 'lightning') counts as the
    region's own code, as the user's does: a wait in the framework's loop is named at the framework's line."""
    with _OWNED_LOCK:
        _OWNED.update(libraries)
    try:
        yield
    finally:
        with _OWNED_LOCK:
            _OWNED.subtract(libraries)
            for library in libraries:
                if _OWNED[library] <= 0:
                    del _OWNED[library]


def is_own(library: str) -> bool:
    """Whether a frame of ``library`` is the region's own code (the user's, or a framework's while it counts)."""
    return library == "" or library in _OWNED


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
                return BY_PREFIX.get(top, top)
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
        if to_user_line and is_own(library_of(code.co_filename)):
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
                if top in BY_PREFIX:
                    return BY_PREFIX[top]
                break
    return ""


def waited_in(frames: tuple[Frame, ...], frame) -> str:
    """The GPU library a thread waits in: the first GPU library's frame below the user's line, else the one the
    line's names belong to (``frame``: the innermost frame, whose line it is)."""
    below = frames[user_index(frames) + 1:]
    return next((f.library for f in below if f.library in BY_NAME), "") or library_on_line(frame)


def user_index(frames: tuple[Frame, ...]) -> int:
    """The index of the innermost frame of the user's own code (the last frame where there is none)."""
    for index in range(len(frames) - 1, -1, -1):
        if is_own(frames[index].library):
            return index
    return len(frames) - 1


def position(frame) -> tuple | None:
    """Where a thread is: its innermost frame and the instruction in it."""
    return None if frame is None else (id(frame), frame.f_lasti, frame.f_lineno)
