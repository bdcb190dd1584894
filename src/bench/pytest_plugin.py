"""bench's pytest plugin: fail a test when a region of code waits for the GPU, naming the lines that waited.

    def test_training_step_never_waits(assert_async):
        with assert_async():
            step(batch)

    # or, without the fixture:  from bench.pytest_plugin import assert_async

While the region runs, the device-wide hold (:mod:`bench.measure.hold`) keeps every kernel of every stream and every
library from starting, so a call that needs the GPU's results cannot return; a watcher thread finds where the
region's thread stands still (:mod:`bench.measure.waits`), releases the hold and holds again. The test fails with the
lines that waited; a region that only enqueues work passes. Regions nest (an inner one joins the outer hold), and an
exception inside releases the GPU at once. ``stream=`` keeps the old meaning: only work queued on that stream (a CuPy,
PyTorch or numba stream, or a handle; 0 for the legacy default stream) is held, behind a one-thread gate.

Without a GPU the test is skipped, with the reason bench's own GPU tests give ("needs a GPU: ..."). Registered through
the ``pytest11`` entry point; it imports nothing CUDA until a test uses it, so installing bench changes nothing for
other test suites.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from bench.syncs import DEFAULT_SETTLE_MS


class WaitedForGpu(AssertionError):
    """The region waited for the GPU."""


@contextmanager
def assert_async(stream=None, timeout_s: float = 1.0, settle_ms: float = DEFAULT_SETTLE_MS) -> Iterator[None]:
    """Fail (:class:`WaitedForGpu`) if the block waits for the GPU: for work on any stream (the default), or only for
    work queued on ``stream``. A call that stands still ``settle_ms`` under the hold counts as waiting. Skips the
    test where no GPU is usable."""
    skip_without_gpu()
    if stream is not None:
        with _gated(stream, timeout_s):
            yield
        return
    from bench.syncs import held_region

    with held_region(settle_ms, entry=sys._getframe(2).f_back) as region:
        yield
    if region.waits:
        raise WaitedForGpu(describe(region.waits))


def describe(waits) -> str:
    """'the region waited for the GPU 2 times: test_step.py:14 loss.item() (torch, cuStreamSynchronize) ...'"""
    lines = [f"the region waited for the GPU {len(waits)} time{'s' * (len(waits) != 1)} (a line that stood still as "
             "long on the host, a sleep, I/O or a lock, counts too: python -m bench syncs tells them apart):"]
    for wait in waits:
        what = ", ".join(part for part in (wait.library, wait.cuda_call) if part)
        how = ("held the GIL until the hold's watchdog ended the wait (a kernel's first launch loads it, and "
               "loading waits for the GPU)" if wait.gil_held else f"stood there {wait.held_ms:.0f} ms under the hold")
        lines.append(f"  {wait.line.file}:{wait.line.line} {wait.line.source}" + (f" ({what})" if what else "")
                     + f": {how}")
    return "\n".join(lines)


@contextmanager
def _gated(stream, timeout_s: float) -> Iterator[None]:
    """The old meaning: a one-thread gate holds ``stream``; the region waited if the gate's watchdog released it."""
    from bench.cuda import runtime
    from bench.measure.memory import StreamRef
    from bench.probe import stream_handle
    from bench.timing import Gate

    gate = Gate(timeout_s)
    gate.close(StreamRef(stream_handle(stream)))
    started = time.perf_counter()
    try:
        yield
    finally:
        held_ms = (time.perf_counter() - started) * 1e3
        waited = gate.expired()
        gate.open()
        runtime.deviceSynchronize()
    if waited:
        raise WaitedForGpu(f"the region waited for the GPU: it held the host {held_ms:.0f} ms and returned only "
                           f"after the gate holding the stream was released by its {timeout_s:g} s watchdog")


def skip_without_gpu() -> None:
    """Skip the running test where no GPU is usable, saying why."""
    from bench.env import gpu_skip_reason

    reason = gpu_skip_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture(name="assert_async")
def assert_async_fixture():
    """:func:`assert_async`, as a fixture: ``with assert_async(): ...``; skips the test where no GPU is usable."""
    skip_without_gpu()
    return assert_async
