"""What :func:`bench.syncs` found: the lines of the region's code that waited for the GPU (:class:`Place`), grouped
from the watcher's waits (:func:`places`), and :class:`SyncsResult`, its text, JSON and rows."""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.analysis.escape import json_text
from bench.usercode.defaults import DEFAULT_SETTLE_MS


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
    allowed: str = ""  # the reason of the allow_waits scope its waits were made in ("": not allowed)

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
    """What :func:`bench.syncs` found."""

    places: list[Place]  # lines that waited for the GPU, first waited first (outside every allow_waits scope)
    own_work: list[Place] = field(default_factory=list)  # lines that stood still as long without the hold
    region_ms: float = 0.0  # the region without the hold
    held_region_ms: float = 0.0  # the region under the hold
    settle_ms: float = DEFAULT_SETTLE_MS
    hold: str = ""  # the hold's shape: "264 blocks × 1024 threads on 132 SMs"
    cuda_calls: str = ""  # why CUDA calls are not named ("" where CUPTI named them)
    libraries: dict[str, str] = field(default_factory=dict)  # the GPU libraries loaded as it ran: column -> version
    allowed: list[Place] = field(default_factory=list)  # lines that waited inside an allow_waits scope

    @property
    def waited(self) -> bool:
        return bool(self.places)

    def __str__(self) -> str:
        if not self.places:
            text = (f"no waits{' but those allowed' if self.allowed else ''}: the region returned while the GPU was "
                    f"held ({self.region_ms:.1f} ms without the hold)")
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
        for place in self.allowed:
            text += (f"\nallowed: {place.where} waited {place.count} time{'s' * (place.count != 1)} "
                     f"({place.allowed}): {place.source}")
        for place in self.own_work:
            text += (f"\nnot a wait: {place.where} stood still {place.held_ms:.0f} ms under the hold and "
                     f"{place.natural_ms:.0f} ms without it (host work): {place.source}")
        if self.cuda_calls:
            text += f"\n{self.cuda_calls}"
        return text

    def _repr_html_(self) -> str:
        """In a notebook: the table, each line with its source (escaped)."""
        from bench.usercode.html import syncs_html

        return syncs_html(self)

    def to_dict(self) -> dict:
        return {**asdict(self), "waited": self.waited}

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON, its control characters escaped (:func:`bench.analysis.escape.json_text`)."""
        return json_text(self.to_dict(), indent=2)

    def rows(self) -> list[dict]:
        """One row per place (waits, allowed waits and own work), for the ``syncs`` side table."""
        return [{"file": place.file, "line": place.line, "function": place.function, "source": place.source,
                 "library": place.library, "waits": place.count, "held_ms": place.held_ms,
                 "natural_ms": place.natural_ms, "hold_ms": place.hold_ms, "cuda_calls": ", ".join(place.cuda_calls),
                 "into_library": " → ".join(place.into_library), "thread": place.thread,
                 "on_thread": place.on_thread, "waited": waited, "allowed": place.allowed}
                for waited, places in ((True, self.places), (True, self.allowed), (False, self.own_work))
                for place in places]


def places(waits: list, natural: dict, settle_ms: float) -> tuple[list[Place], list[Place]]:
    """The waits grouped by the user's line (and the allow_waits scope they were made in), first waited first:
    (waits for the GPU, host work). ``natural``: ms
    stood still at each place without the hold (:class:`bench.usercode.waits.Dwell`). A line is host work where,
    at the places it stood, it stood still without the hold nearly as long as under it (less than half a settle
    longer: one wait for the GPU adds about a settle, host work adds nothing). A place where JAX waits and then
    works on the host for long is still a wait: a rule of half a settle per wait missed one on an H200."""
    grouped: dict[tuple[str, str, int, str], list] = {}
    for wait in waits:
        grouped.setdefault((wait.thread, wait.line.file, wait.line.line, wait.allowed), []).append(wait)
    scoped: dict[tuple, int] = {}  # a line's waits at each place, in and out of allow_waits scopes together
    for wait in waits:
        key = (wait.thread, wait.line.file, wait.line.line, wait.place)
        scoped[key] = scoped.get(key, 0) + 1
    waited, own = [], []
    for (thread, file, line, allowed), group in grouped.items():
        first = group[0]
        held = sum(wait.held_ms for wait in group)
        mine = {where: sum(wait.place == where for wait in group) for where in dict.fromkeys(w.place for w in group)}
        place = Place(file, line, first.line.function, first.line.source,
                      next((wait.library for wait in group if wait.library), ""), len(group), held,
                      # a line that waited in and out of scopes: each group gets its waits' part of the time
                      sum(natural.get(where, 0.0) * count / scoped[(thread, file, line, where)]
                          for where, count in mine.items()),
                      sum(wait.released_s - wait.first_seen_s for wait in group) * 1e3,
                      tuple(dict.fromkeys(wait.cuda_call for wait in group if wait.cuda_call)),
                      tuple(str(frame) for frame in first.into_library),
                      tuple(str(frame) for frame in first.frames[:first.frames.index(first.line) + 1]),
                      thread, next((wait.on_thread for wait in group if wait.on_thread), ""), allowed)
        (waited if held - place.natural_ms >= settle_ms / 2 else own).append(place)
    return waited, own
