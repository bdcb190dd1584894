"""All timing: statistics and stopping (stats.py), host intervals (host.py), where a command's seconds went
(phases.py), interval arithmetic (intervals.py), and, reaching CUDA, the gate, CUDA events and :class:`Timer`
(gpu.py), spin watches (spin.py), timelines (timeline.py) and pytest-benchmark's clock (clock.py). Experiments say
what to run; this package decides how long, reads the clocks and computes the statistics. ``from bench.timing
import X`` is the one way in.

stats, host, phases and intervals import the standard library only, and are imported here; the GPU modules also
:mod:`bench.platform.cuda`, and are loaded on the first use of one of their names (:mod:`bench.platform.lazy`), so
the analysis commands import no CUDA with the statistics. More, with an example: docs/reference/packages.md.
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
