"""hostmemory and managed on a real GPU, at small sizes. Skipped (with the reason) where no GPU is visible."""

import gpu_rows
import numpy as np
import pandas as pd
import pytest

pytestmark = pytest.mark.gpu

MiB = 1 << 20


@pytest.fixture(scope="module")
def cupy():
    import cupy

    return cupy


def rows_of(name: str, configs) -> pd.DataFrame:
    """The shared helper's rows, with managed's migrations sampled without a warm-up batch."""
    context = gpu_rows.quick_context()
    context.rules["migrate"] = context.rule().replace(warmup_batches=0)
    return gpu_rows.rows_of(name, configs, context)


# --- hostmemory -------------------------------------------------------------------------------------------------

def test_write_combined_buffer_round_trip(cupy):
    from cupy.cuda import runtime

    from bench.measure.memory import WriteCombinedBuffer

    source = cupy.arange(MiB, dtype=cupy.uint8)
    back = cupy.zeros(MiB, dtype=cupy.uint8)
    with WriteCombinedBuffer(MiB) as buffer:
        runtime.memcpy(buffer.ptr, source.data.ptr, MiB, runtime.memcpyDeviceToHost)
        buffer.array[:16] = 7  # the CPU writes it...
        runtime.memcpy(back.data.ptr, buffer.ptr, MiB, runtime.memcpyHostToDevice)
        assert int(buffer.array[100]) == 100  # ...and can read it, slowly
    assert buffer.array is None
    expected = source.copy()
    expected[:16] = 7
    assert bool((back == expected).all())


def test_the_copy_source_is_never_the_poison_byte(cupy):
    from bench.measure.copies import POISON, fill_pattern

    data = cupy.full(3 * MiB + 7, POISON, dtype=cupy.uint8)
    fill_pattern(data, seed=1)
    values = cupy.bincount(data, minlength=256).get()
    assert values[POISON] == 0 and (values > 0).sum() == 255  # every other byte value, none missing
    assert values.max() < 2 * values[values > 0].mean()  # spread evenly
    again = cupy.empty_like(data)
    fill_pattern(again, seed=1)
    assert bool((again == data).all())
    fill_pattern(again, seed=2)
    assert float((again == data).mean()) < 0.05


def test_hostmemory_small(cupy):
    from bench.experiments.hostmemory import HOST_KINDS, OPERATIONS

    configs = [{"host_memory": kind, "operation": operation, "bytes": nbytes}
               for kind in HOST_KINDS for operation in OPERATIONS for nbytes in (MiB, 3 * MiB + 5)]
    rows = rows_of("hostmemory", configs)
    assert list(rows["status"]) == ["ok"] * len(configs), rows[["host_memory", "operation", "bytes", "error"]]
    assert rows["verified"].all()
    assert (rows["gbps"] > 0).all() and (rows["n_samples"] >= 5).all()
    copies = rows[rows["operation"].isin(["H2D", "D2H"])]
    assert set(copies["clock"]) == {"gpu"} and copies["gated"].all() and (copies["gbps"] > 5).all()
    assert set(rows.loc[rows["operation"].str.startswith("cpu"), "clock"]) == {"host"}


def test_write_combined_memory_is_slower_for_the_cpu_to_read(cupy):
    """The penalty the CUDA documentation warns of, where the host makes the memory write-combined: a virtual
    machine's hypervisor may map it write-back (cached) whatever the guest asks, and then there is none to see."""
    from bench.experiments.hostmemory import HOST_KINDS

    if _virtual_machine():  # decided before measuring: the skip never depends on the number the test checks
        pytest.skip("a virtual machine (the CPU reports the hypervisor flag): its hypervisor may map write-combined "
                    "memory write-back, and then there is no penalty to see")
    rows = rows_of("hostmemory", [{"host_memory": kind, "operation": "cpu-read", "bytes": 4 * MiB}
                                  for kind in HOST_KINDS])
    assert list(rows["status"]) == ["ok", "ok"] and rows["verified"].all()
    read = rows.set_index("host_memory")["gbps"]
    assert read["write-combined"] < read["pinned"] / 2, read


