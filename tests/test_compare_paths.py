"""scripts/compare_paths.py on synthetic bench rows and a synthetic C++ reference: agreement, a disagreement, and
experiments missing from the results (no GPU needed)."""

import subprocess
import sys
from pathlib import Path

import pandas as pd

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "compare_paths.py"
MIB = 1 << 20

REFERENCE = [
    ("sm_h2d", 4096, 1.0, "GB/s"), ("sm_h2d", MIB, 50.0, "GB/s"), ("sm_d2h", MIB, 52.0, "GB/s"),
    ("chase_host", MIB, 800.0, "ns"), ("chase_device", 256 * MIB, 600.0, "ns"),
    ("roundtrip_h2d", 4, 10.0, "us"), ("roundtrip_d2h", 65536, 12.0, "us"),
    ("launch_kernel", 0, 2.0, "us"), ("graph_replay", 0, 0.5, "us"),
]


def bench_rows(latency_factor: float = 1.0) -> list[dict]:
    """Rows as bench writes them, agreeing with REFERENCE except where it says otherwise."""
    return [
        {"experiment": "zerocopy", "direction": "H2D", "bytes": 4096, "gbps": 2.0},  # +100%, below 1 MiB: info
        {"experiment": "zerocopy", "direction": "H2D", "bytes": MIB, "gbps": 51.0},
        {"experiment": "zerocopy", "direction": "D2H", "bytes": MIB, "gbps": 51.0},
        {"experiment": "latency", "memory": "host-mapped", "bytes": MIB, "ns_per_access": 800.0 * latency_factor},
        {"experiment": "latency", "memory": "device", "bytes": 256 * MIB, "ns_per_access": 610.0},
        {"experiment": "roundtrip", "direction": "H2D", "bytes": 4, "median": 12.0},  # +20%: within 25%
        {"experiment": "roundtrip", "direction": "D2H", "bytes": 65536, "median": 11.0},
        {"experiment": "launch", "path": "precompiled", "median": 6.0},  # 3x the C++ launch: information only
        {"experiment": "launch", "path": "graph", "median": 0.6},
        {"experiment": "latency", "memory": "device", "bytes": 256 * MIB, "ns_per_access": 9e9, "status": "error"},
    ]


def run(tmp_path: Path, rows: list[dict]) -> subprocess.CompletedProcess:
    results, reference = tmp_path / "results.parquet", tmp_path / "reference.csv"
    pd.DataFrame([{"status": "ok", **row} for row in rows]).to_parquet(results)
    table = pd.DataFrame(REFERENCE, columns=["test", "bytes", "median", "unit"]).assign(samples=21)
    table.to_csv(reference, index=False)
    return subprocess.run([sys.executable, str(SCRIPT), str(results), str(reference)], check=False,
                          capture_output=True, text=True, timeout=60)


def test_agreeing_results_pass(tmp_path):
    result = run(tmp_path, bench_rows())
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert sum(" ok ±" in line for line in lines) == 6, result.stdout  # 2 zerocopy, 2 latency, 2 roundtrip
    assert sum(line.endswith("info") for line in lines) == 3, result.stdout  # 4 KiB zerocopy, 2 launch paths
    assert "largest checked difference +1.67% (device 268435456): within" in result.stdout
    assert "all checked lines within their tolerance" in result.stdout


def test_disagreeing_latency_fails(tmp_path):
    result = run(tmp_path, bench_rows(latency_factor=1.10))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "+10.00%  OUTSIDE ±5%" in result.stdout
    assert "largest checked difference +10.00% (host-mapped 1048576): OUTSIDE" in result.stdout


def test_missing_experiments_are_reported_not_failed(tmp_path):
    result = run(tmp_path, [row for row in bench_rows() if row["experiment"] == "zerocopy"])
    assert result.returncode == 0, result.stdout + result.stderr
    for experiment in ("latency", "roundtrip", "launch"):
        assert f"{experiment:<10} not in results" in result.stdout
