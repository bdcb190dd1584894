"""compare: every experiment, noise-aware verdicts, outcome changes, GPU pairing, the driver-update diff (on
synthetic rows and on the committed H200 results) and what the terminal shows."""

import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

import synthetic
from bench import compare, store
from bench.experiments import registry
from paths import with_path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results" / "_superseded"  # the last version 1 runs (converted on read)
COMMITTED = sorted(RESULTS.glob("20261121T14[45]*Z-NVIDIA-H200.parquet"))  # version 1 files, converted on read
RERUN = (RESULTS / "20261121T145029Z-NVIDIA-H200.parquet", RESULTS / "20261121T145118Z-NVIDIA-H200.parquet")
GPU_B = {"gpu_uuid": "GPU-bbbbbbbb-0000-0000-0000-000000000000", "hostname": "node-b"}
GPU_C = {"gpu_uuid": "GPU-cccccccc-0000-0000-0000-000000000000", "hostname": "node-c"}


def bench(*args, cwd, columns=100):
    env = {**os.environ, "PYTHONPATH": with_path(str(ROOT / "src")), "COLUMNS": str(columns)}
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def changed(rows: list[dict], where, **columns) -> list[dict]:
    """The rows, with ``columns`` replaced in those ``where(row)`` picks."""
    return [{**row, **columns} if where(row) else row for row in rows]


def slower(rows: list[dict], where, factor: float) -> list[dict]:
    """The rows, those ``where(row)`` picks taking ``factor`` times as long (and copying at 1/factor the rate)."""
    def scaled(row):
        rate = {"gbps": row["gbps"] / factor} if "gbps" in row else {}
        return {**row, "samples": [value * factor for value in row["samples"]], "median": row["median"] * factor,
                "min": row["min"] * factor, "max": row["max"] * factor, **rate}

    return [scaled(row) if where(row) else row for row in rows]


def driver_update() -> tuple[list[dict], list[dict]]:
    """Every experiment before and after a driver update: cudaFree stops waiting for running kernels, cudaMalloc
    stops serializing them, and pinned 16 MiB uploads get 25% slower."""
    old = synthetic.all_records()
    new = synthetic.tagged(old, run_id="20261122T000000Z", driver_version="590.0", cuda_runtime="13.0")
    new = changed(new, lambda row: row["experiment"] == "blocking" and row["call"] == "cudaFree",
                  verdict="returns", verdicts=["returns"] * 3, host_ms=0.004, samples=[0.004] * 3, median=0.004,
                  min=0.004, max=0.004, matches_docs=None)
    new = changed(new, lambda row: row["experiment"] == "serialization" and row["call"] == "cudaMalloc",
                  verdict="overlaps", verdicts=["overlaps"] * 2, overlap_ms=19.9, samples=[20.1] * 2, median=20.1,
                  min=20.1, max=20.1)
    new = slower(new, lambda row: row["experiment"] == "bandwidth" and row["host_memory"] == "pinned"
                 and row["direction"] == "H2D" and row["bytes"] == 16 << 20, 1.25)
    return old, new


@pytest.mark.parametrize("old, new, expected", [
    ([1.0, 1.01, 0.99, 1.0], [1.002, 1.0, 1.01, 0.995], "same"),
    ([1.0, 1.01, 0.99, 1.0], [1.2, 1.21, 1.19, 1.2], "slower"),
    ([1.0, 1.01, 0.99, 1.0], [0.8, 0.81, 0.79, 0.8], "faster"),
    ([1.0, 1.0], [2.0, 2.0], "unclear"),  # too few samples
    ([1.0, 1.0], [1.0, 1.0], "same"),  # equal medians are the same however few the samples
    ([1.0, 0.5, 1.6, 1.0, 0.7, 1.3], [1.1, 0.6, 1.7, 1.1, 0.8, 1.4], "same"),  # within the noise
    ([1.0, 1.0, 1.0, 1.0, 2.0], [1.1, 1.1, 1.1, 1.1, 0.5], "unclear"),  # each median inside the other's range
    ([0.0, 0.0, 0.0], [0.1, 0.1, 0.1], "unclear"),  # nothing to take a ratio of
    ([], [1.0, 1.0, 1.0], "unclear"),
])
def test_verdicts(old, new, expected):
    assert compare.verdict(old, new) == expected


