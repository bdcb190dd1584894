"""All timing: statistics and stopping, GPU intervals (CUDA events, gated or not), host intervals, and host calls
made while the GPU is busy. Experiments describe what to run; this package decides how long, reads the clocks and
computes the statistics. ``from bench.timing import X`` is the one way in: every public name below is re-exported
here, whichever module defines it.

- :mod:`~bench.timing.stats`: :class:`Summary` and :class:`StopRule` (the one statistics type, and when to stop
  sampling), :func:`median` (numpy's median of a short list, quickly), :func:`median_interval` (a median's
  distribution-free 95% interval), :class:`Samples` (raw samples with their unit and clock; every measured result
  row carries them the same way, :meth:`Samples.columns`), the units, clocks and stop reasons the schema shares,
  :class:`MeasurementFailed`.
- :mod:`~bench.timing.host`: :func:`host_samples`, :func:`host_steps`, :func:`host_interval` (host wall-clock time
  of calls whose host cost is the point), :class:`Stopwatch`, :func:`process_age_s`, :class:`RuleBoundSampling`.
- :mod:`~bench.timing.gpu`: :class:`Gate`, :class:`Timer` (GPU time of ``enqueue(ops)`` with CUDA events on the
  streams that do the work, behind a gate), :class:`GpuTiming`, :class:`Event`, and :class:`Context` (what the
  harness hands an experiment: timers whose stop rules the harness chose).
- :mod:`~bench.timing.spin`: :class:`SpinWatch` (a call timed on the host while a spin kernel of known length runs,
  with what the GPU was doing when it returned; two spins around a call, read on the GPU's clock), :class:`ClockPair`,
  :func:`host_wait`, :func:`wait_samples`.
- :mod:`~bench.timing.timeline`: :class:`Timeline` (events around every operation of one run), :func:`concurrency`,
  :func:`peak_concurrency`.
- :mod:`~bench.timing.clock`: :class:`GpuClock`, the clock pytest-benchmark reads.
- :mod:`~bench.timing.phases`: :func:`phase` (mark a named phase of a command's wall-clock time), :data:`PHASES`,
  :func:`command_phases` (where the seconds went, what ``-v`` prints), :class:`Phase`.
- :mod:`~bench.timing.intervals`: :func:`union`, :func:`length`, :func:`shared`, :func:`gaps`, :func:`concurrent`:
  the arithmetic of intervals on one clock (a trace's overlap), pure Python.

What it may import: :mod:`stats`, :mod:`host`, :mod:`phases` and :mod:`intervals` the standard library only; the
GPU modules also :mod:`bench.platform.cuda` (lazy stand-ins: nothing CUDA loads until a GPU primitive is used). This
file imports ``stats``, ``host``, ``phases`` and ``intervals`` and loads the GPU modules on the first use of one of
their names (:mod:`bench.platform.lazy`), so importing :mod:`bench.timing` imports neither :mod:`bench.platform.cuda` nor CuPy nor numba, and the statistics
serve the analysis commands too.

Example (needs a GPU)::

    from bench.platform.cuda import cupy, runtime
    from bench.timing import Timer

    src, dst = cupy.ones(1 << 24, cupy.uint8), cupy.empty(1 << 24, cupy.uint8)
    stream = cupy.cuda.Stream(non_blocking=True)

    def enqueue(ops):
        for _ in range(ops):
            runtime.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes, runtime.memcpyDeviceToDevice, stream.ptr)

    timing = Timer().measure(enqueue, [stream])
    print(f"{timing.samples.summary.median:.4f} ms per copy ({timing.samples.stop_reason})")
"""

from __future__ import annotations

from bench.platform import lazy
from bench.timing.host import (RuleBoundSampling, Stopwatch, host_interval, host_samples, host_steps,
                               process_age_s)
from bench.timing.intervals import concurrent, gaps, length, shared, union
from bench.timing.phases import PHASES, Phase, command_phases, phase
from bench.timing.stats import (CLOCKS, MEDIAN_LEVEL, STOP_REASONS, UNITS, Floor, MeasurementFailed, Samples,
                                StopRule, Summary, median, median_interval)

# The modules that reach CUDA (through bench.platform.cuda), each loaded when one of its names is first asked for.
_LAZY = {
    "bench.timing.gpu": ("Gate", "GpuTiming", "Timer", "Event", "Context"),
    "bench.timing.spin": ("CallDuringSpin", "SpinPair", "SpinWatch", "HostWait", "ClockPair", "host_wait",
                          "wait_samples"),
    "bench.timing.timeline": ("Timeline", "concurrency", "peak_concurrency"),
    "bench.timing.clock": ("GpuClock",),
}

__all__ = ["CLOCKS", "MEDIAN_LEVEL", "STOP_REASONS", "UNITS", "Floor", "MeasurementFailed", "Samples",
           "StopRule", "Summary", "median", "median_interval",
           "RuleBoundSampling", "Stopwatch", "host_interval", "host_samples", "host_steps", "process_age_s",
           "concurrent", "gaps", "length", "shared", "union", "PHASES", "Phase", "command_phases", "phase",
           *(name for names in _LAZY.values() for name in names)]


__getattr__, __dir__ = lazy.names(globals(), _LAZY)
