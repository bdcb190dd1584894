"""numba-cuda kernels used by the timing core and the experiments.

Kernels are cached on disk (numba's ``cache=True``), so a sweep's processes compile each one once per source change,
not once per process. Under Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) the two PTX-level helpers below fall back to plain
Python, so the kernels' logic can be tested on a machine without a GPU.
"""

from __future__ import annotations

import functools
import time
import warnings

import numba
from numba import cuda
from numba.cuda import config

# Outcomes a gate writes to latch[1].
GATE_PENDING = 0
GATE_RELEASED = 1
GATE_EXPIRED = 2

if config.ENABLE_CUDASIM:

    def fresh_load(array, index):
        """Simulator stand-in for a volatile load."""
        return array[index]

    def globaltimer_ns():
        """Simulator stand-in for the GPU's global nanosecond timer."""
        return time.monotonic_ns()

    def fresh_load_u64(pointer, index):
        """Simulator stand-in for a volatile 64-bit load through a raw pointer."""
        return pointer[index]

    def pause(ns):
        """Simulator stand-in for ``__nanosleep``."""
        time.sleep(ns / 1e9)

else:

    from llvmlite import ir
    from numba import types
    from numba.cuda import cgutils
    from numba.cuda.extending import intrinsic

    @intrinsic
    def fresh_load(typingctx, array, index):
        """``ld.volatile.global`` of an int32 element, emitted as side-effecting asm.

        numba's ``cuda.ldcv`` is not enough here: its asm carries no side effect, so the compiler may hoist it
        out of a polling loop, which then spins on a stale register (seen on the H200).
        """
        if not (isinstance(array, types.Array) and array.dtype == types.int32 and isinstance(index, types.Integer)):
            return None

        def codegen(context, builder, signature, args):
            array_type, _ = signature.args
            array_value, index_value = args
            view = context.make_array(array_type)(context, builder, array_value)
            pointer = cgutils.get_item_pointer(context, builder, array_type, view, [index_value])
            load = ir.InlineAsm(ir.FunctionType(ir.IntType(32), [pointer.type]),
                                "ld.volatile.global.s32 $0, [$1];", "=r,l", side_effect=True)
            return builder.call(load, [pointer])

        return types.int32(array, index), codegen

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

    @intrinsic
    def globaltimer_ns(typingctx):
        """Read ``%globaltimer``: nanoseconds, the same clock on every SM."""

        def codegen(context, builder, signature, args):
            read_timer = ir.InlineAsm(
                ir.FunctionType(ir.IntType(64), []), "mov.u64 $0, %globaltimer;", "=l", side_effect=True
            )
            return builder.call(read_timer, [])

        return types.uint64(), codegen


@cuda.jit(cache=True)
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


@cuda.jit(cache=True)
def spin_kernel(duration_ns, stamps, slot):
    """Busy-wait ``duration_ns`` (``numpy.uint64``) on the global timer, one thread.

    ``stamps`` is host-mapped: ``stamps[2 * slot]`` gets the start and ``stamps[2 * slot + 1]`` the end, in global
    timer nanoseconds, each made visible to the host as soon as it is written.
    """
    start = globaltimer_ns()
    stamps[2 * slot] = start
    cuda.threadfence_system()
    now = start
    while now - start < duration_ns:
        now = globaltimer_ns()
    stamps[2 * slot + 1] = now
    cuda.threadfence_system()


# Hold state (host-mapped int32): what the host and the blocks of one hold write, each tagged with the hold's
# generation so a new hold needs no reset.
HOLD_RELEASE = 0  # the host writes the generation it releases
HOLD_EXPIRED = 1  # block 0 writes the generation whose watchdog ended it
HOLD_ENDED = 2  # block 0 writes the generation once it lets the blocks go
HOLD_BEAT = 3  # the host's heartbeat: a count it keeps raising while it watches
HOLD_STARTED = 4  # HOLD_STARTED + block: each block writes the generation once it runs
HOLD_CAP_NS = 60_000_000_000  # no hold lasts longer, heartbeat or not


