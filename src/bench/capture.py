"""CUDA graph capture of work spread over several CuPy streams."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import cupy
from cupy.cuda import runtime


def capture(origin, others: Sequence, enqueue: Callable[[], None]) -> cupy.cuda.graph.Graph:
    """Capture ``enqueue()`` into a graph: ``others`` fork from ``origin`` at the start and join it at the end.

    Work the runtime will not capture raises as usual (a CUDARuntimeError with the runtime's text), after the
    capture has been ended so that the streams are usable again.
    """
    events: list[int] = []

    def record(stream) -> int:
        event = runtime.eventCreateWithFlags(runtime.eventDisableTiming)
        events.append(event)
        runtime.eventRecord(event, stream.ptr)
        return event

    origin.begin_capture(mode=runtime.streamCaptureModeRelaxed)
    try:
        try:
            fork = record(origin)
            for stream in others:
                runtime.streamWaitEvent(stream.ptr, fork, 0)
            enqueue()
            for stream in others:
                runtime.streamWaitEvent(origin.ptr, record(stream), 0)
        except BaseException:
            try:
                origin.end_capture()
            except Exception:  # already invalidated by the error being raised
                pass
            raise
        return origin.end_capture()
    finally:
        for event in events:
            runtime.eventDestroy(event)
