"""What a watched region's waits fail: more than a count of them (:func:`check_waits`), or a place its syncs baseline
lacks (:func:`gate_waits`), as :class:`WaitedForGpu` naming the lines. Without pytest: the pytest fixtures, bench's
training-framework callbacks and any caller use them alike."""

from __future__ import annotations

from pathlib import Path

from bench.usercode.syncs.result import DEFAULT_SETTLE_MS


class WaitedForGpu(AssertionError):
    """The region waited for the GPU."""


def gate_waits(waits, path: Path, update: bool, settle_ms: float = DEFAULT_SETTLE_MS, target: str = "") -> None:
    """The watcher's ``waits`` (those outside every ``allow_waits`` scope) against the syncs baseline at ``path``:
    :class:`WaitedForGpu` naming each place that is new or waits more than it allows (a missing file allows none);
    with ``update``, the baseline written from them instead (its directory made)."""
    from bench.results import writes
    from bench.usercode.syncs import baseline
    from bench.usercode.syncs.gate import text
    from bench.usercode.syncs.result import places

    found, _ = places([wait for wait in waits if not wait.allowed], {}, settle_ms)
    target = target or path.stem
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        writes.write_bytes(path, baseline.to_json(map(baseline.kept, found), target).encode())
        return
    kept = baseline.read(path) if path.exists() else []
    comparison = baseline.compare(kept, found, str(path))
    if comparison.failed:
        hint = "" if path.exists() else " (no baseline yet: --bench-update-baseline writes it)"
        raise WaitedForGpu(text(comparison, target) + hint)


def check_waits(waits, max_waits: int = 0) -> None:
    """:class:`WaitedForGpu`, naming every counted wait's line, where more than ``max_waits`` of ``waits`` (the
    watcher's) were made outside every ``allow_waits`` scope."""
    counted = [wait for wait in waits if not wait.allowed]
    if len(counted) > max_waits:
        raise WaitedForGpu(describe(counted, max_waits))


def describe(waits, max_waits: int = 0) -> str:
    """'the region waited for the GPU 2 times: test_step.py:14 loss.item() (torch, cuStreamSynchronize) ...'"""
    allowing = f", more than the {max_waits} allowed" if max_waits else ""
    lines = [f"the region waited for the GPU {len(waits)} time{'s' * (len(waits) != 1)}{allowing} (a line that stood "
             "still as long on the host, a sleep, I/O or a lock, counts too: python -m bench syncs tells them apart):"]
    for wait in waits:
        what = ", ".join(part for part in (wait.library, wait.cuda_call) if part)
        how = ("held the GIL until the hold's watchdog ended the wait (a kernel's first launch loads it, and "
               "loading waits for the GPU)" if wait.gil_held else f"stood there {wait.held_ms:.0f} ms under the hold")
        lines.append(f"  {wait.line.file}:{wait.line.line} {wait.line.source}" + (f" ({what})" if what else "")
                     + f": {how}")
    return "\n".join(lines)
