"""How much does my code overlap? The public names of the trace tool, whose code is :mod:`bench.usercode.trace`:
``bench.trace(fn)`` and ``with bench.tracing():`` run a region under CUPTI (:mod:`bench.usercode.trace.run`), and
what they find is a :class:`TraceResult`, its text, its results files, and several merged (a saved one is read
back by :func:`bench.usercode.trace.load.load`)."""

from bench.usercode.activity import TraceUnavailable
from bench.usercode.trace.assemble import result_of
from bench.usercode.trace.files import SUMMARY, TABLE, columns, save
from bench.usercode.trace.merge import merged
from bench.usercode.trace.model import GpuFigures, HostWait, PageableCopies
from bench.usercode.trace.outputs import WAIT_NS, shown
from bench.usercode.trace.overlap import ENGINES, GAP_NS, JOIN_NS, LINK, Gap, Overlap, overlap_of
from bench.usercode.trace.result import TraceResult
from bench.usercode.trace.run import DEFAULT_RUNS, pinned_results, trace, tracing
from bench.usercode.trace.text import describe

__all__ = ["DEFAULT_RUNS", "ENGINES", "GAP_NS", "JOIN_NS", "LINK", "SUMMARY", "TABLE", "WAIT_NS", "Gap", "GpuFigures",
           "HostWait", "Overlap", "PageableCopies", "TraceResult", "TraceUnavailable", "columns", "describe", "merged",
           "overlap_of", "pinned_results", "result_of", "save", "shown", "trace", "tracing"]
