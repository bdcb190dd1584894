"""compare: every experiment, verdicts that know the noise (95% intervals of medians, the accuracy floor, the
machine-to-machine spread of a GPU kind), outcome changes, GPU pairing, the driver-update diff (on synthetic rows and
on the committed results) and what the terminal shows."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import synthetic
from bench.analysis import compare, noise, numbers, selection
from bench.results import store
from bench.experiments import registry
from bench.timing import median, median_interval

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results" / "_superseded"  # the last version 1 runs (converted on read)
COMMITTED = sorted(RESULTS.glob("20261121T14[45]*Z-NVIDIA-H200.parquet"))  # version 1 files, converted on read
RERUN = (RESULTS / "20261121T145029Z-NVIDIA-H200.parquet", RESULTS / "20261121T145118Z-NVIDIA-H200.parquet")
GPU_B = {"gpu_uuid": "GPU-bbbbbbbb-0000-0000-0000-000000000000", "hostname": "node-b"}
GPU_C = {"gpu_uuid": "GPU-cccccccc-0000-0000-0000-000000000000", "hostname": "node-c"}


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
    old = synthetic.sampled(synthetic.all_records(), lambda row: row["experiment"] == "bandwidth")
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


def plain(lines: list[str]) -> bool:
    """Output that is not a terminal: lines, none wrapped (a table row is one line) nor padded at its end."""
    return bool(lines) and all(line == line.rstrip() and "\x1b" not in line for line in lines)


SIX = [1.0, 1.01, 0.99, 1.0, 1.005, 0.995]  # the fewest samples whose median a 95% interval bounds


@pytest.mark.parametrize("old, new, expected", [
    (SIX, [value * 1.009 for value in SIX], "same"),  # within 1%
    (SIX, [value * 1.2 for value in SIX], "slower"),
    (SIX, [value * 0.8 for value in SIX], "faster"),
    ([1.0, 1.01, 0.99, 1.0, 1.0], [1.2, 1.21, 1.19, 1.2, 1.2], "unclear"),  # 5 samples bound no median at 95%
    ([1.0, 1.0], [2.0, 2.0], "unclear"),
    ([1.0, 1.0], [1.0, 1.0], "same"),  # equal medians are the same however few the samples
    ([1.0, 1.0], [1.005, 1.005], "same"),  # and so are medians within 1%
    ([1.0, 0.5, 1.6, 1.0, 0.7, 1.3], [1.1, 0.6, 1.7, 1.1, 0.8, 1.4], "same"),  # +10% within the noise
    ([0.0, 0.0, 0.0], [0.1, 0.1, 0.1], "unclear"),  # nothing to take a ratio of
    ([], [1.0, 1.0, 1.0], "unclear"),
])
def test_verdicts(old, new, expected):
    assert compare.verdict(old, new) == expected


def test_a_change_is_flagged_only_beyond_both_rows_95_percent_intervals():
    noisy = [1 + 0.03 * ((index * 7) % 20 - 10) / 10 for index in range(20)]  # 20 samples within ±3%
    assert median_interval(noisy) == pytest.approx((0.985, 1.012))  # x(6) and x(15): order statistics, 95.9%
    assert compare.verdict(noisy, [value * 1.02 for value in noisy]) == "same"  # +2%: the intervals overlap
    assert compare.verdict(noisy, [value * 1.06 for value in noisy]) == "slower"  # +6%: they do not
    assert compare.verdict([value * 1.06 for value in noisy], noisy) == "faster"
    tight = [1 + 0.001 * (index % 5) for index in range(20)]
    assert compare.verdict(tight, [value * 1.02 for value in tight]) == "slower"  # +2% beyond tight samples


def test_the_interval_of_a_median_comes_from_order_statistics():
    assert median_interval(range(5)) is None  # 5 samples: [min, max] covers 93.8%
    assert median_interval([3, 1, 2, 6, 5, 4]) == (1, 6)  # 96.9%
    assert median_interval(range(1, 11)) == (2, 9)  # x(3), x(8) would cover 89%
    assert median_interval(range(1, 101)) == (40, 61)  # 96.5%; x(41), x(60) 94.3%
    assert median_interval(range(1, 101), level=0.5) == (47, 54)


def test_a_median_of_float_samples_is_numpys():
    """compare and the spread judge by :func:`bench.timing.median`: numpy's median, NaN where a sample is NaN."""
    rng = np.random.default_rng(7)
    for size in (1, 2, 3, 10, 11, 100, 101):
        for scale in (1e-3, 1.0, 1e6):
            samples = list(rng.lognormal(0.0, 2.0, size) * scale)
            assert median(samples) == float(np.median(samples)), samples
    assert median([0.1, 0.2]) == float(np.median([0.1, 0.2])) == 0.15000000000000002  # (a + b) / 2, as numpy has it
    assert math.isnan(median([1.0, math.nan, 2.0]))


