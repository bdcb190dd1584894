"""A trace's result in a few lines a person reads (what ``bench trace`` prints)."""

from __future__ import annotations

import statistics

from bench.measure.activity import COPIES, Op
from bench.traces.result import WAIT_NS, TraceResult, line_of_frames, shown
from bench.units import format_size


def describe(result: TraceResult) -> list[str]:
    """The result in a few lines a person reads."""
    kernels = sum(a.op == Op.KERNEL for a in result.activities)
    copies = sum(a.op in COPIES for a in result.activities)
    streams = len({a.stream for a in result.activities})
    spread = (f" (runs {min(result.makespans_ms):.3f}–{max(result.makespans_ms):.3f})"
              if len(result.makespans_ms) > 1 else "")
    lines = [f"makespan {result.makespan_ms:.3f} ms{spread}: {kernels} kernels, {copies} copies on {streams} "
             f"stream{'s' * (streams != 1)}"]
    if result.efficiency is not None:
        terms = ", ".join(f"{term} {ms:.3f}" for term, ms in result.bound_terms.items())
        lines.append(f"runs at {result.efficiency:.0%} of what its copies and kernels allow: bound "
                     f"{result.bound_ms:.3f} ms ({terms}); fill {result.fill_ms:.3f} ms, "
                     f"drain {result.drain_ms:.3f} ms")
    busy = ", ".join(f"{engine} {ms:.3f}" for engine, ms in result.busy_ms.items() if ms)
    lines.append(f"busy ms: {busy or 'nothing ran'}")
    if result.hidden is not None:
        lines.append(f"copies hidden behind compute: {result.hidden:.0%} ({result.hidden_ms:.3f} of "
                     f"{result.copy_ms:.3f} ms); H2D and D2H at once {result.duplex_ms:.3f} ms; kernels at once "
                     f"{result.concurrent_kernels_ms:.3f} ms")
    if result.pageable:
        count = sum(group.count for group in result.pageable)
        lines.append(f"{count} pageable cop{'ies' if count != 1 else 'y'} cost {result.pageable_cost_ms:.3f} ms "
                     "against pinned memory:")
        for group in sorted(result.pageable, key=lambda group: -group.cost_ms):
            host = "" if group.host_ms is None else f"; host {group.host_ms:.3f} ms"
            lines.append(f"  {group.count} × {group.op} {format_size(group.bytes)}: {group.ms:.3f} ms, pinned "
                         f"{group.count * group.pinned_ms:.3f} ms ({group.reference}){host}"
                         f"{'  ' + shown(group.line) if group.line else ''}")
    waited = [gap for gap in result.gaps if gap.wait]
    lines.append(f"idle {result.idle_ms:.3f} ms in {len(result.gaps)} gap{'s' * (len(result.gaps) != 1)}"
                 + (f", {len(waited)} after a host wait:" if waited else ""))
    for gap in sorted(waited, key=lambda gap: -gap.ms)[:5]:
        where = shown(line_of_frames(gap.wait.frames))
        lines.append(f"  {gap.ms:.3f} ms after {gap.wait.call} ({gap.wait.ms:.3f} ms) at {where}")
    if result.waits:
        lines.append(f"host waits (driver calls of {WAIT_NS / 1000:g} µs or more):")
    for wait in result.waits[:5]:
        lines.append(f"  host waited {wait.ms:.3f} ms in {wait.count} × {wait.call_names} at {shown(wait.line)}")
    if result.overhead is not None:
        lines.append(f"tracing overhead: {result.overhead:+.1%} host time per run "
                     f"({statistics.median(result.traced_ms):.3f} traced vs "
                     f"{statistics.median(result.untraced_ms):.3f} ms)")
    return lines
