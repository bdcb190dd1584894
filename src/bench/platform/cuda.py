"""The CUDA libraries, imported on first use.

Experiment modules are also read by the analysis commands (``plot``, ``report``, ``compare``, ``claims``), which must
work without CuPy or numba-cuda. They therefore reach CUDA through these stand-ins: ``runtime.memcpyAsync(...)``
imports CuPy's runtime module the first time an attribute is read, and is the real function from then on.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from bench.platform import lazy

cupy = lazy.module("cupy")
cupyx = lazy.module("cupyx")
# cupy.cuda.runtime's very functions, without importing CuPy itself (half a second): a tool that needs only the
# runtime (a trace of PyTorch code) never imports CuPy
runtime = lazy.module("cupy_backends.cuda.api.runtime")
numba_cuda = lazy.module("numba.cuda")


@contextmanager
def on_device(device: int | None) -> Iterator[None]:
    """Make ``device`` the current GPU until the block ends (None: leave it as it is). CuPy and numba-cuda both
    follow the runtime's current device, so their kernels, streams, events and allocations go to it."""
    previous = runtime.getDevice() if device is not None else None
    if previous is None or previous == device:
        yield
        return
    runtime.setDevice(device)
    try:
        yield
    finally:
        runtime.setDevice(previous)


def make_current(device: int) -> None:
    """Make ``device`` the current GPU if it is not (a cudaGetDevice when it is)."""
    if runtime.getDevice() != device:
        runtime.setDevice(device)


@contextmanager
def kept_device(device: int) -> Iterator[None]:
    """Make ``device`` current again when the block ends, whatever the block left current. For a library that moves
    the current GPU behind the caller's back: XLA (JAX) makes the GPU of its work current on the calling thread and
    leaves it so (its pinned staging memory, used by transfers from NumPy arrays, belongs to the first GPU), after
    which CuPy's and numba-cuda's streams, kernels and events of ``device`` would fail or land on the wrong GPU."""
    try:
        yield
    finally:
        make_current(device)
