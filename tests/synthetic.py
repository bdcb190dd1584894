"""A synthetic bandwidth results frame, shaped like the real thing (for CPU tests of plots and summaries)."""

import pandas as pd

ENV = {"gpu_name": "Test GPU", "driver_version": "580.0", "cuda_runtime": "12.9", "pcie_gen": 5, "pcie_width": 16,
       "pcie_gen_max": 5, "pcie_width_max": 16, "l2_cache_bytes": 62914560, "run_id": "20261121T000000Z", "git_commit": "abc123"}


def bandwidth_rows(failed: int = 0) -> pd.DataFrame:
    rows = []
    peak = {"pinned": 55.0, "registered": 54.0, "pageable": 20.0, "device": 2000.0}
    for host_memory, directions in (("pinned", ("H2D", "D2H", "BIDIR")), ("registered", ("H2D", "D2H", "BIDIR")),
                                    ("pageable", ("H2D", "D2H", "BIDIR")), ("device", ("D2D",))):
        for direction in directions:
            for power in range(12, 31):
                nbytes = 1 << power
                copies = 2 if direction == "BIDIR" else 1
                gbps = copies * peak[host_memory] * nbytes / (nbytes + 200_000)
                median = copies * nbytes / (gbps * 1e6)
                rows.append({"experiment": "bandwidth", "host_memory": host_memory, "direction": direction,
                             "bytes": nbytes, "samples_ms": [median] * 3, "median_ms": median,
                             "min_ms": median * 0.98, "max_ms": median * 1.03, "gbps": gbps, "status": "ok",
                             "verified": True, "error": "", **ENV})
    for row in rows[:failed]:
        row.update(status="failed", gbps=float("nan"), error="data mismatch after copy")
    return pd.DataFrame(rows)


def overlap_rows() -> pd.DataFrame:
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
                makespan = bound / efficiency
                if streams == 1:
                    makespan = serial
                rows.append({"experiment": "overlap", "total_bytes": 256 << 20, "compute_ratio": 1.0,
                             "host_memory": host_memory, "allocator": "malloc", "launch": "eager",
                             "chunks_per_stream": chunks_per_stream, "streams": streams, "makespan_ms": makespan,
                             "bound_ms": bound, "serial_ms": serial, "speedup": serial / makespan,
                             "efficiency": bound / makespan, "concurrency": 0.5, "status": "ok", **ENV})
    return pd.DataFrame(rows)


def overlap_timeline(rows: pd.DataFrame) -> pd.DataFrame:
    """A plausible per-op timeline for every row: chunk c on stream c % streams, ops back to back per stream."""
    keys = ["total_bytes", "compute_ratio", "host_memory", "allocator", "launch", "chunks_per_stream", "streams"]
    ops = []
    for _, row in rows.iterrows():
        chunks = row["streams"] * row["chunks_per_stream"]
        for chunk in range(chunks):
            stream, start = chunk % row["streams"], 0.3 * (chunk // row["streams"]) + 0.05 * chunk
            for kind, length in (("H2D", 0.1), ("kernel", 0.1), ("D2H", 0.1)):
                ops.append({**row[keys].to_dict(), "stream": stream, "chunk": chunk, "op": kind,
                            "start_ms": start, "end_ms": start + length})
                start += length
    return pd.DataFrame(ops)


def blocking_rows() -> pd.DataFrame:
    """Host verdicts shaped like the real thing: syncs wait, pageable D2H on the spinning stream waits, the rest
    return; plus a serialization frame where cudaMalloc serializes the kernels."""
    from bench.calls import catalog

    rows = []
    for call in catalog().values():
        for placement in call.placements:
            for spin in ("blocking", "non-blocking"):
                waits = call.api in ("cudaDeviceSynchronize", "cudaFree") or (
                    placement == "same" and (call.api == "cudaStreamSynchronize" or "pageable" in call.name))
                host_ms = 19.9 if waits else 0.004
                rows.append({"experiment": "blocking", "call": call.name, "api": call.api, "placement": placement,
                             "spin_stream": spin, "host_ms": host_ms, "verdict": "waits-for-device" if waits
                             else "returns", "matches_docs": "false" if call.api == "cudaFree" else "",
                             "status": "ok", "error": "", **ENV})
                serializes = call.api == "cudaMalloc"
                rows.append({"experiment": "serialization", "call": call.name, "api": call.api,
                             "placement": placement, "spin_stream": spin, "host_ms": host_ms,
                             "host_waited": waits, "overlap_ms": 0.0 if serializes or waits else 19.9,
                             "verdict": "serializes" if serializes or waits else "overlaps",
                             "matches_docs": "true" if serializes else "", "status": "ok", "error": "", **ENV})
    return pd.DataFrame(rows)


def alloc_and_graphs_rows() -> pd.DataFrame:
    rows = []
    for nbytes in (1 << 10, 1 << 20, 1 << 30):
        for api, threshold, cost in (("cudaMalloc", "none", 50.0), ("cudaMallocAsync", "0", 30.0),
                                     ("cudaMallocAsync", "max", 2.0), ("cudaHostAlloc", "none", 200.0),
                                     ("cudaHostRegister", "none", 80.0)):
            rows.append({"experiment": "alloc", "api": api, "release_threshold": threshold, "pattern": "single",
                         "bytes": nbytes, "cycle_us": cost * (1 + nbytes / 2**28), "status": "ok", "error": "", **ENV})
            if api.startswith("cudaMalloc"):
                rows.append({"experiment": "alloc", "api": api, "release_threshold": threshold, "pattern": "loop",
                             "bytes": nbytes, "host_us_per_iteration": cost + 20, "gpu_us_per_iteration": cost,
                             "status": "ok", "error": "", **ENV})
    rows.append({"experiment": "graphs", "case": "stream-order", "iterations": 100, "bytes": 1 << 20, "trials": 100,
                 "wrong_results": 0, "status": "ok", "error": "", **ENV})
    rows.append({"experiment": "graphs", "case": "sync-in-capture", "iterations": 10, "bytes": 1 << 20,
                 "sync_error": "cudaErrorStreamCaptureUnsupported: operation not permitted when stream is capturing",
                 "capture_state_after_sync": "invalidated", "end_capture_error": "cudaErrorStreamCaptureInvalidated",
                 "status": "ok", "error": "", **ENV})
    return pd.DataFrame(rows)
