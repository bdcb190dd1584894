"""Events before and after every operation of one run (:class:`Timeline`), and how much a run's intervals overlap
(:func:`concurrency`, :func:`peak_concurrency`: pure arithmetic).

It imports :mod:`bench.platform.cuda` (a lazy stand-in for the CUDA runtime) and the standard library.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager

from bench.platform.cuda import runtime
from bench.timing.intervals import concurrent


class Timeline:
    """Events before and after every operation of one run, read back relative to a reference event.

    Inside the work's ``enqueue``: call :meth:`start` on the first stream before anything else, then wrap each
    operation in ``with timeline.op(stream, labels): ...``. After the run has finished, :meth:`read` gives one dict
    per operation: its labels, ``start_ms`` and ``end_ms``. Events are pooled and reused.
    """

    def __init__(self) -> None:
        self._pool: list[int] = []
        self._used = 0
        self._reference = 0
        self._ops: list[tuple[dict, int, int]] = []

    def _event(self) -> int:
        if self._used == len(self._pool):
            self._pool.append(runtime.eventCreate())
        self._used += 1
        return self._pool[self._used - 1]

    def start(self, stream) -> None:
        self._used, self._ops = 0, []
        self._reference = self._event()
        runtime.eventRecord(self._reference, stream.ptr)

    @contextmanager
    def op(self, stream, labels: dict):
        before, after = self._event(), self._event()
        runtime.eventRecord(before, stream.ptr)
        yield
        runtime.eventRecord(after, stream.ptr)
        self._ops.append((labels, before, after))

    def read(self) -> list[dict]:
        return [
            {**labels, "start_ms": runtime.eventElapsedTime(self._reference, before),
             "end_ms": runtime.eventElapsedTime(self._reference, after)}
            for labels, before, after in self._ops
        ]

    def close(self) -> None:
        for event in self._pool:
            runtime.eventDestroy(event)
        self._pool, self._used = [], 0


def concurrency(intervals: Sequence[tuple[float, float]]) -> float:
    """Share of the makespan (0 to the last end) during which two or more intervals overlap."""
    if not intervals:
        return float("nan")
    makespan = max(end for _, end in intervals)
    return concurrent(intervals) / makespan if makespan > 0 else float("nan")


def peak_concurrency(intervals: Sequence[tuple[float, float]]) -> int:
    """The most intervals running at one moment (an interval that ends as another starts does not count twice)."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    active = peak = 0
    for _, change in edges:
        active += change
        peak = max(peak, active)
    return peak
