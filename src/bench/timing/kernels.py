"""The timing core's kernels: the gate, the spin, the clock publisher and the device-wide hold, in CUDA C++.

NVRTC compiles them once for the GPU's architecture; the cubin is kept in bench's cache (:mod:`bench.platform.cache`,
keyed by this source, the architecture and CuPy's version), so a later command loads it without compiling. They are
loaded and launched through the driver (``libcuda``), so the tools that use them import neither numba nor CuPy:
only CuPy's runtime bindings. Their state lives in host-mapped pinned memory (:class:`Mapped`), which host and
kernel both read and write while the kernel runs.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from dataclasses import dataclass

from bench.platform.cuda import runtime

# Outcomes the gate writes to latch[1].
GATE_PENDING = 0
GATE_RELEASED = 1
GATE_EXPIRED = 2

# The hold's state (host-mapped int32): what the host and the blocks of one hold write, each tagged with the hold's
# generation so a new hold needs no reset.
HOLD_RELEASE = 0  # the host writes the generation it releases
HOLD_EXPIRED = 1  # block 0 writes the generation whose watchdog ended it
HOLD_ENDED = 2  # block 0 writes the generation once it lets the blocks go
HOLD_BEAT = 3  # the host's heartbeat: a count it keeps raising while it watches
HOLD_STARTED = 4  # HOLD_STARTED + block: each block writes the generation once it runs
HOLD_CAP_NS = 60_000_000_000  # no hold lasts longer, heartbeat or not

SOURCE = r"""
typedef unsigned long long u64;

__device__ __forceinline__ u64 globaltimer() {  // nanoseconds, the same clock on every SM
    u64 now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    return now;
}

// Hold the stream until the host stores non-zero into latch[0]; a watchdog gives up after timeout_ns. The outcome
// goes to latch[1]. Every access to host-mapped memory is volatile: a polling loop re-reads memory each time.
extern "C" __global__ void bench_gate(volatile int* latch, u64 timeout_ns) {
    u64 start = globaltimer();
    while (latch[0] == 0) {
        if (globaltimer() - start > timeout_ns) {
            latch[1] = GATE_EXPIRED;
            return;
        }
    }
    latch[1] = GATE_RELEASED;
}

// Busy-wait duration_ns on the global timer, one thread; stamps[2 * slot] gets the start and stamps[2 * slot + 1]
// the end, each made visible to the host as soon as it is written.
extern "C" __global__ void bench_spin(u64 duration_ns, volatile u64* stamps, int slot) {
    u64 start = globaltimer();
    stamps[2 * slot] = start;
    __threadfence_system();
    u64 now = start;
    while (now - start < duration_ns) now = globaltimer();
    stamps[2 * slot + 1] = now;
    __threadfence_system();
}

// Write the global timer to stamps[0] over and over for duration_ns (the host pairs its clock with it).
extern "C" __global__ void bench_clock(volatile u64* stamps, u64 duration_ns) {
    u64 start = globaltimer();
    u64 now = start;
    while (now - start < duration_ns) {
        now = globaltimer();
        stamps[0] = now;
        __threadfence_system();
    }
}