def _virtual_machine() -> bool:
    """Whether this host is a guest of a hypervisor: the ``hypervisor`` CPU flag in /proc/cpuinfo."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return any(line.startswith("flags") and " hypervisor" in line for line in cpuinfo)
    except OSError:
        return False


def test_hostmemory_catches_a_wrong_copy(cupy, monkeypatch):
    """Verification is real: a copy that moves half the bytes is a failed row, not a number."""
    from bench.experiments import hostmemory

    honest = hostmemory.copy
    monkeypatch.setattr(hostmemory, "copy", lambda buffers, operation, nbytes: honest(buffers, operation, nbytes // 2))
    rows = rows_of("hostmemory", [{"host_memory": "write-combined", "operation": operation, "bytes": MiB}
                                  for operation in ("H2D", "D2H")])
    assert list(rows["status"]) == ["failed", "failed"] and not rows["verified"].any()
    assert rows["error"].str.contains("data mismatch").all()


# --- managed ----------------------------------------------------------------------------------------------------

def test_cupy_prefetch_takes_a_device_number_under_this_cuda(cupy):
    """runtime.memPrefetchAsync(ptr, count, device, stream): four arguments, whatever CUDA CuPy was built for (CuPy
    builds the CUDA 13 location itself); the pages end up where the kernel finds them."""
    from cupy.cuda import runtime

    from bench.experiments.managed import ManagedBuffer

    stream = cupy.cuda.Stream(non_blocking=True)
    with ManagedBuffer(4 * MiB) as buffer:
        buffer.words[:] = 3
        runtime.memPrefetchAsync(buffer.ptr, buffer.nbytes, runtime.getDevice(), stream.ptr)
        stream.synchronize()
        memory = cupy.cuda.UnownedMemory(buffer.ptr, buffer.nbytes, buffer)
        view = cupy.ndarray((buffer.count,), dtype=cupy.uint32, memptr=cupy.cuda.MemoryPointer(memory, 0))
        with stream:
            assert int(view.sum()) == 3 * buffer.count
        stream.synchronize()


def test_managed_small(cupy):
    from bench.experiments.managed import CASES

    configs = [{"bytes": 32 * MiB, "case": case} for case in CASES]
    rows = rows_of("managed", configs).set_index("case")
    assert list(rows["status"]) == ["ok"] * 3, rows[["status", "error"]]
    assert rows["verified"].all() and (rows["gbps"] > 0).all() and (rows["free_bytes"] > 32 * MiB).all()
    assert rows.loc["resident", "median"] < rows.loc["first-touch", "median"]  # faults cost
    assert rows.loc["resident", "median"] < rows.loc["prefetch-then-kernel", "median"]
    prefetched = rows.loc["prefetch-then-kernel"]
    assert 0 < prefetched["prefetch_ms"] < prefetched["median"] and 0 < prefetched["kernel_ms"] < prefetched["median"]
    assert prefetched["prefetch_gbps"] > 1 and not prefetched["gated"]
    assert rows.loc["first-touch", "gated"] and rows.loc["resident", "gated"]
    assert rows.loc["first-touch", "kernel_ms"] == rows.loc["first-touch", "median"]


def test_managed_skips_what_does_not_fit_without_allocating(cupy):
    from cupy.cuda import runtime

    free, total = runtime.memGetInfo()
    configs = [{"bytes": total, "case": case} for case in ("first-touch", "resident")]
    rows = rows_of("managed", configs)
    assert list(rows["status"]) == ["skipped", "skipped"]
    assert rows["error"].str.contains("more than half").all() and (rows["free_bytes"] > 0).all()
    assert runtime.memGetInfo()[0] > free // 2  # nothing was taken


def test_managed_catches_a_wrong_result(cupy, monkeypatch):
    from bench.experiments import managed

    monkeypatch.setattr(managed._Managed, "run_kernel", lambda self: None)  # nothing runs: the words keep the index
    rows = rows_of("managed", [{"bytes": 4 * MiB, "case": "first-touch"}])
    assert list(rows["status"]) == ["failed"] and "kernel result wrong" in rows["error"].iloc[0]
    assert not rows["verified"].iloc[0] and np.isnan(rows["gbps"].iloc[0])
