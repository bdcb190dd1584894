"""A trace's result in a few lines a person reads (what ``bench trace`` prints)."""

from __future__ import annotations

import math
import statistics

from bench.platform.units import format_size
from bench.usercode.activity import COPIES, Op
from bench.usercode.trace.collectives import is_collective
from bench.usercode.trace.model import GpuFigures, Trace
from bench.usercode.trace.outputs import WAIT_NS, line_of_frames, shown


def where(line: str) -> str:
    """'at docs/x.py:22', or where no Python made the call (a library's own thread: PyTorch's autograd engine, NCCL)
    what is known: that."""
    return f"at {shown(line)}" if line else "in a thread without Python code"


def describe(result: Trace) -> list[str]:
    """The result in a few lines a person reads."""
    activities, whole, runs = result.records.activities, result.whole, result.runs
    kernels = sum(a.op == Op.KERNEL for a in activities)
    nccl = sum(a.op == Op.KERNEL and is_collective(a.name) for a in activities)
    copies = sum(a.op in COPIES for a in activities)
    streams = len({(a.device, a.stream) for a in activities})
    spread = (f" (runs {min(runs.makespans_ms):.3f}–{max(runs.makespans_ms):.3f})" if len(runs.makespans_ms) > 1
              else "")
    several = f" on {len(result.gpus)} GPUs" if len(result.gpus) > 1 else ""
    lines = [f"makespan {whole.makespan_ms:.3f} ms{spread}{several}: {kernels} kernels"
             f"{f' ({nccl} NCCL)' if nccl else ''}, {copies} copies on {streams} stream{'s' * (streams != 1)}"]
    if result.efficiency is not None:
        terms = ", ".join(f"{term} {ms:.3f}" for term, ms in result.bound.terms.items())
        lines.append(f"runs at {result.efficiency:.0%} of what its copies and kernels allow: bound "
                     f"{result.bound.ms:.3f} ms ({terms}); fill {whole.fill_ms:.3f} ms, drain {whole.drain_ms:.3f} ms")
    busy = ", ".join(f"{engine} {ms:.3f}" for engine, ms in whole.busy_ms.items() if ms)
    lines.append(f"busy ms: {busy or 'nothing ran'}")
    if whole.hidden is not None:
        lines.append(f"copies hidden behind compute: {whole.hidden:.0%} ({whole.hidden_ms:.3f} of "
                     f"{whole.copy_ms:.3f} ms); H2D and D2H at once {whole.duplex_ms:.3f} ms; kernels at once "
                     f"{whole.concurrent_kernels_ms:.3f} ms")
    if whole.comm_ms:
        lines.append(f"communication (NCCL) {whole.comm_ms:.3f} ms: {whole.comm_hidden:.0%} hidden behind compute "
                     f"({whole.comm_hidden_ms:.3f} ms), exposed {whole.comm_exposed_ms:.3f} ms, compute idle "
                     f"during it {whole.comm_idle_ms:.3f} ms")
    if several:
        lines.append("per GPU (the times above are their sums; the makespan runs from the first start on any GPU to "
                     "the last end on any):")
        lines += [f"  {gpu_line(figures)}" for figures in result.gpus.values()]
    if result.pageable:
        lines += _pageable(result)
    waited = [gap for gap in whole.gaps if gap.wait]
    lines.append(f"idle {whole.idle_ms:.3f} ms in {len(whole.gaps)} gap{'s' * (len(whole.gaps) != 1)}"
                 + (f", {len(waited)} after a host wait:" if waited else ""))
    for gap in sorted(waited, key=lambda gap: -gap.ms)[:5]:
        lines.append(f"  {gap.ms:.3f} ms after {gap.wait.call} ({gap.wait.ms:.3f} ms) "
                     f"{where(line_of_frames(gap.wait.frames))}")
    if result.waits:
        lines.append(f"host waits (driver calls of {WAIT_NS / 1000:g} µs or more):")
    for wait in result.waits[:5]:
        lines.append(f"  host waited {wait.ms:.3f} ms in {wait.count} × {wait.call_names} {where(wait.line)}")
    if runs.overhead is not None:
        lines.append(f"tracing overhead: {runs.overhead:+.1%} host time per run, paired "
                     f"({statistics.median(runs.traced_ms):.3f} traced vs "
                     f"{statistics.median(runs.untraced_ms):.3f} ms, medians)")
    return lines


def _pageable(result: Trace) -> list[str]:
    """The pageable copies by line, each against pinned copies of its size (where there is a reference)."""
    count = sum(group.count for group in result.pageable)
    copies = f"{count} pageable cop{'ies' if count != 1 else 'y'}"
    known = not math.isnan(result.pageable_cost_ms)
    lines = [f"{copies} cost {result.pageable_cost_ms:.3f} ms against pinned memory:" if known else
             f"{copies} (no pinned reference: their cost against pinned memory is left out):"]
    for group in sorted(result.pageable, key=lambda group: (-group.ms if math.isnan(group.cost_ms) else
                                                             -group.cost_ms)):
        host = "" if group.host_ms is None else f"; host {group.host_ms:.3f} ms"
        pinned = ("" if math.isnan(group.pinned_ms) else
                  f", pinned {group.count * group.pinned_ms:.3f} ms ({group.reference})")
        lines.append(f"  {group.count} × {group.op} {format_size(group.bytes)}: {group.ms:.3f} ms{pinned}{host}"
                     f"{'  ' + shown(group.line) if group.line else ''}")
    return lines


def gpu_line(figures: GpuFigures) -> str:
    """'GPU 1 (rank 1): makespan 5.000 ms, compute 3.000 ms, ...': one GPU's numbers."""
    o = figures.overlap
    rank = f" (rank {figures.rank})" if figures.rank is not None else ""
    parts = [f"makespan {figures.makespan_ms:.3f} ms", f"compute {o.busy_ns['compute'] / 1e6:.3f} ms"]
    if figures.efficiency is not None:
        parts.append(f"efficiency {figures.efficiency:.0%}")
    if figures.hidden is not None:
        parts.append(f"copies hidden {figures.hidden:.0%}")
    if o.comm_ns:
        parts.append(f"communication {o.comm_ns / 1e6:.3f} ms, {figures.comm_hidden:.0%} hidden, exposed "
                     f"{(o.comm_ns - o.comm_hidden_ns) / 1e6:.3f} ms, compute idle during it "
                     f"{o.comm_idle_ns / 1e6:.3f} ms")
    parts.append(f"idle {sum(gap.ms for gap in o.gaps):.3f} ms")
    return f"GPU {figures.device}{rank}: " + ", ".join(parts)