// Occupy an SM's every thread slot until the host releases the hold (state[HOLD_RELEASE] == generation) or its
// heartbeat (state[HOLD_BEAT]) stops changing for timeout_ns. Only block 0 reads the host's memory (every 2 us); it
// passes the end on through flag (device memory), which the other blocks read. Every block ends after HOLD_CAP_NS.
// The other threads wait at the barrier, occupying their slots.
extern "C" __global__ void bench_hold(volatile int* state, volatile int* flag, int generation, u64 timeout_ns) {
    if (threadIdx.x == 0) {
        u64 start = globaltimer();
        state[HOLD_STARTED + blockIdx.x] = generation;
        __threadfence_system();
        if (blockIdx.x == 0) {
            int beat = state[HOLD_BEAT];
            u64 since = start;
            while (state[HOLD_RELEASE] != generation) {
                u64 now = globaltimer();
                int seen = state[HOLD_BEAT];
                if (seen != beat) {
                    beat = seen;
                    since = now;
                } else if (now - since > timeout_ns || now - start > HOLD_CAP_NS) {
                    state[HOLD_EXPIRED] = generation;
                    break;
                }
                __nanosleep(2000);
            }
            *flag = generation;
            __threadfence();
            state[HOLD_ENDED] = generation;
            __threadfence_system();
        } else {
            while (*flag != generation) {
                if (globaltimer() - start > HOLD_CAP_NS + 1000000ULL) break;
                __nanosleep(1000);
            }
        }
    }
    __syncthreads();
}
"""
NAMES = ("bench_gate", "bench_spin", "bench_clock", "bench_hold")
DEFINES = {name: value for name, value in globals().items() if name.startswith(("GATE_", "HOLD_"))}
# 2048 thread slots × 32 registers fill an SM's register file: a hold of 1024-thread blocks needs at most 32 each
OPTIONS = ("--maxrregcount=32", *(f"-D{name}={value}{'ULL' if value > 2**31 else ''}"
                                  for name, value in DEFINES.items()))


INVALID_CONTEXT = 201  # CUDA_ERROR_INVALID_CONTEXT: no context current on the calling thread


class DriverError(RuntimeError):
    """A CUDA driver call failed."""


@functools.cache
def _driver() -> ctypes.CDLL:
    driver = ctypes.CDLL("libcuda.so.1")
    driver.cuLaunchKernel.argtypes = [ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p, ctypes.c_void_p,
                                      ctypes.c_void_p]
    driver.cuModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
    driver.cuModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p]
    return driver


def _checked(result: int, what: str) -> None:
    if result:
        name = ctypes.c_char_p()
        _driver().cuGetErrorName(result, ctypes.byref(name))
        raise DriverError(f"{what}: {(name.value or b'CUDA error').decode()} ({result})")


def architecture(device: int) -> str:
    """``sm_90`` for a device of compute capability 9.0."""
    properties = runtime.getDeviceProperties(device)
    return f"sm_{properties['major']}{properties['minor']}"


def nvrtc_cubin(source: str, arch: str | None = None, options: tuple[str, ...] = ()) -> bytes:
    """CUDA C++ compiled by NVRTC (through CuPy's bindings) for ``arch`` (None: the current GPU's): a cubin to load
    with the driver."""
    from cupy_backends.cuda.libs import nvrtc

    arch = arch or architecture(runtime.getDevice())
    program = nvrtc.createProgram(source, "bench.cu", (), ())
    try:
        nvrtc.compileProgram(program, [f"--gpu-architecture={arch}", *options])
        return nvrtc.getCUBIN(program)
    finally:
        nvrtc.destroyProgram(program)


def kept_cubin(arch: str, fresh: bool = False) -> bytes:
    """This module's kernels compiled for ``arch``, from bench's cache where they were compiled before (``fresh``:
    compile again and keep the new cubin)."""
    from bench.platform import cache

    entry = cache.key("cubin", [SOURCE, arch, *OPTIONS], ["cupy-cuda13x", "cupy-cuda12x", "cupy"])
    cubin = None if fresh else cache.get(entry)
    if cubin is None:
        cubin = nvrtc_cubin(SOURCE, arch, OPTIONS)
        cache.put(entry, cubin)
    return cubin


_MODULES: dict[int, ctypes.c_void_p] = {}  # per device: loaded once into its primary context
_FUNCTIONS: dict[tuple[int, str], ctypes.c_void_p] = {}


def function(name: str) -> ctypes.c_void_p:
    """The kernel ``name`` (``bench_gate``, ``bench_spin``, ``bench_clock``, ``bench_hold``) on the current GPU,
    its module loaded on first use (a cached cubin that this driver cannot load is compiled again)."""
    device = runtime.getDevice()
    found = _FUNCTIONS.get((device, name))
    if found is not None:
        return found
    if device not in _MODULES:
        runtime.free(0)  # the device's primary context made current: the driver loads into it
        arch, module = architecture(device), ctypes.c_void_p()
        if _driver().cuModuleLoadData(ctypes.byref(module), kept_cubin(arch)):
            _checked(_driver().cuModuleLoadData(ctypes.byref(module), kept_cubin(arch, fresh=True)),
                     "loading bench's kernels")
        for kernel_name in NAMES:  # all now: under lazy loading, getting a kernel loads it, which may wait for the GPU
            kernel = ctypes.c_void_p()
            _checked(_driver().cuModuleGetFunction(ctypes.byref(kernel), module, kernel_name.encode()), kernel_name)
            _FUNCTIONS[(device, kernel_name)] = kernel
        _MODULES[device] = module
    return _FUNCTIONS[(device, name)]


def launch(name: str, blocks: int, threads: int, stream: int, *arguments: ctypes._SimpleCData) -> None:
    """Launch kernel ``name`` on the current GPU: ``blocks`` × ``threads`` on the stream whose CUDA handle is
    ``stream``, with ``arguments`` as ctypes values in the kernel's order."""
    pointers = (ctypes.c_void_p * len(arguments))(*(ctypes.addressof(argument) for argument in arguments))
    kernel = function(name)
    result = _driver().cuLaunchKernel(kernel, blocks, 1, 1, threads, 1, 1, 0, stream, pointers, None)
    if result == INVALID_CONTEXT:  # a thread whose runtime has not bound the current GPU's context yet: bind it
        runtime.free(0)
        result = _driver().cuLaunchKernel(kernel, blocks, 1, 1, threads, 1, 1, 0, stream, pointers, None)
    _checked(result, f"launching {name}")


