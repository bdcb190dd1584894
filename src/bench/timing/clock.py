"""The clock pytest-benchmark reads: GPU time on one stream between its calls, behind a gate (:class:`GpuClock`).

It imports :mod:`bench.platform.cuda` (lazy stand-ins) and :mod:`bench.timing.gpu`.
"""

from __future__ import annotations

from bench.platform.cuda import runtime
from bench.timing.gpu import Gate


class GpuClock:
    """A clock that reads GPU time on one stream: the timer pytest-benchmark calls around the code it measures.

    pytest-benchmark's one timing seam is its ``timer`` option, a callable returning seconds; it takes
    ``end - start`` around each round. Each call of this clock records an event on :attr:`stream`, waits for it,
    and returns the running total of GPU time between consecutive calls, so ``end - start`` is the GPU time of the
    work enqueued on the stream between them, as CUDA events measure it. With ``gated`` (the default), every call
    also closes a :class:`Gate` and records its start event behind it, and the next call opens the gate only after
    recording its end event: the work between two calls waits until the host has enqueued all of it, so how fast
    Python enqueues is not in the time (as in :meth:`bench.timing.Timer.measure`). Pageable copies need ``gated=False``.

    Use it in pedantic mode and call :meth:`release` when done, which opens a gate left closed by the last call::

        clock = GpuClock()

        @pytest.mark.benchmark(timer=clock)
        def test_copy(benchmark):
            ...  # enqueue work on clock.stream in copy()
            try:
                benchmark.pedantic(copy, rounds=20, warmup_rounds=2, iterations=8)
            finally:
                clock.release()
    """

    def __init__(self, *, gated: bool = True, gate_timeout_s: float = 5.0) -> None:
        self.gated, self._gate_timeout_s = gated, gate_timeout_s
        self._stream = self._gate = None
        self._events: tuple[int, int] | None = None
        self._running = False
        self._seconds = 0.0

    def __repr__(self) -> str:
        return f"GpuClock(gated={self.gated})"

    @property
    def stream(self):
        """The CuPy stream whose GPU time this clock reads (created on first use)."""
        if self._stream is None:
            from bench.platform.cuda import cupy

            self._stream = cupy.cuda.Stream(non_blocking=True)
            self._events = (runtime.eventCreate(), runtime.eventCreate())
            self._gate = Gate(self._gate_timeout_s) if self.gated else None
        return self._stream

    def __call__(self) -> float:
        stream = self.stream
        start, end = self._events
        runtime.eventRecord(end, stream.ptr)
        if self._running and self._gate is not None:
            self._gate.open()
        runtime.eventSynchronize(end)
        if self._running:
            if self._gate is not None:
                self._gate.check()
            self._seconds += runtime.eventElapsedTime(start, end) / 1e3
        if self._gate is not None:
            self._gate.close(stream)
        runtime.eventRecord(start, stream.ptr)
        self._running = True
        return self._seconds

    def release(self) -> None:
        """Open the gate the last call closed and wait for the stream; the next call starts afresh."""
        if self._running:
            if self._gate is not None:
                self._gate.open()
            self._stream.synchronize()
            self._running = False
