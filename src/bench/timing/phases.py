"""Where a command's seconds went: named phases of the host's wall-clock time (``-v`` prints them).

Code marks a phase with ``with phase("CUPTI start"):``; a phase inside another counts only in the inner one, so the
phases never count a second twice. :data:`PHASES` keeps this process's; :func:`started` marks when bench's own code
began to run, so that the interpreter's start and bench's imports are phases too. Standard library only.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from bench.timing.host import process_age_s

INTERPRETER, IMPORTS, OTHER = "interpreter start", "bench's imports and arguments", "other"
WARM_UP, CUPTI_START, HOLD_SETUP = "warm-up (your code's first call)", "CUPTI's start", "the hold's setup"
VERSIONS = "the libraries' versions"


@dataclass(frozen=True)
class Phase:
    """One phase: its name and the seconds spent in it (nested phases' seconds not included)."""

    name: str
    seconds: float


class Phases:
    """The seconds of each named phase, in the order each first began."""

    def __init__(self) -> None:
        self._seconds: dict[str, float] = {}
        self._open: list[list] = []  # [name, started, seconds of phases inside it]

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        self._seconds.setdefault(name, 0.0)
        entry = [name, time.perf_counter(), 0.0]
        self._open.append(entry)
        try:
            yield
        finally:
            self._open.remove(entry)
            spent = time.perf_counter() - entry[1]
            self._seconds[name] += spent - entry[2]
            if self._open:
                self._open[-1][2] += spent

    def add(self, name: str, seconds: float) -> None:
        self._seconds[name] = self._seconds.get(name, 0.0) + seconds

    def phases(self) -> list[Phase]:
        return [Phase(name, seconds) for name, seconds in self._seconds.items()]

    def clear(self) -> None:
        """Forget every phase (a command run again in the same process counts afresh)."""
        self._seconds.clear()


PHASES = Phases()
phase = PHASES.__call__
_BEGAN: list[float] = []  # perf_counter when bench's first line ran, and the interpreter's start (s) before it


def started(at: float) -> None:
    """Mark ``at`` (a ``perf_counter`` taken as bench's first line ran) as the end of the interpreter's start; the
    seconds from then until now count as bench's imports. Once a process: its later commands count from their own
    start (:func:`restarted`)."""
    if not _BEGAN:
        now = time.perf_counter()
        _BEGAN.extend((at, max(0.0, process_age_s() - (now - at))))
        PHASES.add(IMPORTS, now - at)


def command_phases() -> list[Phase]:
    """This process's phases until now: the interpreter's start (where :func:`started` was called and Linux tells
    the process's age), the marked phases, and the seconds none of them holds as ``other``."""
    marked = PHASES.phases()
    if not _BEGAN:
        return marked
    began, interpreter_s = _BEGAN
    other = (time.perf_counter() - began) - sum(found.seconds for found in marked)
    return [Phase(INTERPRETER, interpreter_s), *marked, Phase(OTHER, max(0.0, other))]


def restarted() -> None:
    """A command begins in a process that ran one before (a test's, in-process): its phases count from now."""
    PHASES.clear()
    if _BEGAN:
        _BEGAN[:] = [time.perf_counter(), 0.0]
