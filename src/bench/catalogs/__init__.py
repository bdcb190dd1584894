"""Catalogs of the library calls users write (CuPy, numba-cuda, PyTorch), each with the library's documentation
statement, measured by the ``library`` experiment the way :mod:`bench.calls` catalogs CUDA runtime calls.

A call is prepared on its *call stream* (:class:`CallStream`: a fresh non-blocking stream that the library uses as
its current stream, or that the call is given) before anything runs, then made once while the host times it.
Building a catalog imports no library: each ``prepare`` imports what it needs.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass

CATEGORIES = ("scalar", "transfer", "indexing", "reduction", "compute", "allocation", "creation", "compilation",
              "synchronization", "launch")
STREAM_USE = ("current", "given", "default", "none")  # the library's current stream, a stream argument, the legacy
# default stream (the call takes none and uses stream 0), or no stream at all (host work)


@dataclass
class Prepared:
    """One call, ready to be made; ``keep`` holds what must stay alive until it was made."""

    call: Callable[[], object]
    cleanup: Callable[[], None] = lambda: None  # untimed, once the device is idle
    keep: object = None


@dataclass(frozen=True)
class CallStream:
    """The stream a library call uses, as each library names it: its CUDA handle, a CuPy stream, a numba stream and
    (where PyTorch is installed) a torch stream, all the same stream."""

    ptr: int
    cupy: object
    numba: object
    torch: object | None = None


@dataclass(frozen=True)
class LibraryCall:
    name: str  # unique across libraries: "cupy a.item()"
    library: str  # cupy, numba-cuda, torch
    category: str  # one of CATEGORIES
    stream: str  # one of STREAM_USE
    docs: str  # the library's documentation, briefly
    source: str  # its URL
    prepare: Callable[[object, CallStream], Prepared]  # (the library's kit, the call's stream) -> Prepared
    docs_host: str = "silent"  # what the docs say it waits for on the host: one of DOCS_HOST
    fresh: bool = False  # every call compiles or creates something new (a first call, each time)


LIBRARIES = ("cupy", "numba-cuda", "torch")
# "never": returns without waiting for the GPU; "stream": waits for its stream's work (synchronous with respect to
# the host); "device": waits for all device work; "silent": the docs say nothing, or only that it "may" wait
DOCS_HOST = ("never", "stream", "device", "silent")


def documented_waits(call: LibraryCall, placement: str) -> bool | None:
    """Whether the docs say the call waits for a spin kernel on ``placement`` (its own stream, ``same``, or
    another, ``other``); None where they are silent."""
    if call.docs_host == "never":
        return False
    if call.docs_host == "device":
        return True
    if call.docs_host == "stream":
        return placement == "same"
    return None


class _FreshNumbers:
    """Numbers no other process has used: from a random start per process (processes forked from one server must not
    share a counter), counting up. In a kernel's source they make a kernel that no cache has seen, CuPy's on-disk
    kernel cache included, whatever ran before on the machine."""

    def __init__(self) -> None:
        self._pid: int | None = None
        self._numbers = itertools.count()

    def __call__(self) -> int:
        if self._pid != os.getpid():
            self._pid, self._numbers = os.getpid(), itertools.count(int.from_bytes(os.urandom(4), "little") << 16)
        return next(self._numbers)


fresh_number = _FreshNumbers()


@functools.cache
def catalog() -> dict[str, LibraryCall]:
    """Every library call by name, CuPy's first, then numba-cuda's, then PyTorch's."""
    from bench.catalogs import cupy_calls, numba_calls, torch_calls

    calls = (*cupy_calls.CALLS, *numba_calls.CALLS, *torch_calls.CALLS)
    return {call.name: call for call in calls}
