"""The timing core's CUDA C++ kernels: their host-mapped memory pool (no CUDA needed) and their source as NVRTC
compiles it (the measuring libraries, no GPU). On a GPU: tests/test_gpu_kernels.py."""

import ctypes
import gc
import threading

import numpy as np
import pytest

from bench.timing import kernels

NAMES = ("bench_gate", "bench_spin", "bench_clock", "bench_hold")


class FakeHost:
    """Host memory in ctypes buffers, aligned to a page as cudaHostAlloc's is and not zeroed, standing in for it;
    keeps what it was asked for and what it gave."""

    def __init__(self) -> None:
        self.buffers, self.sizes, self.given = [], [], []

    def __call__(self, size: int) -> int:
        buffer = (ctypes.c_byte * (size + 4096))()
        ctypes.memset(buffer, 0x7F, size + 4096)  # as dirty as pinned memory may come
        self.buffers.append(buffer)
        self.sizes.append(size)
        self.given.append(-(-ctypes.addressof(buffer) // 4096) * 4096)
        return self.given[-1]


def test_the_pool_hands_out_aligned_pieces_of_a_chunk_each_once():
    host = FakeHost()
    pool = kernels.MappedPool(host)
    first, second = pool.take(8), pool.take(100)
    assert host.sizes == [kernels.CHUNK_BYTES]
    assert first % kernels.ALIGN == 0 and second % kernels.ALIGN == 0
    assert second - first == kernels.ALIGN  # 8 bytes round up to one piece of ALIGN
    assert pool.take(1) == second + 2 * kernels.ALIGN  # 100 bytes took two pieces


def test_the_pool_grows_by_a_chunk_and_fits_a_piece_larger_than_a_chunk():
    host = FakeHost()
    pool = kernels.MappedPool(host)
    pool.take(kernels.CHUNK_BYTES - kernels.ALIGN)
    pool.take(2 * kernels.ALIGN)  # does not fit the rest of the first chunk
    large = pool.take(3 * kernels.CHUNK_BYTES)
    assert host.sizes == [kernels.CHUNK_BYTES, kernels.CHUNK_BYTES, 3 * kernels.CHUNK_BYTES]
    assert large == host.given[-1]


def test_mapped_memory_is_zeroed_typed_and_never_handed_out_again():
    host = FakeHost()
    pool = kernels.MappedPool(host)
    mapped = kernels.Mapped(5, "int32", pool)
    assert mapped.array.dtype == np.int32 and mapped.array.tolist() == [0] * 5
    mapped.array[3] = 7
    assert ctypes.c_int32.from_address(mapped.ptr + 12).value == 7  # the array is the memory the kernels get
    addresses = {mapped.ptr}
    del mapped
    gc.collect()  # a kernel may still write to a piece whose owner is gone: it is not handed out again
    addresses |= {kernels.Mapped(5, "int32", pool).ptr for _ in range(50)}
    assert len(addresses) == 51


def test_threads_taking_at_once_get_pieces_of_their_own():
    pool = kernels.MappedPool(FakeHost())
    taken: list[int] = []

    def take() -> None:
        taken.extend(pool.take(64) for _ in range(500))

    threads = [threading.Thread(target=take) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(taken)) == 2000


@pytest.mark.cuda_libs
def test_the_kernels_compile_with_volatile_loads_the_timer_and_their_names():
    from cupy_backends.cuda.libs import nvrtc

    cubin = kernels.nvrtc_cubin(kernels.SOURCE, "sm_90", kernels.OPTIONS)
    assert all(name.encode() in cubin for name in NAMES)
    program = nvrtc.createProgram(kernels.SOURCE, "bench.cu", (), ())
    try:
        nvrtc.compileProgram(program, ["--gpu-architecture=compute_90", *kernels.OPTIONS])
        ptx = nvrtc.getPTX(program).decode()
    finally:
        nvrtc.destroyProgram(program)
    hold = ptx[ptx.index(".entry bench_hold"):]
    # a polling loop that re-reads memory on every pass, and sleeps between passes
    assert "ld.volatile" in hold and "%globaltimer" in hold and "nanosleep" in hold
    assert f"{kernels.HOLD_CAP_NS}" in ptx or f"{kernels.HOLD_CAP_NS:#x}".lower() in ptx.lower()


@pytest.mark.cuda_libs
def test_the_cubin_is_kept_and_read_back_without_compiling(monkeypatch, tmp_path):
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    made = kernels.kept_cubin("sm_90")
    monkeypatch.setattr(kernels, "nvrtc_cubin", lambda *arguments: pytest.fail("compiled again"))
    assert kernels.kept_cubin("sm_90") == made and list(tmp_path.iterdir())
    with pytest.raises(pytest.fail.Exception):  # another architecture is not answered by this one's cubin
        kernels.kept_cubin("sm_80")


def test_a_launch_from_a_thread_without_a_context_binds_the_gpus_and_launches_again(monkeypatch):
    calls = []

    class Driver:
        def __init__(self) -> None:
            self.results = [kernels.INVALID_CONTEXT, 0]

        def cuLaunchKernel(self, kernel, *arguments):
            calls.append(("launch", kernel, arguments[:6]))
            return self.results.pop(0)

    class Runtime:
        def free(self, pointer: int) -> None:
            calls.append(("cudaFree", pointer))

    driver = Driver()
    monkeypatch.setattr(kernels, "_driver", lambda: driver)
    monkeypatch.setattr(kernels, "runtime", Runtime())
    monkeypatch.setattr(kernels, "function", lambda name: f"<{name}>")
    kernels.launch("bench_spin", 3, 64, 0, ctypes.c_uint64(5))
    assert calls == [("launch", "<bench_spin>", (3, 1, 1, 64, 1, 1)), ("cudaFree", 0),
                     ("launch", "<bench_spin>", (3, 1, 1, 64, 1, 1))]


def test_a_failed_launch_says_which_kernel_in_the_drivers_words(monkeypatch):
    class Driver:
        def cuLaunchKernel(self, *arguments):
            return 1  # CUDA_ERROR_INVALID_VALUE

        def cuGetErrorName(self, result, name):
            ctypes.cast(name, ctypes.POINTER(ctypes.c_char_p))[0] = b"CUDA_ERROR_INVALID_VALUE"
            return 0

    driver = Driver()
    monkeypatch.setattr(kernels, "_driver", lambda: driver)
    monkeypatch.setattr(kernels, "function", lambda name: None)
    with pytest.raises(kernels.DriverError, match="launching bench_gate: CUDA_ERROR_INVALID_VALUE"):
        kernels.launch("bench_gate", 1, 1, 0)
