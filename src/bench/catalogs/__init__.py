"""The catalogs of calls whose blocking the experiments measure, each call with what its documentation says: the CUDA
runtime's (runtime.py) and the library calls users write (cupy_calls.py, numba_calls.py, torch_calls.py,
jax_calls.py), each library's named by its record (:mod:`bench.platform.libraries`); pages.py the documentation they
cite; measured.py the runtime's measured call by call. Every catalog is a tuple ``CALLS`` of :class:`Call` beside a
``Kit``. Building a catalog imports no library and touches no CUDA.

May import the measuring tools (:mod:`bench.measure`, :mod:`bench.timing`), :mod:`bench.platform` and each other;
never an experiment. How a call is prepared, armed, made and cleaned up: docs/reference/packages.md.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass

from bench.platform import lazy
from bench.platform.libraries import CATALOGED
from bench.platform.vocabulary import PLACEMENTS, DocsHost, values

RUNTIME = "cuda-runtime"  # the CUDA runtime's catalog
LIBRARIES = tuple(library.name for library in CATALOGED)  # the libraries' catalogs, in the library experiment's order
MODULES = {RUNTIME: "bench.catalogs.runtime", **{library.name: library.catalog for library in CATALOGED}}  # whole names

CATEGORIES = ("scalar", "transfer", "indexing", "reduction", "compute", "allocation", "creation", "compilation",
              "synchronization", "launch")
STREAM_USE = ("current", "given", "default", "none", "own")  # the library's current stream, a stream argument, the
# legacy default stream (the call takes none and uses stream 0), no stream at all (host work), or the library's own
# streams, which nobody can name or hold alone (JAX): its calls are held by the device-wide hold
STREAM_PLACEMENTS = PLACEMENTS[:-1]  # where a runtime call that takes a stream goes (every placement but none)

DOCS_HOST = values(DocsHost)  # what the documentation says a call waits for on the host (see DocsHost)
LIBRARY_DOCS_HOST = tuple(value for value in DOCS_HOST if value != DocsHost.MAYBE)  # the libraries' ("may": silent)


@dataclass
class Prepared:
    """One call, ready to be made; ``keep`` holds what must stay alive until it was made."""

    call: Callable[[], object]
    arm: Callable[[], None] = lambda: None  # untimed, once the spin runs
    cleanup: Callable[[], None] = lambda: None  # untimed, once the device is idle
    keep: object = None


@dataclass(frozen=True)
class CallStream:
    """The stream a library call uses: its CUDA handle, and the same stream as the call's library names it (a CuPy
    stream, a numba stream, a torch stream: its record's ``stream``; None for a library whose calls take none)."""

    ptr: int
    named: object = None


@dataclass(frozen=True)
class Call:
    """One call of a catalog. The fields after ``prepare`` say how the experiments make it: ``api`` to
    ``enqueues`` describe a runtime call, ``category`` to ``fresh`` a library call."""

    name: str  # unique across catalogs: "cudaMalloc", "cupy a.item()"
    library: str  # its catalog: RUNTIME or one of LIBRARIES
    docs_host: DocsHost  # what the docs say it waits for on the host
    docs: str  # the documentation's statement, paraphrased or quoted briefly
    source: str  # the page it comes from
    prepare: Callable[[object, object], Prepared]  # (the catalog's kit, the call's stream or None) -> Prepared
    api: str = ""  # the runtime function it calls
    placements: tuple[str, ...] = STREAM_PLACEMENTS  # runtime: the streams it is made on ("none": takes no stream)
    guide_serializes: bool = False  # in the Programming Guide's list of operations that keep streams from overlapping
    null_stream: bool = False  # a synchronous call that does its work on the legacy default stream
    enqueues: bool = True  # puts work into its stream (a query or a synchronization does not)
    category: str = ""  # library: one of CATEGORIES
    stream: str = ""  # library: one of STREAM_USE
    fresh: bool = False  # library: every call compiles or creates something new (a first call, each time)

    def __post_init__(self) -> None:
        object.__setattr__(self, "docs_host", DocsHost(self.docs_host))  # a catalog may spell it as its string
        if self.library not in MODULES:
            raise ValueError(f"{self.name}: unknown catalog {self.library!r}")


def ordered_after_spin(placement: str, spin_blocking: bool) -> bool:
    """Whether work on ``placement`` is ordered behind the spinning stream by stream semantics alone."""
    return placement == "same" or (placement == "legacy" and spin_blocking)


def documented_waits(call: Call, placement: str, spin_blocking: bool = False) -> bool | None:
    """Whether the docs say the call waits (on the host) for a spin kernel on the ``same`` stream as the call or on
    another (``other``, ``legacy``, ``per-thread``; the spinning stream blocking or not); None where they are silent
    or vague."""
    if call.docs_host == DocsHost.NEVER:
        return False
    if call.docs_host == DocsHost.DEVICE:
        return True
    if call.docs_host == DocsHost.STREAM:
        return ordered_after_spin(placement, spin_blocking)
    return None


def calls(library: str) -> tuple[Call, ...]:
    """One catalog's calls, in its order."""
    return lazy.now(MODULES[library]).CALLS


def kit(library: str) -> object:
    """The inputs a library's calls need, made on the current GPU (its catalog's ``Kit``)."""
    return lazy.now(MODULES[library]).Kit()


@functools.cache
def catalog(*libraries: str) -> dict[str, Call]:
    """Every call of these catalogs by name, catalog after catalog (the libraries' by default: CuPy's first, then
    numba-cuda's, then PyTorch's)."""
    return {call.name: call for library in libraries or LIBRARIES for call in calls(library)}


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