# --- host-mapped memory -------------------------------------------------------------------------------------------
CHUNK_BYTES = 64 << 10
ALIGN = 64


@dataclass
class _Chunk:
    base: int
    size: int
    used: int = 0


class MappedPool:
    """Host-mapped pinned memory handed out in small aligned pieces, each once: a piece is never handed out again,
    nor given back to CUDA, since a kernel may still write to it after its owner is gone (a spin whose call raised,
    a gate nobody opened), and a ``cudaFreeHost`` would wait for the device, which may wait behind a gate for the
    host. Pieces are of 64 bytes or so, and a process makes some thousands at most. ``allocate(size)`` gives host
    memory that every GPU can reach at the same address (portable, mapped: unified addressing)."""

    def __init__(self, allocate=None) -> None:
        self._allocate = allocate or (lambda size: runtime.hostAlloc(
            size, runtime.hostAllocMapped | runtime.hostAllocPortable))
        self._chunk: _Chunk | None = None
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> int:
        size = -(-max(nbytes, 1) // ALIGN) * ALIGN
        with self._lock:
            chunk = self._chunk
            if chunk is None or chunk.used + size > chunk.size:
                chunk = self._chunk = _Chunk(int(self._allocate(max(CHUNK_BYTES, size))), max(CHUNK_BYTES, size))
            address = chunk.base + chunk.used
            chunk.used += size
        return address


_POOL = MappedPool()


class Mapped:
    """``count`` zeroed elements of ``dtype`` in host-mapped memory: :attr:`array` (NumPy) on the host, :attr:`ptr`
    on every GPU."""

    def __init__(self, count: int, dtype, pool: MappedPool = _POOL) -> None:
        import numpy as np

        dtype = np.dtype(dtype)
        nbytes = count * dtype.itemsize
        self.ptr = pool.take(nbytes)
        self.array = np.frombuffer((ctypes.c_byte * nbytes).from_address(self.ptr), dtype=dtype)
        self.array[:] = 0
