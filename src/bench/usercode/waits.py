"""The records the watcher (:mod:`bench.usercode.watcher`) makes of where a thread stood: a :class:`Wait` under the
hold, :class:`Dwell` without one; their frames are :mod:`bench.usercode.stacks`'.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from bench.usercode.stacks import Frame, user_index


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
    thread: str = ""  # the name of the thread that waited ("": the region's own)
    on_thread: str = ""  # the region's thread waited on this thread's wait (a join, a queue): its name
    allowed: str = ""  # the reason of the allow_waits scope it waited in ("": not allowed)

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


@dataclass
class Dwell:
    """How long the thread stood still at each place without a hold (the GIL free, as under the hold): total ms by
    its innermost frame's (file, line), the place a wait is found at."""

    ms: dict[tuple[str, int], float] = field(default_factory=lambda: defaultdict(float))

    def add(self, place: tuple[str, int], seconds: float) -> None:
        self.ms[place] += seconds * 1e3
