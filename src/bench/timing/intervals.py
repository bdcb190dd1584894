"""Intervals on one clock (ns): their union, what two sets share, the gaps between them. Pure Python, no CUDA: the
arithmetic of a trace's overlap (:mod:`bench.trace`) and of its tests."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Interval = tuple[int, int]  # (start, end), end >= start


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """The intervals merged where they touch or overlap, sorted."""
    merged: list[list[int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


def length(intervals: Iterable[Interval]) -> int:
    """The time the intervals cover (overlaps counted once)."""
    return sum(end - start for start, end in union(intervals))


def shared(first: Iterable[Interval], second: Iterable[Interval]) -> int:
    """The time both sets cover at once."""
    a, b = union(first), union(second)
    total, i, j = 0, 0, 0
    while i < len(a) and j < len(b):
        low, high = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0, high - low)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def gaps(intervals: Iterable[Interval], within: Interval | None = None) -> list[Interval]:
    """The stretches no interval covers, between the first start and the last end (or within ``within``)."""
    merged = union(intervals)
    if not merged:
        return [within] if within else []
    start, end = within or (merged[0][0], merged[-1][1])
    found, cursor = [], start
    for low, high in merged:
        if low > cursor:
            found.append((cursor, min(low, end)))
        cursor = max(cursor, high)
    if cursor < end:
        found.append((cursor, end))
    return [(low, high) for low, high in found if high > low]


def concurrent(intervals: Sequence[Interval]) -> int:
    """The time at least two of the intervals run at once."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals],
                    key=lambda event: (event[0], event[1]))
    total, running, last = 0, 0, None
    for when, change in events:
        if running >= 2 and last is not None:
            total += when - last
        running += change
        last = when
    return total
