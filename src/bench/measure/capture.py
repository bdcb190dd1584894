"""Work spread over several CuPy streams as one unit: forked from and joined back to an origin stream, and
captured into a CUDA graph."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from bench.platform.cuda import runtime


@contextmanager
def forked(origin, others: Sequence, events: list[int]) -> Iterator[None]:
    """Work enqueued inside the block on ``others`` starts after what ``origin`` holds, and ``origin`` waits for
    all of it: to ``origin``, the multi-stream work is one operation. The fork and join events are appended to
    ``events``; the caller destroys them once nothing needs them (after ending a capture, say)."""

    def record(stream) -> int:
        event = runtime.eventCreateWithFlags(runtime.eventDisableTiming)
        events.append(event)
        runtime.eventRecord(event, stream.ptr)
        return event

    fork = record(origin)
    for stream in others:
        runtime.streamWaitEvent(stream.ptr, fork, 0)
    yield
    for stream in others:
        runtime.streamWaitEvent(origin.ptr, record(stream), 0)


def destroy(events: list[int]) -> None:
    for event in events:
        runtime.eventDestroy(event)
    events.clear()


def capture(origin, others: Sequence, enqueue: Callable[[], None]):
    """Capture ``enqueue()`` into a graph: ``others`` fork from ``origin`` at the start and join it at the end.

    Work the runtime will not capture raises as usual (a CUDARuntimeError with the runtime's text), after the
    capture has been ended so that the streams are usable again.
    """
    events: list[int] = []
    origin.begin_capture(mode=runtime.streamCaptureModeRelaxed)
    try:
        try:
            with forked(origin, others, events):
                enqueue()
        except BaseException:
            try:
                origin.end_capture()
            except Exception:  # already invalidated by the error being raised
                pass
            raise
        return origin.end_capture()
    finally:
        destroy(events)
