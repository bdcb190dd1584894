"""bench's pytest plugin: fail a test when a region of code waits for the GPU.

    def test_training_step_never_waits(assert_async):
        with assert_async():
            step(batch)

    # or, without the fixture:  from bench.pytest_plugin import assert_async

While the region runs, the stream (by default the legacy default stream, which CuPy and PyTorch use unless told
otherwise and which every blocking stream waits for) is held behind a gate: a one-thread kernel that spins until the
host opens it. Work the region enqueues waits behind it, so a region that waits for its results (``.item()``,
``.cpu()``, a synchronize) cannot return until the gate's watchdog gives up after ``timeout_s``. If the gate was still
closed when the region returned, the region did not wait; if the watchdog had released it, the region waited, and the
test fails with the time it waited. Without a GPU the test is skipped, with the reason bench's own GPU tests give
("needs a GPU: ..."). Registered through the ``pytest11`` entry point; it imports nothing CUDA until a test uses it,
so installing bench changes nothing for other test suites.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


class WaitedForGpu(AssertionError):
    """The region waited for the GPU."""


@contextmanager
def assert_async(stream=None, timeout_s: float = 1.0) -> Iterator[None]:
    """Fail (:class:`WaitedForGpu`) if the block waits for work queued on ``stream`` (a CuPy, PyTorch or numba
    stream, or a handle; None: the legacy default stream). Skips the test where no GPU is usable."""
    skip_without_gpu()
    from bench.cuda import runtime
    from bench.measure.memory import StreamRef
    from bench.probe import stream_handle
    from bench.timing import Gate

    handle = stream_handle(stream)
    gate = Gate(timeout_s)
    gate.close(StreamRef(handle if handle is not None else 0))
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
