"""Synthetic result rows for every experiment, shaped like a sweep's (for CPU tests of headlines, figures, claims,
compare, report and the store).

Every ``*_records()`` function returns plain dicts that pass :func:`bench.results.schema.check_row` against
:func:`bench.results.store.suite_schema` (tests/test_experiments.py checks that), so they can be written with
:func:`write`. The ``*_rows()`` functions return the same rows as a DataFrame typed the way :func:`bench.results.store.read`
types a file (every column of the suite, integers as ``Int64``, flags as ``boolean``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from pathlib import Path

import pandas as pd
import pyarrow as pa

from bench.timing import Samples

RUN_ID = "20261121T000000Z"

ENV = {
    "gpu_name": "Test GPU", "gpu_uuid": "GPU-00000000-1111-2222-3333-444444444444", "gpu_index": 0,
    "pci_bus_id": "00000000:01:00.0", "compute_capability": "9.0", "sm_count": 132,
    "device_memory_bytes": 80 << 30, "l2_cache_bytes": 62914560, "async_engine_count": 3,
    "driver_version": "580.0", "cuda_driver": "13.0", "cuda_runtime": "12.9", "pcie_gen": 5, "pcie_width": 16,
    "pcie_gen_max": 5, "pcie_width_max": 16, "sm_clock_mhz": 1980, "mem_clock_mhz": 2619, "sm_clock_max_mhz": 1980,
    "mem_clock_max_mhz": 2619, "hostname": "node-a", "python_version": "3.11.7", "cupy_version": "cupy-cuda12x 14",
    "numba_cuda_version": "numba-cuda 0.30", "numpy_version": "numpy 2.4", "bench_version": "0.1.0",
    "git_commit": "abc123def4567890",
    "host_cpus": "0-15",
    "nvlinks": 18,
}
RUN = {"run_id": RUN_ID, "wall_s": 0.01}
MONITOR = {"sm_clock_seen_mhz": 1980, "throttle_reasons": "", "throttled": False, "other_processes": 0}


def environment(**changes):
    """A :class:`bench.platform.env.Environment` with :data:`ENV`'s values (and ``changes``)."""
    from bench.platform.env import Environment

    names = {field.name for field in Environment.fields()}
    assert names == set(ENV), f"ENV is out of date with bench.platform.env.Environment: {names ^ set(ENV)}"
    return Environment.of(**{**ENV, **changes})


def _row(experiment: str, config: dict, samples: Samples | None, **columns) -> dict:
    measured = {} if samples is None else {**_columns(dataclasses.replace(samples, values=tuple(samples.values))),
                                             "samples": list(samples.values)}
    return {"experiment": experiment, **config, **measured, "status": "ok", "error": "", **columns, **RUN,
            **MONITOR, **ENV}


@functools.cache
def _columns(samples: Samples) -> dict:
    """``samples.columns()``, worked out once for the same samples (the statistics are most of a row's cost)."""
    return samples.columns()


