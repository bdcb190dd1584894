"""Fault injection for tests of isolation: an experiment that makes an illegal memory access after N rows.

Test support, not product code: ``with_fault(experiment, after)`` wraps any experiment's measuring code; the sweep's
child process imports this module to unpickle it (tests/ is on its path).
"""

from __future__ import annotations

import dataclasses
from functools import partial


def measure_with_fault(configs, context, measure, after: int):
    """``measure``'s rows; after the ``after``-th, a kernel writes to an invalid address and the stream is
    synchronized, which raises the sticky cudaErrorIllegalAddress."""
    for index, row in enumerate(measure(configs, context), start=1):
        yield row
        if index == after:
            illegal_access()


def illegal_access() -> None:
    from bench.platform.cuda import cupy
    from bench.measure import kernels

    stream = cupy.cuda.Stream(non_blocking=True)
    kernels.MixKernel().launch(stream, 8, 1 << 20, 1)
    stream.synchronize()


def with_fault(experiment, after: int):
    return dataclasses.replace(experiment, measure=partial(measure_with_fault, measure=experiment.measure,
                                                           after=after))