if not config.ENABLE_CUDASIM:

    @cuda.jit(device=True, inline=True)
    def pause(ns):
        """``__nanosleep``: let the SM's other warps run a while."""
        cuda.nanosleep(ns)


@cuda.jit(cache=True, **({} if config.ENABLE_CUDASIM else {"max_registers": 32}))  # 2048 threads × 32 = an SM's
def hold_kernel(state, flag, generation, timeout_ns):
    """Occupy an SM's every thread slot until the host releases the hold (``state[HOLD_RELEASE] == generation``) or
    its heartbeat (``state[HOLD_BEAT]``) stops changing for ``timeout_ns`` (a watchdog: a host that dies or stops
    watching ends the hold; one that never beats gets a hold of ``timeout_ns``): launched with enough blocks to fill
    every SM, no block of any other kernel can start.

    Only block 0 reads the host's memory (every 2 µs); it passes the end on through ``flag`` (device memory), which
    the other blocks read. Every block also ends after ``HOLD_CAP_NS``. The other threads wait at the barrier,
    occupying their slots."""
    if cuda.threadIdx.x == 0:
        start = globaltimer_ns()
        state[HOLD_STARTED + cuda.blockIdx.x] = generation
        cuda.threadfence_system()
        if cuda.blockIdx.x == 0:
            beat = fresh_load(state, HOLD_BEAT)
            since = start
            while fresh_load(state, HOLD_RELEASE) != generation:
                now = globaltimer_ns()
                seen = fresh_load(state, HOLD_BEAT)
                if seen != beat:
                    beat = seen
                    since = now
                elif now - since > timeout_ns or now - start > HOLD_CAP_NS:
                    state[HOLD_EXPIRED] = generation
                    break
                pause(2000)
            flag[0] = generation
            cuda.threadfence()
            state[HOLD_ENDED] = generation
            cuda.threadfence_system()
        else:
            while fresh_load(flag, 0) != generation:
                if globaltimer_ns() - start > HOLD_CAP_NS + 1_000_000:
                    break
                pause(1000)
    cuda.syncthreads()


def numba_stream(ptr: int):
    """numba's handle for a stream given by its CUDA handle (a CuPy stream's ``ptr``, or 1 for the legacy and 2
    for the per-thread default stream); cached, because numba makes a new wrapper object per call."""
    handle = _NUMBA_STREAMS.get(ptr)
    if handle is None:
        handle = _NUMBA_STREAMS[ptr] = cuda.external_stream(ptr)
    return handle


_NUMBA_STREAMS: dict[int, object] = {}


def launch_single_thread(kernel, stream, *args) -> None:
    """Launch a one-thread kernel (the gate, the spin) on ``stream`` (anything with a CUDA handle in ``ptr``)."""
    from numba.cuda.core.errors import NumbaPerformanceWarning

    with warnings.catch_warnings():  # one thread on purpose: numba's low-occupancy warning does not apply
        warnings.simplefilter("ignore", NumbaPerformanceWarning)
        kernel[1, 1, numba_stream(stream.ptr)](*args)


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


@cuda.jit(cache=True)
def clock_publisher_kernel(stamps, duration_ns):
    """Write the global timer to host-mapped ``stamps[0]`` over and over for ``duration_ns``, so the host can pair
    its own clock with the GPU's (:class:`bench.timing.ClockPair`)."""
    start = globaltimer_ns()
    now = start
    while now - start < duration_ns:
        now = globaltimer_ns()
        stamps[0] = now
        cuda.threadfence_system()


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


def nvrtc_cubin(source: str) -> bytes:
    """CUDA C++ compiled for this process's GPU by NVRTC (through CuPy): a cubin to load with the driver."""
    import cupy
    from cupy_backends.cuda.libs import nvrtc

    program = nvrtc.createProgram(source, "bench.cu", (), ())
    try:
        nvrtc.compileProgram(program, [f"--gpu-architecture=sm_{cupy.cuda.Device().compute_capability}"])
        return nvrtc.getCUBIN(program)
    finally:
        nvrtc.destroyProgram(program)
