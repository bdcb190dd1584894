"""numba-cuda kernels used by the timing core and the experiments.

Under Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) the two PTX-level helpers below fall back to plain
Python, so the kernels' logic can be tested on a machine without a GPU.
"""

from __future__ import annotations

import time

from numba import cuda
from numba.cuda import config

# Outcomes a gate writes to latch[1].
GATE_PENDING = 0
GATE_RELEASED = 1
GATE_EXPIRED = 2

if config.ENABLE_CUDASIM:

    def fresh_load(array, index):
        """Simulator stand-in for ``cuda.ldcv``."""
        return array[index]

    def globaltimer_ns():
        """Simulator stand-in for the GPU's global nanosecond timer."""
        return time.monotonic_ns()

else:
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    # ld.global.cv: treat cached lines as stale and fetch again, so a poll sees the host's store.
    fresh_load = cuda.ldcv

    @intrinsic
    def globaltimer_ns(typingctx):
        """Read ``%globaltimer``: nanoseconds, the same clock on every SM."""

        def codegen(context, builder, signature, args):
            read_timer = ir.InlineAsm(
                ir.FunctionType(ir.IntType(64), []), "mov.u64 $0, %globaltimer;", "=l", side_effect=True
            )
            return builder.call(read_timer, [])

        return types.uint64(), codegen


@cuda.jit
def gate_kernel(latch, timeout_ns):
    """Hold the stream until the host stores non-zero into ``latch[0]`` (host-mapped memory).

    A watchdog gives up after ``timeout_ns`` (a ``numpy.uint64``) so nothing can hang; the outcome,
    ``GATE_RELEASED`` or ``GATE_EXPIRED``, goes to ``latch[1]`` for the host to check.
    """
    start = globaltimer_ns()
    while fresh_load(latch, 0) == 0:
        if globaltimer_ns() - start > timeout_ns:
            latch[1] = GATE_EXPIRED
            return
    latch[1] = GATE_RELEASED