def test_every_configuration_of_every_experiment_is_the_same_as_itself(tmp_path):
    rows = synthetic.all_records()
    path = synthetic.write(tmp_path / "r.parquet", rows)
    result = compare.compare(store.read(path, synthetic.suite()), store.read(path, synthetic.suite()), registry())
    assert result.counts() == {"same": len(rows)} and not result.warnings and not result.headlines
    assert set(result.table["experiment"]) == set(registry())  # every experiment
    run = bench("compare", "r.parquet", "r.parquet", "--fail-above", "1", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert f"{len(rows)} same (not listed; --all lists every configuration)" in run.stdout
    assert "nothing beyond noise" in run.stdout


@pytest.mark.parametrize("path", COMMITTED, ids=lambda path: path.name[:16])
def test_each_committed_version_1_file_is_the_same_as_itself(path):
    rows = store.read(path, synthetic.suite())
    result = compare.compare(rows, rows, registry())
    assert len(result.table) == len(rows) and result.counts() == {"same": len(rows)}


def test_the_committed_results_directory_is_the_same_as_itself(tmp_path):
    from bench import analysis

    run = bench("compare", str(RESULTS), str(RESULTS), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    shown = len(analysis.newest(store.read_any(RESULTS, synthetic.suite()), registry()))
    assert run.stdout == (f"What changed\n  nothing beyond noise\n{shown} same (not listed; --all lists every "
                          "configuration)\n")
    assert not list(tmp_path.iterdir())


def test_a_rerun_at_the_same_commit_changed_five_serialization_rows():
    result = compare.compare(store.read(RERUN[0], synthetic.suite()), store.read(RERUN[1], synthetic.suite()), registry())
    moved = result.table[result.table["verdict"] == "changed"]
    assert list(moved["experiment"]) == ["serialization"] * 5
    assert set(moved["change"]) == {"partial → overlaps"}
    assert all(line.startswith("cudaMemcpyAsync H2D pageable 64 MiB placement=") for line in moved["configuration"])
    assert len(result.table) == 304 and result.warnings == ["only in the old results, not compared: alloc, graphs"]
    assert result.headlines[:5] == [f"serialization {line}: partial → overlaps" for line in moved["configuration"]]
    blocking = result.table[result.table["experiment"] == "blocking"]
    assert len(blocking) == 152 and not (blocking["verdict"] == "changed").any()  # the same host verdict, all 152


def test_the_driver_update_diff_names_calls_copies_and_claims(tmp_path):
    old, new = driver_update()
    result = compare.compare(synthetic.frame(old), synthetic.frame(new), registry())
    assert result.counts() == {"changed": 4, "slower": 1, "same": len(old) - 5}
    assert result.warnings == ["driver_version differs: 580.0 → 590.0", "cuda_runtime differs: 12.9 → 13.0"]
    before = 55.0 * (16 << 20) / ((16 << 20) + 200_000)
    assert result.headlines == [
        "blocking cudaFree placement=none spin_stream=blocking: waits-for-device → returns",
        "blocking cudaFree placement=none spin_stream=non-blocking: waits-for-device → returns",
        "serialization cudaMalloc placement=none spin_stream=blocking: serializes → overlaps",
        "serialization cudaMalloc placement=none spin_stream=non-blocking: serializes → overlaps",
        f"bandwidth pinned H2D 16 MiB: slower, {compare.number(before)} → {compare.number(before / 1.25)} GB/s "
        "(time +25.0%)",
        'claim "cudaMalloc is synchronous": partly → busted (host: returned during a running kernel (0.004 ms); '
        "kernels on two streams around it: 0 of 2 serialized)",
        'claim "cudaFree waits for running kernels": holds → busted (returned while a kernel ran in all 2 '
        "placements × streams; host 0.004 ms)",
    ]
    assert len(result.slower_than(20)) == 1 and len(result.slower_than(30)) == 0
    synthetic.write(tmp_path / "old.parquet", old)
    synthetic.write(tmp_path / "new.parquet", new)
    assert bench("compare", "old.parquet", "new.parquet", "--fail-above", "30", cwd=tmp_path).returncode == 0
    gate = bench("compare", "old.parquet", "new.parquet", "--fail-above", "20", cwd=tmp_path)
    assert gate.returncode == 1 and "1 configurations slower by more than 20%: failing" in gate.stdout


def test_the_terminal_shows_warnings_headlines_then_what_is_not_the_same_in_100_columns(tmp_path):
    old, new = driver_update()
    synthetic.write(tmp_path / "old.parquet", old)
    synthetic.write(tmp_path / "new.parquet", new)
    run = bench("compare", "old.parquet", "new.parquet", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert max(map(len, lines)) <= 100 and lines[0] == "What changed"
    assert run.stderr.splitlines() == ["bench: warning: driver_version differs: 580.0 → 590.0",
                                       "bench: warning: cuda_runtime differs: 12.9 → 13.0"]  # stdout is the answer
    order = [run.stdout.index(text) for text in ("What changed", "bandwidth: 1 of", "blocking: 2 of",
                                                  "serialization: 2 of")]
    assert order == sorted(order)
    assert "waits-for-device → returns" in run.stdout and "slower +25.0%" in run.stdout
    assert "GPU" not in run.stdout  # one GPU on each side: no GPU column
    assert lines[-1] == f"4 changed, 1 slower, {len(old) - 5} same (not listed; --all lists every configuration)"
    listed = bench("compare", "old.parquet", "new.parquet", "--all", cwd=tmp_path)
    assert f"bandwidth: {sum(row['experiment'] == 'bandwidth' for row in old)} of" in listed.stdout
    assert "cudaGetLastError" in listed.stdout and "cudaGetLastError" not in run.stdout
    assert listed.stdout.splitlines()[-1] == f"4 changed, 1 slower, {len(old) - 5} same"
    assert max(map(len, listed.stdout.splitlines())) <= 100


def test_gpus_pair_by_uuid_and_a_lone_gpu_with_a_lone_gpu(tmp_path):
    catalog_rows = [row for row in synthetic.all_records() if row["experiment"] in ("blocking", "serialization")]
    copies = [row for row in synthetic.all_records() if row["experiment"] == "bandwidth"]
    synthetic.write(tmp_path / "fleet" / "a.parquet", catalog_rows)
    synthetic.write(tmp_path / "fleet" / "b.parquet", synthetic.tagged(copies, **GPU_B))
    synthetic.write(tmp_path / "new.parquet", synthetic.tagged(synthetic.all_records(), **GPU_C))
    result = compare.compare(store.read_any(tmp_path / "fleet", synthetic.suite()), store.read(tmp_path / "new.parquet", synthetic.suite()), registry())
    assert result.several_gpus and result.counts() == {"same": len(catalog_rows) + len(copies)}
    labels = result.table.groupby("experiment")["gpu"].first().to_dict()
    assert labels == {"bandwidth": "Test GPU bbbbbbbb on node-b → cccccccc on node-c",
                      "blocking": "Test GPU 00000000 on node-a → cccccccc on node-c",
                      "serialization": "Test GPU 00000000 on node-a → cccccccc on node-c"}
    others = [name for name in registry() if name not in ("bandwidth", "blocking", "serialization")]
    assert f"only in the new results, not compared: {', '.join(others)}" in result.warnings
    assert sum("different GPUs: old Test GPU" in warning for warning in result.warnings) == 2
    run = bench("compare", "fleet", "new.parquet", "--all", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "GPU" in run.stdout.split("bandwidth: ")[1].splitlines()[2]  # the table's header row
    assert max(map(len, run.stdout.splitlines())) <= 100


def test_fleets_pair_by_uuid_and_gpu_selects_one(tmp_path):
    rows = [row for row in synthetic.all_records() if row["experiment"] == "launch"]
    gpu_d = {"gpu_uuid": "GPU-dddddddd-0000-0000-0000-000000000000", "hostname": "node-d"}
    gpu_e = {"gpu_uuid": "GPU-eeeeeeee-0000-0000-0000-000000000000", "hostname": "node-e"}
    old = rows + synthetic.tagged(rows, **GPU_B)
    result = compare.compare(synthetic.frame(old), synthetic.frame(rows + synthetic.tagged(rows, **GPU_C)), registry())
    assert list(result.table["gpu"]) == (["Test GPU 00000000 on node-a"] * 3
                                         + ["Test GPU bbbbbbbb on node-b → cccccccc on node-c"] * 3)
    result = compare.compare(synthetic.frame(old + synthetic.tagged(rows, **gpu_d)),
                             synthetic.frame(rows + synthetic.tagged(rows, **GPU_C) + synthetic.tagged(rows, **gpu_e)), registry())
    # two GPUs left on each side: no guessing
    assert list(result.table["gpu"]) == ["Test GPU 00000000 on node-a"] * 3
    assert sum("is only in the" in warning for warning in result.warnings) == 4
    result = compare.compare(synthetic.frame(old), synthetic.frame(old), registry(), gpu="node-b")
    assert list(result.table["gpu"]) == ["Test GPU bbbbbbbb"] * 3 and not result.several_gpus
    with pytest.raises(compare.UsageError, match="new results: --gpu node-b: no such GPU"):
        compare.compare(synthetic.frame(old), synthetic.frame(rows), registry(), gpu="node-b")


def test_the_newest_measurement_of_each_configuration_is_compared(tmp_path):
    rows = [row for row in synthetic.all_records() if row["experiment"] == "launch"]
    synthetic.write(tmp_path / "old" / "1.parquet", rows)
    synthetic.write(tmp_path / "old" / "2.parquet", slower(synthetic.tagged(rows, run_id="20261122T000000Z"),
                                                          lambda row: row["path"] == "graph", 2.0))
    result = compare.compare(store.read_any(tmp_path / "old", synthetic.suite()), synthetic.frame(rows), registry())
    assert list(result.table["verdict"]) == ["same", "same", "faster"]


def test_a_version_1_directory_against_a_version_2_file(tmp_path):
    (tmp_path / "v1").mkdir()
    (tmp_path / "v1" / RERUN[0].name).write_bytes(RERUN[0].read_bytes())
    rows = store.read(RERUN[0], synthetic.suite())
    schema = synthetic.suite()
    names = [name for name in schema.names if name in rows]
    records = pa.Table.from_pandas(rows[names], schema=pa.schema([schema.field(name) for name in names]),
                                   preserve_index=False).to_pylist()
    synthetic.write(tmp_path / "v2.parquet", records)
    result = compare.compare(store.read_any(tmp_path / "v1", synthetic.suite()), store.read(tmp_path / "v2.parquet", synthetic.suite()), registry())
    assert result.counts() == {"same": len(rows)}
    run = bench("compare", "v1", "v2.parquet", cwd=tmp_path)
    assert run.returncode == 0 and f"{len(rows)} same" in run.stdout, run.stderr


def test_numbers_read_as_people_write_them():
    assert [compare.number(value) for value in (16.0, 0.004504, 54.33333, 12345.6, math.nan)] == [
        "16", "0.004504", "54.33", "12346", ""]
    assert compare.compare(pd.DataFrame(), synthetic.frame(synthetic.launch_records()), registry()).table.empty


def test_json_for_ci_and_markdown_for_a_pull_request(tmp_path):
    import json

    old, new = driver_update()
    synthetic.write(tmp_path / "old.parquet", old)
    synthetic.write(tmp_path / "new.parquet", new)
    run = bench("compare", "old.parquet", "new.parquet", "--format", "json", "--fail-above", "20", cwd=tmp_path)
    assert run.returncode == 1 and run.stderr.count("bench: warning: ") == 2, run.stderr
    document = json.loads(run.stdout)  # stdout is the document alone
    assert document["counts"] == {"changed": 4, "slower": 1, "same": len(old) - 5}
    assert document["fail_above"] == {"percent": 20, "failing": 1}
    assert document["warnings"] == ["driver_version differs: 580.0 → 590.0", "cuda_runtime differs: 12.9 → 13.0"]
    slower = [line for line in document["configurations"] if line["verdict"] == "slower"]
    assert len(document["configurations"]) == 5 and slower[0]["configuration"] == "pinned H2D 16 MiB"
    assert slower[0]["ratio"] == pytest.approx(1.25) and slower[0]["unit"] == "ms"
    changed_line = next(line for line in document["configurations"] if line["verdict"] == "changed")
    assert changed_line["ratio"] is None or isinstance(changed_line["ratio"], float)  # never NaN: JSON has none
    listed = json.loads(bench("compare", "old.parquet", "new.parquet", "--format", "json", "--all",
                              cwd=tmp_path).stdout)
    assert len(listed["configurations"]) == len(old)
    run = bench("compare", "old.parquet", "new.parquet", "--format", "markdown", cwd=tmp_path)
    assert run.returncode == 0 and run.stdout.startswith("## What changed\n\n- blocking cudaFree"), run.stdout[:300]
    assert "### bandwidth: 1 of" in run.stdout and "| configuration | old ms | new ms | verdict |" in run.stdout
    assert "| --- | ---: | ---: | --- |" in run.stdout and "| pinned H2D 16 MiB | " in run.stdout
    assert run.stdout.rstrip().endswith(f"4 changed, 1 slower, {len(old) - 5} same (not listed; --all lists every "
                                        "configuration)")
    assert "warning" not in run.stdout and not {"old.parquet", "new.parquet"} ^ {p.name for p in tmp_path.iterdir()}
