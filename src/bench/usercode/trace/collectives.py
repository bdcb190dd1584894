"""Which kernels are communication: NCCL's collectives and point-to-point kernels, by name.

NCCL's kernels are named ``nccl...``: ``ncclKernel_AllReduce_RING_LL_Sum_float`` before NCCL 2.19,
``ncclDevKernel_AllReduce_Sum_f32_RING_LL`` and ``ncclDevKernel_SendRecv`` since (the rename that broke HTA's older
rule, HolisticTraceAnalysis#109), RCCL's ``ncclDevKernel_Generic_4``. CUPTI gives a kernel's mangled name
(``_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE``: ``_Z``, the length of the name,
the name), profilers that demangle give ``ncclDevKernel_...(ncclDevKernelArgsStorage<4096ul>)``; both are
communication. Imports nothing: the analysis side (plots) and the tracing side use the same rule.
"""

from __future__ import annotations

import re

_COLLECTIVE = re.compile(r"(?:_Z\d+|void )?nccl")


def is_collective(name: str) -> bool:
    """Whether a kernel of this name (mangled as CUPTI gives it, or demangled) is NCCL's: communication, not
    compute."""
    return _COLLECTIVE.match(name) is not None