def _floor_rows(old_met: bool | None, new_met: bool | None, samples: list[float]) -> tuple[list[dict], list[dict]]:
    """One bandwidth row, then +30% slower, with ``samples`` (scaled) and whether each side met its floor (None: a
    file from before floor_met, judged from its samples)."""
    (row,) = [row for row in synthetic.records("bandwidth") if row["direction"] == "H2D" and row["bytes"] == 1 << 20
              and row["host_memory"] == "pinned"]
    old = {**row, "samples": samples, "median": float(np.median(samples)), "floor_met": old_met}
    return [old], slower([{**old, "floor_met": new_met}], lambda row: True, 1.3)


def test_a_row_below_its_floor_is_unclear_never_flagged():
    spread = [1.0, 1.04, 0.96, 1.02, 0.98, 1.0, 1.03, 0.97]  # 8 samples, a 95% interval of ±4%
    tight = [1.0, 1.001, 0.999, 1.0, 1.0005, 0.9995, 1.0, 1.0]  # 8 samples within ±0.1%
    floor = registry()["bandwidth"].accuracy.floor  # 10 samples, or a 95% interval within 1%
    said = f"8 samples; its floor: {floor}"
    judged = {}
    for name, met, samples in (("at the floor", (True, True), spread), ("new below", (True, False), spread),
                               ("old below", (False, True), spread), ("unrecorded, pinned", (None, None), tight),
                               ("unrecorded, loose", (None, None), spread)):
        old, new = _floor_rows(*met, samples)
        (line,) = compare.compare(synthetic.frame(old), synthetic.frame(new), registry()).table.to_dict("records")
        judged[name] = line["verdict"], line["note"]
    assert judged == {
        "at the floor": ("slower", ""),
        "new below": ("unclear", f"below the floor: new ({said})"),
        "old below": ("unclear", f"below the floor: old ({said})"),
        "unrecorded, pinned": ("slower", ""),  # the interval is within 1%: at the floor
        "unrecorded, loose": ("unclear", f"below the floor: old ({said}), new ({said})"),
    }
    assert noise.below_floor({}, spread, floor) and not noise.below_floor({}, tight, floor)
    assert not noise.below_floor({}, spread + spread, floor)  # 16 samples: the floor's count
    assert noise.below_floor({"floor_met": False}, spread + spread, floor)  # as the row recorded it
    assert not noise.below_floor({"floor_met": True}, spread, floor)
    old, new = _floor_rows(True, False, spread)
    new = [{**new[0], "samples": [value * 1.005 for value in spread]}]
    (line,) = compare.compare(synthetic.frame(old), synthetic.frame(new), registry()).table.to_dict("records")
    assert (line["verdict"], line["note"]) == ("same", "")  # below its floor, but its median did not move


