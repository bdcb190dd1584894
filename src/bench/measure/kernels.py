"""numba-cuda kernels the experiments share: compute of tunable intensity, copies by the SMs, a pointer chase.

Kernels are cached on disk (numba's ``cache=True``), so a sweep's processes compile each one once per source change,
not once per process. Under Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) the PTX-level load below falls back
to plain Python, so the kernels' logic can be tested on a machine without a GPU. The timing core's own kernels (the
gate, the spin, the hold) are CUDA C++: :mod:`bench.timing.kernels`.
"""

from __future__ import annotations

import functools

import numba
from numba import cuda
from numba.cuda import config

if config.ENABLE_CUDASIM:

    def fresh_load_u64(pointer, index):
        """Simulator stand-in for a volatile 64-bit load through a raw pointer."""
        return pointer[index]

else:

    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def fresh_load_u64(typingctx, pointer, index):
        """``ld.volatile.global.u64`` of ``pointer[index]`` (a raw uint64 pointer): every load goes to memory,
        never to a register or the L1, so a chain of them measures access latency."""
        if not (isinstance(pointer, types.CPointer) and pointer.dtype == types.uint64
                and isinstance(index, types.Integer)):
            return None

        def codegen(context, builder, signature, args):
            pointer_value, index_value = args
            address = builder.gep(pointer_value, [index_value])
            load = ir.InlineAsm(ir.FunctionType(ir.IntType(64), [address.type]),
                                "ld.volatile.global.u64 $0, [$1];", "=l,l", side_effect=True)
            return builder.call(load, [address])

        return types.uint64(pointer, index), codegen


def numba_stream(ptr: int):
    """numba's handle for a stream given by its CUDA handle (a CuPy stream's ``ptr``, or 1 for the legacy and 2
    for the per-thread default stream); cached, because numba makes a new wrapper object per call."""
    handle = _NUMBA_STREAMS.get(ptr)
    if handle is None:
        handle = _NUMBA_STREAMS[ptr] = cuda.external_stream(ptr)
    return handle


_NUMBA_STREAMS: dict[int, object] = {}


# --- compute with tunable intensity -------------------------------------------------------------------------------
# Each element goes through `rounds` steps of a 32-bit linear congruential generator: integer arithmetic, so the GPU
# result is bit-exact and a host reference (numpy uint32) can verify it.
MIX_MULTIPLIER = 1664525
MIX_INCREMENT = 1013904223
THREADS_PER_BLOCK = 256


@cuda.jit(device=True)
def mix(value, rounds):
    for _ in range(rounds):
        value = (value * MIX_MULTIPLIER + MIX_INCREMENT) & 0xFFFFFFFF
    return value


def mix_reference(values, rounds: int):
    """What :func:`mix` computes, on the host (numpy uint32 arithmetic wraps the same way)."""
    import numpy as np

    values = np.array(values, dtype=np.uint32)
    for _ in range(rounds):
        values = values * np.uint32(MIX_MULTIPLIER) + np.uint32(MIX_INCREMENT)
    return values


def _mix_in_place(data, count, rounds):
    # The next element is loaded before the current one's chain of rounds, so the load's latency hides under that
    # chain wherever the data lives (device memory in a kernel alone, L2 right after an upload in a pipeline).
    index = cuda.grid(1)
    stride = cuda.gridsize(1)
    if index < count:
        upcoming = data[index]
    while index < count:
        value = upcoming
        following = index + stride
        if following < count:
            upcoming = data[following]
        data[index] = mix(value, rounds)
        index = following


_mix_in_place_device = cuda.jit(device=True)(_mix_in_place)


@cuda.jit(cache=True)
def mix_array_kernel(data, rounds):
    """The same work on a device array, launched through numba's default dispatcher."""
    _mix_in_place_device(data, data.size, rounds)


@functools.cache
def _compiled_mix_kernel():
    """The raw-pointer mix kernel, compiled once per process however many MixKernels there are."""
    from numba import types

    signature = types.void(types.CPointer(types.uint32), types.int64, types.int32)
    return cuda.jit(signature, cache=True)(_mix_in_place).overloads[signature.args]


