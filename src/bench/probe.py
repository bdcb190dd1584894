"""Does *my* code block? The public names of the probe tool, whose code is :mod:`bench.usercode.probe`."""

from bench.usercode.probe import DEFAULT_SPIN_MS, ProbeResult, probe, stream_handle

__all__ = ["DEFAULT_SPIN_MS", "ProbeResult", "probe", "stream_handle"]
