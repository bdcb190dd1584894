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