class MixKernel:
    """``data[i] = mix(data[i], rounds)`` for ``count`` uint32 at a raw device pointer, launched the cheap way.

    The kernel is compiled once for a raw-pointer signature and launched through the compiled kernel object, which
    skips the dispatcher's per-call type matching; see the ``launch`` experiment for what each path costs. The grid
    is at most one full wave of resident blocks, each thread striding over the data: a larger grid would end in a
    partly filled last wave, which concurrent kernels from other streams fill but a kernel running alone cannot.
    """

    def __init__(self) -> None:
        self._compiled = _compiled_mix_kernel()
        self.max_blocks = self._compiled.max_cooperative_grid_blocks(THREADS_PER_BLOCK)

    def grid(self, count: int) -> int:
        return max(1, min(self.max_blocks, -(-count // THREADS_PER_BLOCK)))

    def launch(self, stream, pointer: int, count: int, rounds: int) -> None:
        """Launch on ``stream``: anything with a ``ptr`` (a CuPy stream, or :class:`bench.measure.memory.StreamRef`)."""
        self._compiled.launch([pointer, count, rounds], self.grid(count), THREADS_PER_BLOCK, numba_stream(stream.ptr))


# --- copies and latency through raw pointers (host-mapped or device memory) ----------------------------------------
COPY_UNROLL = 4


def _sm_copy(dst, src, count):
    # Each thread has COPY_UNROLL loads in flight before it stores: reads over PCIe take a microsecond or more.
    first = cuda.grid(1)
    stride = cuda.gridsize(1)
    base = first
    while base < count:
        values = cuda.local.array(COPY_UNROLL, dtype=numba.uint64)
        for step in range(COPY_UNROLL):
            index = base + step * stride
            if index < count:
                values[step] = src[index]
        for step in range(COPY_UNROLL):
            index = base + step * stride
            if index < count:
                dst[index] = values[step]
        base += COPY_UNROLL * stride


def _chase(base, steps, out):
    offset = out[0]  # where the last chase ended: successive launches walk on instead of re-reading cached slots
    for _ in range(steps):
        offset = fresh_load_u64(base, offset >> 3)
    out[0] = offset


@functools.cache
def _compiled(name: str):
    from numba import types

    pointer = types.CPointer(types.uint64)
    if name == "copy":
        signature = types.void(pointer, pointer, types.int64)
        return cuda.jit(signature, cache=True)(_sm_copy).overloads[signature.args]
    signature = types.void(pointer, types.int64, pointer)
    return cuda.jit(signature, cache=True)(_chase).overloads[signature.args]


class SmCopy:
    """A copy done by the SMs (a kernel), not a copy engine: ``bytes`` (a multiple of 8) from ``src`` to ``dst``,
    raw pointers to device or host-mapped pinned memory, as 8-byte words, a full wave of resident blocks striding
    over them."""

    def __init__(self) -> None:
        self._compiled = _compiled("copy")
        self.max_blocks = self._compiled.max_cooperative_grid_blocks(THREADS_PER_BLOCK)

    def launch(self, stream, dst: int, src: int, nbytes: int) -> None:
        words = nbytes // 8
        blocks = max(1, min(self.max_blocks, -(-words // THREADS_PER_BLOCK)))
        self._compiled.launch([dst, src, words], blocks, THREADS_PER_BLOCK, numba_stream(stream.ptr))


class Chase:
    """One thread following ``steps`` links of a pointer chain (each slot's first word: the byte offset of the next
    slot), every load volatile, from the offset in ``out[0]``, where it leaves the offset it ended at: successive
    launches walk on through the chain, so a working set larger than the caches is read from memory."""

    def __init__(self) -> None:
        self._compiled = _compiled("chase")

    def launch(self, stream, base: int, steps: int, out: int) -> None:
        self._compiled.launch([base, steps, out], 1, 1, numba_stream(stream.ptr))