def _spread(median: float, n: int = 5, noise: float = 0.002) -> list[float]:
    """``n`` samples around ``median`` whose median is exactly ``median``."""
    return [median * (1 + noise * (index - n // 2)) for index in range(n)]


def _failed(row: dict, unit: str, clock: str, metric: str, error: str) -> dict:
    return {**row, **Samples.missing(unit, clock, metric), "status": "failed", "error": error}


# --- bandwidth ------------------------------------------------------------------------------------------------

def bandwidth_records(failed: int = 0, sizes=tuple(1 << p for p in range(12, 31, 2))) -> list[dict]:
    rows = []
    peak = {"pinned": 55.0, "registered": 54.0, "pageable": 20.0, "device": 2000.0}
    for host_memory, directions in (("pinned", ("H2D", "D2H", "BIDIR")), ("registered", ("H2D", "D2H", "BIDIR")),
                                    ("pageable", ("H2D", "D2H", "BIDIR")), ("device", ("D2D",))):
        for direction in directions:
            for nbytes in sizes:
                copies = 2 if direction == "BIDIR" else 1
                gbps = copies * peak[host_memory] * nbytes / (nbytes + 200_000)
                median = copies * nbytes / (gbps * 1e6)
                samples = Samples(_spread(median), "ms", "gpu", "GPU time per copy", "converged", 1,
                                  host_memory != "pageable")
                bidir = {"h2d_gbps": gbps / 2, "d2h_gbps": gbps / 2} if direction == "BIDIR" else {}
                rows.append(_row("bandwidth", {"host_memory": host_memory, "direction": direction, "bytes": nbytes},
                                 samples, gbps=gbps, verified=True, **bidir))
    for index in range(failed):
        rows[index] = _failed({**rows[index], "gbps": math.nan, "verified": False}, "ms", "gpu", "GPU time per copy",
                              "data mismatch after copy")
    return rows


# --- launch ---------------------------------------------------------------------------------------------------

def launch_records() -> list[dict]:
    costs = {"dispatcher": 9.0, "precompiled": 2.5, "graph": 0.4}
    return [_row("launch", {"path": path}, Samples(_spread(cost), "us", "host", "host time per kernel launch",
                                                     "time_cap", 100), launches_per_sample=100)
            for path, cost in costs.items()]


# --- overlap --------------------------------------------------------------------------------------------------

OVERLAP_AXES = ("total_bytes", "compute_ratio", "host_memory", "allocator", "launch", "chunks_per_stream", "streams")


def overlap_records() -> list[dict]:
    """Pinned pipelines whose efficiency grows with streams and chunks; pageable ones that barely overlap."""
    rows = []
    for host_memory in ("pinned", "pageable"):
        for chunks_per_stream in (1, 4):
            for streams in (1, 2, 4, 8):
                serial, bound = 15.0, 5.25
                if host_memory == "pinned":
                    efficiency = 0.35 if streams == 1 else min(0.95, 0.35 + 0.1 * streams * chunks_per_stream / 2)
                else:
                    efficiency = 0.3 + 0.01 * streams
                makespan = serial if streams == 1 else bound / efficiency
                config = {"total_bytes": 256 << 20, "compute_ratio": 1.0, "host_memory": host_memory,
                          "allocator": "malloc", "launch": "eager", "chunks_per_stream": chunks_per_stream,
                          "streams": streams}
                samples = Samples(_spread(makespan), "ms", "gpu", "GPU time of one pipeline run (makespan)",
                                  "converged", 1, host_memory == "pinned")
                rows.append(_row(
                    "overlap", config, samples, chunks=streams * chunks_per_stream,
                    chunk_bytes=(256 << 20) // (streams * chunks_per_stream), makespan_ms=makespan,
                    speedup=serial / makespan, efficiency=bound / makespan, concurrency=0.5, serial_ms=serial,
                    bound_ms=bound, h2d_ms=5.0, kernel_ms=5.0, d2h_ms=5.0, h2d_duplex_ms=5.2, d2h_duplex_ms=5.25,
                    kernel_split_ms=4.7, kernel_rounds=200, compute_ratio_measured=1.0, host_enqueue_ms=0.2,
                    launch_host_us=2.5, verified=True))
    return rows


def overlap_timeline_records(rows) -> list[dict]:
    """A plausible per-op timeline for every row: chunk c on stream c % streams, ops back to back per stream."""
    records = rows.to_dict("records") if isinstance(rows, pd.DataFrame) else rows
    ops = []
    for row in records:
        streams, chunks = int(row["streams"]), int(row["streams"]) * int(row["chunks_per_stream"])
        for chunk in range(chunks):
            stream, start = chunk % streams, 0.3 * (chunk // streams) + 0.05 * chunk
            for kind, length in (("H2D", 0.1), ("kernel", 0.1), ("D2H", 0.1)):
                ops.append({"experiment": "overlap", "run_id": row["run_id"],
                            **{axis: _plain(row[axis]) for axis in OVERLAP_AXES},
                            "stream": stream, "chunk": chunk, "op": kind, "start_ms": start, "end_ms": start + length})
                start += length
    return ops


def _plain(value):
    return value.item() if hasattr(value, "item") else value


# --- blocking and serialization --------------------------------------------------------------------------------

def blocking_records() -> list[dict]:
    """Host verdicts shaped like the real thing: syncs and cudaFree wait, pageable copies on the spinning stream
    wait, the rest return; and serialization rows where cudaMalloc (and every call that held the host) keeps the two
    kernels apart."""
    from bench.catalogs import documented_waits
    from bench.catalogs.runtime import catalog, documented_serializes

    rows = []
    for call in catalog().values():
        for placement in call.placements:
            for spin in ("blocking", "non-blocking"):
                config = {"call": call.name, "placement": placement, "spin_stream": spin}
                common = {"api": call.api, "spin_ms": 20.0, "docs": call.docs, "source": call.source}
                waits = call.api in ("cudaDeviceSynchronize", "cudaFree") or (
                    placement == "same" and (call.api == "cudaStreamSynchronize" or "pageable" in call.name))
                host_ms = 19.9 if waits else 0.004
                verdict = "waits-for-device" if waits else "returns"
                docs_waits = documented_waits(call, placement, spin == "blocking")
                rows.append(_row(
                    "blocking", config, Samples([host_ms] * 3, "ms", "host", "host time of the call while a kernel "
                                                "runs", "converged"),
                    **common, host_ms=host_ms, stable=True,
                    matches_docs=None if docs_waits is None else docs_waits == waits, spin_left_ms=19.95,
                    idle_host_ms=0.003, verdict=verdict, verdicts=[verdict] * 3, docs_host=call.docs_host,
                    docs_waits=docs_waits))
                serializes = call.api == "cudaMalloc" or waits
                documented = documented_serializes(call, placement, spin == "blocking")
                verdict = "serializes" if serializes else "overlaps"
                makespan = 40.0 if serializes else 20.1
                rows.append(_row(
                    "serialization", config, Samples([makespan] * 2, "ms", "gpu", "makespan of the two kernels "
                                                     "(GPU clock)", "converged"),
                    **common, host_ms=host_ms, stable=True, idle_host_ms=0.003,
                    matches_docs=None if documented is None else serializes, overlap_ms=0.0 if serializes else 19.9,
                    overlap_ms_samples=[0.0 if serializes else 19.9] * 2, makespan_ms=makespan, host_waited=waits,
                    verdict=verdict, verdicts=[verdict] * 2, docs_serializes=documented))
    return rows


# --- library ------------------------------------------------------------------------------------------------

def library_records() -> list[dict]:
    """Library rows shaped like the real thing: scalar conversions and blocking copies wait on their own stream,
    device synchronizations and emptied pools wait for other streams too, the rest return."""
    from bench.catalogs import catalog, documented_waits
    from bench.experiments.library import valid

    rows = []
    for call in catalog().values():
        for placement in ("same", "other", "between"):
            config = {"call": call.name, "placement": placement}
            if not valid(config):
                continue
            device_wide = call.docs_host == "device" or "free_all_blocks" in call.name or "empty_cache" in call.name
            own = call.category == "scalar" or call.docs_host == "stream" or "pageable" in call.name
            waits = device_wide or (placement == "same" and own)
            common = {"library": call.library, "category": call.category, "stream_use": call.stream,
                      "spin_ms": 20.0, "idle_host_ms": 0.02, "first_host_ms": 0.5, "docs": call.docs,
                      "source": call.source, "docs_host": call.docs_host, "stable": True}
            if placement == "between":
                verdict = "serializes" if device_wide else "overlaps"
                makespan = 40.0 if device_wide else 20.1
                rows.append(_row("library", config, Samples([makespan] * 2, "ms", "gpu", "makespan of the two spins",
                                                            "converged"),
                                 **common, host_ms=19.9 if device_wide else 0.01, overlap_ms=0.0 if device_wide else 19.9,
                                 host_waited=device_wide, verdict=verdict, verdicts=[verdict] * 2))
                continue
            host_ms = 19.9 if waits else 0.01
            verdict = "waits-for-device" if waits else "returns"
            documented = documented_waits(call, placement)
            rows.append(_row("library", config, Samples([host_ms] * 3, "ms", "host", "host time of the call while a "
                                                        "kernel runs", "converged"),
                             **common, host_ms=host_ms, spin_left_ms=19.9, verdict=verdict, verdicts=[verdict] * 3,
                             docs_waits=documented, matches_docs=None if documented is None else documented == waits))
    return rows


# --- alloc ----------------------------------------------------------------------------------------------------

def alloc_records(async_cheaper: bool = True) -> list[dict]:
    """Single round trips for every API; loops where mallocAsync (threshold max) is cheaper than cudaMalloc (or,
    with ``async_cheaper=False``, dearer)."""
    rows = []
    pooled = 2.0 if async_cheaper else 90.0
    for nbytes in (1 << 10, 1 << 20, 32 << 20):
        for api, threshold, cost in (("cudaMalloc", "none", 50.0), ("cudaMallocAsync", "0", 30.0),
                                     ("cudaMallocAsync", "max", pooled), ("cudaHostAlloc", "none", 200.0),
                                     ("cudaHostRegister", "none", 80.0)):
            config = {"api": api, "release_threshold": threshold, "pattern": "single", "bytes": nbytes}
            total = cost * (1 + nbytes / 2**28)
            rows.append(_row("alloc", config, Samples(_spread(total), "us", "host", "host time of one allocate + "
                                                      "free round trip", "time_cap"),
                             alloc_us=total * 0.6, free_us=total * 0.4, alloc_us_samples=_spread(total * 0.6),
                             free_us_samples=_spread(total * 0.4)))
            if api.startswith("cudaMalloc"):
                config = {**config, "pattern": "loop"}
                rows.append(_row("alloc", config, Samples(_spread(cost + 20), "us", "host", "host time per "
                                                          "(allocate, kernel, free) iteration", "converged"),
                                 iterations=50, gpu_us_per_iteration=cost, gpu_us_per_iteration_samples=_spread(cost)))
    return rows


# --- graphs ---------------------------------------------------------------------------------------------------

def graphs_records(wrong_results: int = 0) -> list[dict]:
    rows = []
    for iterations in (10, 100):
        for nbytes in (1 << 20, 16 << 20):
            for launch, per_iteration in (("eager", 0.008), ("graph", 0.005)):
                config = {"case": "malloc-loop", "launch": launch, "iterations": iterations, "bytes": nbytes}
                rows.append(_row("graphs", config, Samples(_spread(iterations * per_iteration), "ms", "gpu",
                                                           "GPU time of the whole loop", "converged"),
                                 graph_equals_eager=True, wrong_results=0, verified=True,
                                 host_enqueue_ms=0.04 * iterations if launch == "eager" else 0.005))
            rows.append(_row("graphs", {"case": "stream-order", "launch": "eager", "iterations": iterations,
                                        "bytes": nbytes}, None, trials=iterations, wrong_results=wrong_results))
    rows.append(_row("graphs", {"case": "sync-in-capture", "launch": "graph", "iterations": 10, "bytes": 1 << 20},
                     None, sync_error="cudaErrorStreamCaptureUnsupported: operation not permitted when stream is "
                                      "capturing",
                     capture_state_after_sync="invalidated", end_capture_error="cudaErrorStreamCaptureInvalidated",
                     usable_after=True, verified=True))
    return rows


# --- issue 14's experiments -------------------------------------------------------------------------------------

def zerocopy_records() -> list[dict]:
    rows = []
    for direction in ("H2D", "D2H"):
        for nbytes in tuple(1 << p for p in range(12, 31, 2)):
            gbps = 50.0 * nbytes / (nbytes + 400_000)
            rows.append(_row("zerocopy", {"direction": direction, "bytes": nbytes},
                             Samples(_spread(nbytes / (gbps * 1e6)), "ms", "gpu", "GPU time per SM copy", "converged",
                                     1, True), gbps=gbps, verified=True))
    return rows


def latency_records() -> list[dict]:
    rows = []
    for memory, ns in (("host-mapped", 1200.0), ("device", 600.0)):
        for nbytes in (1 << 20, 256 << 20):
            per_access = ns if nbytes > 1 << 20 or memory == "host-mapped" else 150.0
            rows.append(_row("latency", {"memory": memory, "bytes": nbytes},
                             Samples(_spread(per_access * 4096 / 1e6), "ms", "gpu", "GPU time of 4096 dependent loads",
                                     "converged", 1, True), steps=4096, ns_per_access=per_access, verified=True))
    return rows


def roundtrip_records() -> list[dict]:
    return [_row("roundtrip", {"direction": direction, "bytes": nbytes},
                 Samples(_spread(12.0 + nbytes / 50_000), "us", "host", "host time of copy + event record + event "
                         "synchronize", "converged"), gpu_us=1.5 + nbytes / 50_000, verified=True)
            for direction in ("H2D", "D2H") for nbytes in (4, 256, 4096, 65536)]


def waitmodes_records() -> list[dict]:
    wake = {"auto": 8.0, "spin": 3.0, "yield": 5.0, "blocking-sync": 40.0}
    busy = {"auto": 1.0, "spin": 1.0, "yield": 0.9, "blocking-sync": 0.02}
    return [_row("waitmodes", {"schedule": schedule, "wait": wait},
                 Samples(_spread(wake[schedule]), "us", "host", "host return after the kernel's end", "converged"),
                 schedule_in_effect=schedule, cpu_fraction=busy[schedule], wait_ms=2.0)
            for schedule in wake for wait in ("stream", "event", "event-blocking-sync")]


def connections_records() -> list[dict]:
    rows = []
    for connections in ("1", "4", "unset", "32", "1 after init"):
        queues = {"1": 1, "4": 4, "32": 32}.get(connections, 8)
        for streams in (2, 4, 8, 16, 32):
            lengths = 2.0 if streams <= queues else -(-streams // queues) + 1.0
            rows.append(_row("connections", {"connections": connections, "workload": "spins", "streams": streams},
                             Samples(_spread(lengths * 5.0, 3), "ms", "gpu", "makespan of the spins (GPU global timer)",
                                     "max_samples"), spin_lengths=lengths, peak_kernels=min(streams, queues)))
        if connections in ("1", "unset", "32"):
            rows.append(_row("connections", {"connections": connections, "workload": "pipeline", "streams": 8},
                             Samples(_spread(4.0), "ms", "gpu", "makespan of the pipeline", "converged", 1, True),
                             efficiency=0.6 if connections == "1" else 0.9))
    return rows


def firstcall_records() -> list[dict]:
    rows = []
    for loading in ("lazy", "eager"):
        for call in ("module-load", "get-function", "first-launch", "second-launch"):
            waits = (loading == "lazy" and call == "first-launch") or (loading == "eager" and call == "module-load")
            host_ms = 19.9 if waits else 0.05
            verdict = "waits-for-device" if waits else "returns"
            rows.append(_row("firstcall", {"module_loading": loading, "call": call},
                             Samples([host_ms] * 2, "ms", "host", "host time of the step while a kernel runs on "
                                     "another stream", "converged"),
                             idle_host_ms=0.05, spin_ms=20.0, host_ms=host_ms, spin_left_ms=19.9, verdict=verdict,
                             verdicts=[verdict] * 2, stable=True))
    return rows


def batched_records() -> list[dict]:
    """Rows of the default sweep: the batch call blocks the host for 0.5 µs a copy (pageable: plus staging), the loop
    2.5 µs a copy; pinned batches arrive at up to 39 GB/s, the loop at 17 GB/s at most."""
    from bench.sweep import plan
    from bench.experiments import batched

    rows = []
    for config in plan.expand(batched.EXPERIMENT.axes, batched.EXPERIMENT.sweeps.valid):
        copies, nbytes, issue = config["copies"], config["bytes"], config["issue"]
        host_ms = copies * (0.0005 if issue == "batch" else 0.0025)
        if config["host_memory"] == "pageable":
            host_ms += copies * nbytes / 6e6
        gpu_ms = max(host_ms, copies * nbytes / 39e6 if issue == "batch" else copies * (0.0026 + nbytes / 50e6))
        samples = Samples(_spread(gpu_ms), "ms", "gpu", batched.METRIC, "time_cap", 1, False)
        rows.append(_row(
            "batched", config, samples, gbps=copies * nbytes / (gpu_ms * 1e6), host_ms=host_ms,
            host_ms_samples=_spread(host_ms), verified=True,
            entry_point="cuMemcpyBatchAsync_v2" if issue == "batch" else "cudaMemcpyAsync"))
    return rows




def hostmemory_records(failed: int = 0) -> list[dict]:
    """Copies at the same rate for both kinds; the CPU reads write-combined memory 100× slower than pinned."""
    from bench.experiments import hostmemory

    rates = {("pinned", "H2D"): 54.0, ("pinned", "D2H"): 55.0, ("write-combined", "H2D"): 55.0,
             ("write-combined", "D2H"): 54.0, ("pinned", "cpu-read"): 12.0, ("write-combined", "cpu-read"): 0.12,
             ("pinned", "cpu-write"): 9.0, ("write-combined", "cpu-write"): 11.0}
    rows = []
    for host_memory in hostmemory.HOST_KINDS:
        for operation in hostmemory.OPERATIONS:
            for nbytes in ((1 << 20), 64 * (1 << 20)):
                config = {"host_memory": host_memory, "operation": operation, "bytes": nbytes}
                if not hostmemory.lean(config):
                    continue
                copying = operation in hostmemory.COPIES
                gbps = rates[(host_memory, operation)] * nbytes / (nbytes + 100_000)
                median = nbytes / (gbps * 1e6)
                samples = Samples(_spread(median), "ms", "gpu" if copying else "host",
                                  "GPU time per copy" if copying else "host time of one pass over the buffer",
                                  "converged", 1, True if copying else None)
                rows.append(_row("hostmemory", config, samples, gbps=gbps, verified=True))
    for index in range(failed):
        rows[index] = _failed({**rows[index], "gbps": math.nan, "verified": False}, "ms", "gpu",
                                        "GPU time per copy", "data mismatch after H2D copy")
    return rows


def managed_records(skipped: bool = False) -> list[dict]:
    """First touch slowest, prefetching in between, resident fastest; optionally a size too large to allocate."""
    from bench.experiments import managed

    rows = []
    for nbytes in (64 * (1 << 20), 256 * (1 << 20)):
        for case, gbps in (("first-touch", 6.0), ("prefetch-then-kernel", 14.0), ("resident", 1400.0)):
            median = nbytes / (gbps * 1e6)
            samples = Samples(_spread(median), "ms", "gpu", managed.METRICS[case], "converged", 1,
                              case != "prefetch-then-kernel")
            extra = {"kernel_ms": median, "prefetch_ms": None, "prefetch_gbps": None}
            if case == "prefetch-then-kernel":
                kernel_ms = nbytes / (1400.0 * 1e6)
                extra = {"kernel_ms": kernel_ms, "prefetch_ms": median - kernel_ms,
                         "prefetch_gbps": nbytes / ((median - kernel_ms) * 1e6)}
            rows.append(_row("managed", {"bytes": nbytes, "case": case}, samples, gbps=gbps,
                                       free_bytes=140 << 30, verified=True, **extra))
    if skipped:
        for case in managed.CASES:
            rows.append({"experiment": "managed", "bytes": 1 << 40, "case": case, "status": "skipped",
                         "error": managed.too_large(1 << 40, 140 << 30), "free_bytes": 140 << 30, **RUN,
                         **ENV})
    return rows


def peer_records() -> list[dict]:
    """Two GPUs: every valid peer configuration, NVLink-like rates (staged copies slower), 1 µs peer latency."""
    from bench.experiments import peer
    from bench.sweep.plan import expand

    rows = []
    for config in expand({**peer.EXPERIMENT.axes, "src": (0, 1), "dst": (0, 1)}, peer.valid):
        uuids = {"src_uuid": f"GPU-src{config['src']}", "dst_uuid": f"GPU-dst{config['dst']}"}
        if config["method"] == "chase":
            rows.append(_row("peer", config, Samples(_spread(4096e-3 * 1.0), "ms", "gpu", peer.CHASE_METRIC,
                                                     "converged", 1, True), ns_per_access=1000.0, verified=True,
                             **uuids))
            continue
        copies = 2 if config["direction"] == "bidir" else 1
        gbps = (360.0 if config["peer_access"] == "enabled" else 20.0) * copies
        ms = copies * config["bytes"] / (gbps * 1e6)
        extra = {"forward_gbps": gbps / 2, "backward_gbps": gbps / 2} if copies == 2 else {}
        rows.append(_row("peer", config, Samples(_spread(ms), "ms", "gpu", "GPU time per copy", "converged", 1,
                                                 config["peer_access"] == "enabled"), gbps=gbps, verified=True,
                         **uuids, **extra))
    return rows


def hostlinks_records() -> list[dict]:
    """Two GPUs whose host links share: 55 GB/s alone, 40 GB/s each together."""
    rows = []
    for direction in ("H2D", "D2H"):
        for load, gbps in (("alone", 55.0), ("together", 40.0)):
            for device in (0, 1):
                nbytes = 256 << 20
                rows.append(_row("hostlinks", {"direction": direction, "bytes": nbytes, "load": load,
                                               "device": device},
                                 Samples(_spread(nbytes / (gbps * 1e6)), "ms", "gpu", "GPU time per copy", "converged",
                                         1, True), gbps=gbps, total_gbps=gbps * (2 if load == "together" else 1),
                                 gpus_copying=2 if load == "together" else 1, verified=True))
    return rows


def crossgpu_records() -> list[dict]:
    """cudaDeviceSynchronize and cudaFree wait for their own GPU only; the rest return."""
    from bench.experiments import crossgpu

    rows = []
    for call in crossgpu.CALL_NAMES:
        for call_gpu in (0, 1):
            for spin_gpu in (0, 1):
                for spin_stream in ("blocking", "non-blocking"):
                    config = {"call": call, "call_gpu": call_gpu, "spin_gpu": spin_gpu, "spin_stream": spin_stream}
                    where = crossgpu.placement(config)
                    waits = call in ("cudaDeviceSynchronize", "cudaFree") and where == "same-gpu"
                    host_ms = 9.5 if waits else 0.01
                    verdict = "waits-for-device" if waits else "returns"
                    docs_waits = crossgpu.cross_catalog()[call].docs_waits[where]
                    rows.append(_row("crossgpu", config, Samples([host_ms] * 3, "ms", "host", "host time of the call "
                                                                 "while a kernel runs", "converged"),
                                     placement=where, api=call.split()[0], spin_ms=10.0, host_ms=host_ms,
                                     spin_left_ms=9.9, idle_host_ms=0.01, verdict=verdict, verdicts=[verdict] * 3,
                                     stable=True, docs="", source="", docs_waits=docs_waits,
                                     matches_docs=None if docs_waits is None else docs_waits == waits))
    return rows


# --- all of them ----------------------------------------------------------------------------------------------

RECORDS = {"bandwidth": bandwidth_records, "launch": launch_records, "overlap": overlap_records,
           "blocking": lambda: [row for row in blocking_records() if row["experiment"] == "blocking"],
           "serialization": lambda: [row for row in blocking_records() if row["experiment"] == "serialization"],
           "alloc": alloc_records, "graphs": graphs_records, "library": library_records,
           "zerocopy": zerocopy_records, "latency": latency_records, "roundtrip": roundtrip_records,
           "waitmodes": waitmodes_records, "connections": connections_records, "firstcall": firstcall_records,
           "batched": batched_records, "hostmemory": hostmemory_records,
           "managed": lambda: managed_records(skipped=True), "peer": peer_records, "hostlinks": hostlinks_records,
           "crossgpu": crossgpu_records}


def records(name: str) -> list[dict]:
    """Synthetic rows of the experiment ``name``."""
    return RECORDS[name]()


def all_records() -> list[dict]:
    return [row for name in RECORDS for row in records(name)]


def failed_records(name: str) -> list[dict]:
    """Rows of ``name`` as a sweep keeps them when the experiment's process died before measuring anything: the
    configuration, status failed, the run's columns."""
    from bench.experiments import registry

    experiment = registry()[name]
    out = []
    for row in records(name):
        config = {axis: row[axis] for axis in experiment.axes}
        out.append({"experiment": name, **config, "status": "failed", "error": "not measured: the process ended",
                    **RUN, **ENV})
    return out


def sampled(rows: list[dict], where=lambda row: True, n: int = 11, noise: float = 0.002) -> list[dict]:
    """The rows, those ``where(row)`` picks with ``n`` samples spread by ``noise`` around the same median (11: enough
    to bound a median at 95%, as compare needs to call a change beyond noise; the rows here keep 5, which bound
    none)."""
    def resampled(row):
        values = _spread(row["median"], n, noise)
        return {**row, "samples": values, "n_samples": n, "min": min(values), "max": max(values)}

    return [resampled(row) if where(row) else row for row in rows]


def tagged(rows: list[dict], **changes) -> list[dict]:
    """The rows with some columns changed: ``tagged(rows, run_id="r2", hostname="node-b")``."""
    return [{**row, **changes} for row in rows]


FLEET = tuple({"hostname": f"node-{host}", "gpu_index": index, "gpu_name": "NVIDIA H200",
               "gpu_uuid": f"GPU-{host}{index}{host}{index}{host}{index}{host}{index}-0000-0000-0000-000000000000",
               "pci_bus_id": f"00000000:{0x18 + 0x20 * index:02X}:00.0"}
              for host in ("a", "b") for index in (0, 1))  # two hosts × two H200s: GPU-a0a0a0a0-..., GPU-b1b1b1b1-...


def on_gpus(rows: list[dict], gpus=FLEET) -> list[dict]:
    """``rows`` measured on each of ``gpus`` (dicts of environment columns), as a ``--devices all`` sweep keeps
    them: the same configurations once per GPU."""
    return [row for gpu in gpus for row in tagged(rows, **gpu)]


def write_fleet(directory: Path, rows: list[dict], gpus=FLEET, run_id: str = RUN_ID) -> list[Path]:
    """``rows`` measured on every GPU of ``gpus``, one results file per host in ``directory/<host>/``, as one
    ``sweep --devices all --out directory/<host>/`` per node writes them (every host's run the same run id, as an
    array's nodes that start in the same second get)."""
    hosts = dict.fromkeys(gpu["hostname"] for gpu in gpus)
    return [write(Path(directory) / host / f"{run_id}-NVIDIA-H200.parquet",
                  on_gpus(tagged(rows, run_id=run_id), [gpu for gpu in gpus if gpu["hostname"] == host]), run_id)
            for host in hosts]


def suite(extra=()) -> pa.Schema:
    """The suite schema a sweep writes: every registered experiment's columns, and ``extra`` experiments' (a test's
    own)."""
    from bench.results import store
    from bench.experiments import registry

    return store.suite_schema({**registry(), **{experiment.name: experiment for experiment in extra}})


def views() -> dict:
    """Every experiment's view, in the sweep's order, as the command line hands them to :mod:`bench.analysis.plots`."""
    from bench.experiments import registry
    from bench.views import in_order

    return in_order(registry())


def frame(rows: list[dict], extra=()) -> pd.DataFrame:
    """Rows as :func:`bench.results.store.read` returns them: every suite column, typed as :data:`bench.results.store.PANDAS_TYPES`."""
    from bench.results import store

    schema = suite(extra)
    table = pa.Table.from_pylist(rows, schema=schema)
    return store.typed(table.to_pandas(types_mapper=store.PANDAS_TYPES.get), schema)


def write(path: Path, rows: list[dict], run_id: str = RUN_ID, extra=(), **metadata) -> Path:
    """Write rows as a results file (schema version 2); ``run_id`` goes into the file's metadata (the rows keep
    their own, see :func:`tagged`)."""
    from bench.results import store

    store.write(Path(path), rows, suite(extra), {"run_id": run_id, **metadata})
    return Path(path)


# The frames older tests know by name.

def bandwidth_rows(failed: int = 0) -> pd.DataFrame:
    return frame(bandwidth_records(failed))


def launch_rows() -> pd.DataFrame:
    return frame(launch_records())


def overlap_rows() -> pd.DataFrame:
    return frame(overlap_records())


def overlap_timeline(rows: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(overlap_timeline_records(rows))


def blocking_rows() -> pd.DataFrame:
    """blocking and serialization rows."""
    return frame(blocking_records())


def alloc_and_graphs_rows() -> pd.DataFrame:
    return frame(alloc_records() + graphs_records())