def test_no_line_reports_an_unclear_change_of_nothing():
    """Blocking rows keep 3 samples (host times of the call), library rows 2; paced rows fall below the floor:
    where their medians agree within 1% they are the same, and only a change beyond that is unclear."""
    old = synthetic.all_records()
    new = synthetic.tagged(old, run_id="20261122T000000Z", stop_scale=0.05)
    new = [{**row, "samples": [value * (1.004 if index % 2 else 1.0) for index, value in enumerate(row["samples"])]}
           if row.get("samples") else row for row in new]
    new = slower(new, lambda row: row["experiment"] == "blocking" and row["call"] == "cudaMalloc", 1.5)
    result = compare.compare(synthetic.frame(old), synthetic.frame(new), registry())
    unclear = result.table[result.table["verdict"] == "unclear"]
    assert len(unclear) == 2 and set(unclear["configuration"].str.split().str[0]) == {"cudaMalloc"}
    assert (unclear["ratio"] - 1).round(3).tolist() == [0.5, 0.5]
    assert result.counts() == {"unclear": 2, "same": len(old) - 2}


def test_every_configuration_of_every_experiment_is_the_same_as_itself(tmp_path, run):
    rows = synthetic.all_records()
    path = synthetic.write(tmp_path / "r.parquet", rows)
    result = compare.compare(store.read(path, synthetic.suite()), store.read(path, synthetic.suite()), registry())
    assert result.counts() == {"same": len(rows)} and not result.warnings and not result.headlines
    assert set(result.table["experiment"]) == set(registry())  # every experiment
    printed = run("compare", "r.parquet", "r.parquet", "--fail-above", "1", cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr
    assert f"{len(rows)} same (not listed; --all lists every configuration)" in printed.stdout
    assert "nothing beyond noise" in printed.stdout


@pytest.mark.parametrize("path", COMMITTED, ids=lambda path: path.name[:16])
def test_each_committed_version_1_file_is_the_same_as_itself(path):
    rows = store.read(path, synthetic.suite())
    result = compare.compare(rows, rows, registry())
    assert len(result.table) == len(rows) and result.counts() == {"same": len(rows)}


def test_the_committed_results_directory_is_the_same_as_itself(tmp_path, run):
    from bench.analysis import selection

    printed = run("compare", str(RESULTS), str(RESULTS), cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr
    shown = len(selection.newest(store.read_any(RESULTS, synthetic.suite()), registry()))
    assert printed.stdout == (f"What changed\n  nothing beyond noise\n{shown} same (not listed; --all lists every "
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


def test_the_driver_update_diff_names_calls_copies_and_claims(tmp_path, run):
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
        f"bandwidth pinned H2D 16 MiB: slower, {numbers.number(before)} → {numbers.number(before / 1.25)} GB/s "
        "(time +25.0%)",
        'claim "cudaMalloc is synchronous": partly → busted (host: returned during a running kernel (0.004 ms); '
        "kernels on two streams around it: 0 of 2 serialized)",
        'claim "cudaFree waits for running kernels": holds → busted (returned while a kernel ran in all 2 '
        "placements × streams; host 0.004 ms)",
    ]
    assert len(result.slower_than(20)) == 1 and len(result.slower_than(30)) == 0
    synthetic.write(tmp_path / "old.parquet", old)
    synthetic.write(tmp_path / "new.parquet", new)
    assert run("compare", "old.parquet", "new.parquet", "--fail-above", "30", cwd=tmp_path).returncode == 0
    gate = run("compare", "old.parquet", "new.parquet", "--fail-above", "20", cwd=tmp_path)
    assert gate.returncode == 1 and "1 configurations slower by more than 20%: failing" in gate.stdout


def test_the_output_shows_warnings_headlines_then_what_is_not_the_same_in_plain_lines(tmp_path, run):
    old, new = driver_update()
    synthetic.write(tmp_path / "old.parquet", old)
    synthetic.write(tmp_path / "new.parquet", new)
    printed = run("compare", "old.parquet", "new.parquet", cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr
    lines = printed.stdout.splitlines()
    assert plain(lines) and lines[0] == "What changed"
    assert printed.stderr.splitlines() == ["bench: warning: driver_version differs: 580.0 → 590.0",
                                       "bench: warning: cuda_runtime differs: 12.9 → 13.0"]  # stdout is the answer
    order = [printed.stdout.index(text) for text in ("What changed", "bandwidth: 1 of", "blocking: 2 of",
                                                  "serialization: 2 of")]
    assert order == sorted(order)
    assert "waits-for-device → returns" in printed.stdout and "slower +25.0%" in printed.stdout
    assert "GPU" not in printed.stdout  # one GPU on each side: no GPU column
    assert lines[-1] == f"4 changed, 1 slower, {len(old) - 5} same (not listed; --all lists every configuration)"
    listed = run("compare", "old.parquet", "new.parquet", "--all", cwd=tmp_path)
    assert f"bandwidth: {sum(row['experiment'] == 'bandwidth' for row in old)} of" in listed.stdout
    assert "cudaGetLastError" in listed.stdout and "cudaGetLastError" not in printed.stdout
    assert listed.stdout.splitlines()[-1] == f"4 changed, 1 slower, {len(old) - 5} same"
    assert plain(listed.stdout.splitlines())


def test_gpus_pair_by_uuid_and_a_lone_gpu_with_a_lone_gpu(tmp_path, run):
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
    printed = run("compare", "fleet", "new.parquet", "--all", cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr
    assert "GPU" in printed.stdout.split("bandwidth: ")[1].splitlines()[2]  # the table's header row
    assert plain(printed.stdout.splitlines())


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
    rows = synthetic.sampled([row for row in synthetic.all_records() if row["experiment"] == "launch"])
    synthetic.write(tmp_path / "old" / "1.parquet", rows)
    synthetic.write(tmp_path / "old" / "2.parquet", slower(synthetic.tagged(rows, run_id="20261122T000000Z"),
                                                          lambda row: row["path"] == "graph", 2.0))
    result = compare.compare(store.read_any(tmp_path / "old", synthetic.suite()), synthetic.frame(rows), registry())
    assert list(result.table["verdict"]) == ["same", "same", "faster"]


def test_a_version_1_directory_against_a_version_2_file(tmp_path, run):
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
    printed = run("compare", "v1", "v2.parquet", cwd=tmp_path)
    assert printed.returncode == 0 and f"{len(rows)} same" in printed.stdout, printed.stderr


def test_numbers_read_as_people_write_them():
    assert [numbers.number(value) for value in (16.0, 0.004504, 54.33333, 12345.6, math.nan)] == [
        "16", "0.004504", "54.33", "12346", ""]
    assert compare.compare(pd.DataFrame(), synthetic.frame(synthetic.launch_records()), registry()).table.empty


def test_json_for_ci_and_markdown_for_a_pull_request(tmp_path, run):
    import json

    old, new = driver_update()
    synthetic.write(tmp_path / "old.parquet", old)
    synthetic.write(tmp_path / "new.parquet", new)
    printed = run("compare", "old.parquet", "new.parquet", "--format", "json", "--fail-above", "20", cwd=tmp_path)
    assert printed.returncode == 1 and printed.stderr.count("bench: warning: ") == 2, printed.stderr
    document = json.loads(printed.stdout)  # stdout is the document alone
    assert document["counts"] == {"changed": 4, "slower": 1, "same": len(old) - 5}
    assert document["fail_above"] == {"percent": 20, "failing": 1}
    assert document["warnings"] == ["driver_version differs: 580.0 → 590.0", "cuda_runtime differs: 12.9 → 13.0"]
    slower = [line for line in document["configurations"] if line["verdict"] == "slower"]
    assert len(document["configurations"]) == 5 and slower[0]["configuration"] == "pinned H2D 16 MiB"
    assert slower[0]["ratio"] == pytest.approx(1.25) and slower[0]["unit"] == "ms"
    changed_line = next(line for line in document["configurations"] if line["verdict"] == "changed")
    assert changed_line["ratio"] is None or isinstance(changed_line["ratio"], float)  # never NaN: JSON has none
    listed = json.loads(run("compare", "old.parquet", "new.parquet", "--format", "json", "--all",
                              cwd=tmp_path).stdout)
    assert len(listed["configurations"]) == len(old)
    printed = run("compare", "old.parquet", "new.parquet", "--format", "markdown", cwd=tmp_path)
    markdown = printed.stdout
    assert printed.returncode == 0 and markdown.startswith("## What changed\n\n- blocking cudaFree"), markdown[:300]
    assert "### bandwidth\\: 1 of" in markdown and "| configuration | old ms | new ms | verdict |" in markdown
    assert "| --- | ---: | ---: | --- |" in printed.stdout and "| pinned H2D 16 MiB | " in printed.stdout
    assert printed.stdout.rstrip().endswith(f"4 changed, 1 slower, {len(old) - 5} same (not listed; --all lists every "
                                        "configuration)")
    assert "warning" not in printed.stdout and not {"old.parquet", "new.parquet"} ^ {p.name for p in tmp_path.iterdir()}


MIB = 1 << 20


def _machine(letter: str, factors: dict[int, float], sizes=(MIB, 16 * MIB, 256 * MIB)) -> list[dict]:
    """Pinned H2D copies of ``sizes`` on one more Test GPU (``letter``: its UUID and host), each size's times ×
    its factor in ``factors``."""
    rows = synthetic.sampled([row for row in synthetic.records("bandwidth")
                    if (row["host_memory"], row["direction"]) == ("pinned", "H2D") and row["bytes"] in sizes])
    for nbytes, factor in factors.items():
        rows = slower(rows, lambda row, nbytes=nbytes: row["bytes"] == nbytes, factor)
    if letter == "a":
        return rows
    return synthetic.tagged(rows, gpu_uuid=f"GPU-{letter * 8}-0000-0000-0000-000000000000", hostname=f"node-{letter}")


def test_two_machines_of_one_kind_say_which_changes_exceed_the_spread_on_record(tmp_path, run):
    """Machine a against machine b, two Test GPUs: 1 MiB is 20% slower on b where the machines on record (a, c, d)
    lie within 8.2%; 16 MiB is 20% slower where they lie 30% apart; 256 MiB no other machine measured. b's own
    earlier run is left out of the record: it is the machine judged."""
    import json

    synthetic.write(tmp_path / "old.parquet", _machine("a", {}))
    synthetic.write(tmp_path / "new.parquet", _machine("b", {MIB: 1.2, 16 * MIB: 1.2, 256 * MIB: 1.2}))
    record = {"c": _machine("c", {MIB: 1.05, 16 * MIB: 1.3}, sizes=(MIB, 16 * MIB)),
              "d": _machine("d", {MIB: 0.97}, sizes=(MIB, 16 * MIB)),
              "b": _machine("b", {MIB: 2.0}, sizes=(MIB, 16 * MIB))}
    for letter, rows in record.items():
        synthetic.write(tmp_path / "results" / f"{letter}.parquet", rows)
    old, new = (store.read(tmp_path / name, synthetic.suite()) for name in ("old.parquet", "new.parquet"))
    everything = synthetic.frame([row for rows in record.values() for row in rows])
    result = compare.compare(old, new, registry(), record=everything)
    lines = result.table.set_index("configuration")
    assert list(lines["verdict"]) == ["slower"] * 3
    assert lines["machine_spread"].tolist()[:2] == pytest.approx([1.05 / 0.97 - 1, 0.3])
    assert lines["machine_spread_low"].tolist()[:2] == pytest.approx([0.97 / 1.05 - 1, 1 / 1.3 - 1])
    assert lines["machine_spread_high"].tolist()[:2] == pytest.approx([1.05 / 0.97 - 1, 0.3])
    assert lines["beyond_machine_spread"].tolist() == [True, False, None]
    assert lines["note"].tolist() == ["beyond the -7.6% to +8.2% spread of 3 machines",
                                      "within the -23.1% to +30.0% spread of 3 machines", ""]
    label = "Test GPU 00000000 on node-a → bbbbbbbb on node-b"
    assert result.headlines[0] == (f"{label}: 1 of 3 changes beyond noise exceed the spread between the 3 Test GPU "
                                   "machines on record; 1 with no spread on record")
    assert "bandwidth pinned H2D 1 MiB: slower, " in result.headlines[1]
    assert result.headlines[1].endswith("(time +20.0%); beyond the -7.6% to +8.2% spread of 3 machines")
    printed = run("compare", "old.parquet", "new.parquet", "--format", "json", cwd=tmp_path)  # results/: the record
    assert printed.returncode == 0, printed.stderr
    document = json.loads(printed.stdout)
    assert document["headlines"] == result.headlines
    assert [(line["beyond_machine_spread"], line["note"]) for line in document["configurations"]] == [
        (True, "beyond the -7.6% to +8.2% spread of 3 machines"),
        (False, "within the -23.1% to +30.0% spread of 3 machines"), (None, "")]
    printed = run("compare", "old.parquet", "new.parquet", "--spread-from", "results/c.parquet", cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr
    assert "slower +20.0% (beyond the -4.8% to +5.0% spread of 2 machines)" in " ".join(printed.stdout.split())
    assert "between the 2 Test GPU machines on record; 1 with no spread on record" in " ".join(printed.stdout.split())
    (tmp_path / "elsewhere").mkdir()
    for name in ("old.parquet", "new.parquet"):
        (tmp_path / name).rename(tmp_path / "elsewhere" / name)
    printed = run("compare", "old.parquet", "new.parquet", "--format", "markdown", cwd=tmp_path / "elsewhere")
    assert printed.returncode == 0, printed.stderr
    assert (f"- {label}\\: two machines of one kind; no other Test GPU on record to measure the machine-to-machine "
            "spread by (compare --spread-from names results that hold some\\)") in printed.stdout
    assert "| pinned H2D 1 MiB | " in printed.stdout and "| slower +20.0% |" in printed.stdout


def test_two_committed_h100s_flag_no_row_below_its_floor_and_no_unclear_change_of_nothing():
    """The issue-35 case: two H100 default sweeps on different machines, the newer paced down to stop_scale 0.05 in
    places. No configuration whose medians agree within 1% is unclear, and none with a row below its floor is
    flagged."""
    runs = [ROOT / "results" / name for name in ("20261123T215205Z-471-NVIDIA-H100-80GB-HBM3.parquet",
                                                  "20261123T231801Z-2805-NVIDIA-H100-80GB-HBM3.parquet")]
    old, new = (store.read(path, synthetic.suite()) for path in runs)
    result = compare.compare(old, new, registry())
    table = result.table
    unclear = table[table["verdict"] == "unclear"]
    assert len(unclear) and ((unclear["ratio"] - 1).abs() > compare.SAME_WITHIN).all()
    assert not (table["verdict"].isin(["same", "changed"]) & table["note"].astype(bool)).any()
    floor = table["note"].str.startswith("below the floor")
    assert floor.any() and not table[floor]["verdict"].ne("unclear").any()
    flagged = table[table["verdict"].isin(["slower", "faster"])]
    paced = {(row["experiment"], compare.describe(registry()[row["experiment"]], row)) for row in new.to_dict("records")
             if noise.below_floor(row, selection.samples_of(row), registry()[row["experiment"]].accuracy.floor)}
    assert paced and not paced & set(zip(flagged["experiment"], flagged["configuration"]))
