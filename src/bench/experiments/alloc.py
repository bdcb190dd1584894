"""What allocation costs: cudaMalloc vs cudaMallocAsync (pool release threshold 0, the default, or the maximum),
cudaHostAlloc vs cudaHostRegister, over sizes; and the loop real code runs.

``pattern=single``: host µs of each allocation and each free, ``REPEATS`` times (fewer above ``LARGE``).
``cycle_us`` is one whole allocate-and-free round trip as code pays it: for cudaMallocAsync, mallocAsync + freeAsync
+ the stream synchronization after which a pool with release threshold 0 hands its memory back to the driver, so
the next allocation maps memory again; with the maximum threshold the pool keeps it. ``pattern=loop``: ``LOOP``
iterations of (allocate, a kernel over the buffer, free) on one stream, timed on the GPU with events around the whole
loop (``gpu_us_per_iteration``; not gated: cudaFree may wait on the host) and on the host from the first call to the
end of the stream synchronization (``host_us_per_iteration``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator, Sequence
from contextlib import nullcontext

import cupy
import pandas as pd
from cupy.cuda import runtime

from bench.experiments import Config, Experiment, Row
from bench.kernels import MixKernel
from bench.memory import RELEASE_THRESHOLD_MAX, release_threshold, touched
from bench.units import format_size

APIS = ("cudaMalloc", "cudaMallocAsync", "cudaHostAlloc", "cudaHostRegister")
DEVICE_APIS = ("cudaMalloc", "cudaMallocAsync")
REPEATS = 20
LARGE = 64 << 20
LARGE_REPEATS = 5
LOOP = 50
LOOP_REPEATS = 5
HOST_MAX_BYTES = 1 << 30


def _us(call) -> tuple[float, object]:
    started = time.perf_counter()
    result = call()
    return (time.perf_counter() - started) * 1e6, result


def _single(api: str, nbytes: int, stream) -> dict[str, list[float]]:
    """Host µs of each allocation, free, and whole round trip."""
    samples: dict[str, list[float]] = {"alloc_us": [], "free_us": [], "cycle_us": []}
    memory = touched(nbytes) if api == "cudaHostRegister" else None
    for index in range(1 + (REPEATS if nbytes <= LARGE else LARGE_REPEATS)):  # the first round trip is a warm-up
        sync_us = 0.0
        if api == "cudaMalloc":
            alloc_us, ptr = _us(lambda: runtime.malloc(nbytes))
            free_us, _ = _us(lambda: runtime.free(ptr))
        elif api == "cudaMallocAsync":
            alloc_us, ptr = _us(lambda: runtime.mallocAsync(nbytes, stream.ptr))
            free_us, _ = _us(lambda: runtime.freeAsync(ptr, stream.ptr))
            sync_us, _ = _us(stream.synchronize)
        elif api == "cudaHostAlloc":
            alloc_us, ptr = _us(lambda: runtime.hostAlloc(nbytes, 0))
            free_us, _ = _us(lambda: runtime.freeHost(ptr))
        else:
            alloc_us, _ = _us(lambda: runtime.hostRegister(memory.ctypes.data, nbytes, 0))
            free_us, _ = _us(lambda: runtime.hostUnregister(memory.ctypes.data))
        if index:
            samples["alloc_us"].append(alloc_us)
            samples["free_us"].append(free_us)
            samples["cycle_us"].append(alloc_us + free_us + sync_us)
    return samples


def loop_once(api: str, nbytes: int, stream, kernel: MixKernel) -> None:
    """``LOOP`` iterations of (allocate ``nbytes``, a one-round kernel over it, free) with ``api``."""
    words = max(1, nbytes // 4)
    for _ in range(LOOP):
        if api == "cudaMalloc":
            ptr = runtime.malloc(nbytes)
            kernel.launch(stream, ptr, words, 1)
            runtime.free(ptr)
        else:
            ptr = runtime.mallocAsync(nbytes, stream.ptr)
            kernel.launch(stream, ptr, words, 1)
            runtime.freeAsync(ptr, stream.ptr)


def _loop(api: str, nbytes: int, stream, kernel: MixKernel) -> dict[str, list[float]]:
    """GPU and host µs per iteration of (allocate, kernel, free), one sample per repeat of the loop."""
    samples: dict[str, list[float]] = {"gpu_us_per_iteration": [], "host_us_per_iteration": []}
    start, end = runtime.eventCreate(), runtime.eventCreate()
    try:
        for index in range(1 + LOOP_REPEATS):
            started = time.perf_counter()
            runtime.eventRecord(start, stream.ptr)
            loop_once(api, nbytes, stream, kernel)
            runtime.eventRecord(end, stream.ptr)
            stream.synchronize()
            host_us = (time.perf_counter() - started) * 1e6
            if index:  # the first loop is a warm-up
                samples["gpu_us_per_iteration"].append(runtime.eventElapsedTime(start, end) * 1e3 / LOOP)
                samples["host_us_per_iteration"].append(host_us / LOOP)
    finally:
        runtime.eventDestroy(start)
        runtime.eventDestroy(end)
    return samples


def pool_threshold(name: str):
    """The context a ``release_threshold`` axis value asks for: the pool's threshold set (``"0"``, ``"max"``), or
    nothing (``"none"``: not a pool allocation)."""
    threshold = {"max": RELEASE_THRESHOLD_MAX, "0": 0}.get(name)
    return release_threshold(threshold) if threshold is not None else nullcontext()


def _measure(config: Config, stream, kernel: MixKernel) -> Row:
    api, nbytes = config["api"], config["bytes"]
    with pool_threshold(config["release_threshold"]):
        if config["pattern"] == "single":
            samples = _single(api, nbytes, stream)
        else:
            samples = _loop(api, nbytes, stream, kernel)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    return {**config, **medians, **{f"{name}_samples": values for name, values in samples.items()},
            "iterations": LOOP if config["pattern"] == "loop" else 0, "status": "ok", "error": ""}


def run(configs: Sequence[Config], timer) -> Iterator[Row]:
    stream = cupy.cuda.Stream(non_blocking=True)
    kernel = MixKernel()
    for config in configs:
        try:
            yield _measure(config, stream, kernel)
        except cupy.cuda.runtime.CUDARuntimeError as error:
            runtime.deviceSynchronize()
            status = "skipped" if "memory" in str(error).lower() else "failed"
            yield {**config, "status": status, "error": f"{type(error).__name__}: {error}"}


def valid(config: Config) -> bool:
    if (config["release_threshold"] == "none") != (config["api"] != "cudaMallocAsync"):
        return False
    if config["api"] not in DEVICE_APIS:
        return config["pattern"] == "single" and config["bytes"] <= HOST_MAX_BYTES
    return True


def memory_needed(configs: Sequence[Config]) -> tuple[int, int]:
    device = [config["bytes"] for config in configs if config["api"] in DEVICE_APIS]
    host = [config["bytes"] for config in configs if config["api"] not in DEVICE_APIS]
    return max(device, default=0), max(host, default=0)


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Per API, threshold and pattern: the cost at the smallest and the largest size measured."""
    ok = rows[rows["status"] == "ok"]
    lines = []
    for (api, threshold, pattern), group in ok.groupby(["api", "release_threshold", "pattern"], sort=False):
        group = group.sort_values("bytes")
        column = "cycle_us" if pattern == "single" else "host_us_per_iteration"
        smallest, largest = group.iloc[0], group.iloc[-1]
        lines.append({"api": api if threshold == "none" else f"{api} (threshold {threshold})",
                      "measures": "allocate + free, host µs" if pattern == "single"
                      else "host µs per (allocate, kernel, free)",
                      "smallest": f"{smallest[column]:.1f} at {format_size(int(smallest['bytes']))}",
                      "largest": f"{largest[column]:.1f} at {format_size(int(largest['bytes']))}"})
    return pd.DataFrame(lines)


EXPERIMENT = Experiment(
    name="alloc",
    description="allocation latency: cudaMalloc vs cudaMallocAsync (pool threshold 0 / max), pinned host memory",
    axes={"api": APIS, "release_threshold": ("none", "0", "max"), "pattern": ("single", "loop"),
          "bytes": (1 << 10, 32 << 10, 1 << 20, 32 << 20, 1 << 30, 4 << 30)},
    quick_axes={"bytes": (1 << 10, 1 << 20, 32 << 20)},
    run=run,
    memory_needed=memory_needed,
    headline=headline,
    valid=valid,
)
