"""Version 1 results files (bench before the one-sample schema) read as version 2: the committed H200 files, and
small hand-made version 1 frames (so the conversion is tested even where the committed files are gone)."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import synthetic
from bench.cli import upgrade as upgrade_command
from bench.results import store, upgrade
from bench.platform.errors import ResultsError
from bench.experiments import registry
from bench.results.version1 import from_version_1

RESULTS = Path(__file__).resolve().parents[1] / "results"


def committed(name: str) -> Path:
    """A committed version 1 results file, in results/ or (once superseded) under results/_superseded/."""
    found = sorted(RESULTS.glob(name)) + sorted((RESULTS / "_superseded").glob(f"**/{name}"))
    if not found:
        pytest.skip(f"the committed results file {name} is neither in results/ nor under results/_superseded/")
    return found[0]


BANDWIDTH_LAUNCH = "20261121T145904Z-NVIDIA-H200.parquet"
CATALOG = "20261121T145029Z-NVIDIA-H200.parquet"  # alloc, blocking, graphs, serialization
OVERLAP = "20261121T145240Z-NVIDIA-H200.parquet"  # with a version 1 side table beside it


def _assert_samples(rows: pd.DataFrame, unit: str, clock: str) -> None:
    assert len(rows)
    assert (rows["unit"] == unit).all() and (rows["clock"] == clock).all(), rows[["unit", "clock"]].drop_duplicates()
    assert rows["metric"].notna().all()
    ok = rows[rows["status"] == "ok"]
    assert len(ok)
    for _, row in ok.iterrows():
        samples = list(row["samples"])
        assert samples and row["n_samples"] == len(samples)
        assert row["min"] == min(samples) and row["max"] == max(samples)
        assert row["min"] <= row["median"] <= row["max"]


def test_committed_bandwidth_and_launch_file():
    path = committed(BANDWIDTH_LAUNCH)
    assert store.read_metadata(path)["schema_version"] == 1
    rows = store.read(path, synthetic.suite())
    assert set(rows["experiment"]) == {"bandwidth", "launch"}
    assert str(rows["bytes"].dtype) == "Int64" and str(rows["n_samples"].dtype) == "Int64"
    assert str(rows["verified"].dtype) == "boolean" and str(rows["gated"].dtype) == "boolean"
    assert str(rows["pcie_gen_max"].dtype) == "Int64"
    _assert_samples(rows[rows["experiment"] == "bandwidth"], "ms", "gpu")
    launch = rows[rows["experiment"] == "launch"]
    _assert_samples(launch, "us", "host")
    assert set(launch["path"]) == {"dispatcher", "precompiled", "graph"}
    for _, row in launch.iterrows():
        assert row["median"] == pytest.approx(float(np.median(list(row["samples"]))))
    assert not {"samples_ms", "median_ms", "min_ms", "max_ms", "min_us", "max_us"} & set(rows.columns)


def test_committed_catalog_file():
    rows = store.read(committed(CATALOG), synthetic.suite())
    assert set(rows["experiment"]) == {"alloc", "blocking", "graphs", "serialization"}
    by = {name: group for name, group in rows.groupby("experiment")}

    blocking = by["blocking"]
    _assert_samples(blocking, "ms", "host")
    for flag in ("docs_waits", "matches_docs", "docs_serializes", "stable", "host_waited"):
        assert str(rows[flag].dtype) == "boolean", flag
    assert set(blocking["docs_waits"].dropna()) == {True, False}  # text 'true'/'false'/'' became flags
    assert blocking["docs_waits"].isna().any() and set(blocking["matches_docs"].dropna()) <= {True, False}
    assert set(by["serialization"]["docs_serializes"].dropna()) == {True}

    alloc = by["alloc"]
    _assert_samples(alloc, "us", "host")
    metrics = dict(zip(alloc["pattern"], alloc["metric"]))
    assert metrics == {"single": "host time of one allocate + free round trip",
                       "loop": "host time per (allocate, kernel, free) iteration"}


def test_committed_graphs_malloc_loop_rows_split_by_launch():
    path = committed(CATALOG)
    raw = pq.read_table(path).to_pandas()
    raw_loops = raw[(raw["experiment"] == "graphs") & (raw["case"] == "malloc-loop")]
    graphs = store.read(path, synthetic.suite())
    graphs = graphs[graphs["experiment"] == "graphs"]
    loops = graphs[graphs["case"] == "malloc-loop"]
    assert len(loops) == 2 * len(raw_loops) > 0
    assert sorted(loops["launch"].value_counts().items()) == [("eager", len(raw_loops)), ("graph", len(raw_loops))]
    _assert_samples(loops, "ms", "gpu")
    assert loops["host_enqueue_ms"].notna().all()
    for (iterations, nbytes), pair in loops.groupby(["iterations", "bytes"]):
        original = raw_loops[(raw_loops["iterations"] == iterations) & (raw_loops["bytes"] == nbytes)].iloc[0]
        eager, graph = (pair[pair["launch"] == way].iloc[0] for way in ("eager", "graph"))
        assert list(eager["samples"]) == list(original["eager_ms_samples"])
        assert list(graph["samples"]) == list(original["graph_ms_samples"])
        assert graph["host_enqueue_ms"] == original["graph_host_ms"]
    assert set(graphs.loc[graphs["case"] == "sync-in-capture", "launch"]) == {"graph"}
    assert set(graphs.loc[graphs["case"] == "stream-order", "launch"]) == {"eager"}
    assert not [column for column in graphs.columns if graphs[column].notna().any()
                and column.startswith(("eager_", "graph_ms", "graph_host", "graph_speedup"))]


def test_committed_overlap_file_and_its_version_1_side_table():
    path = committed(OVERLAP)
    rows = store.read(path, synthetic.suite())
    assert set(rows["experiment"]) == {"overlap"}
    _assert_samples(rows, "ms", "gpu")
    assert str(rows["streams"].dtype) == "Int64" and rows["compute_ratio"].dtype == float
    tables = store.side_tables(path)
    assert list(tables) == ["timeline"] and {"op", "start_ms", "end_ms"} <= set(tables["timeline"].columns)
    assert path in store.results_files(path.parent) or path.parent.name.startswith("_")
    assert path.parent / f"{path.stem}.timeline.parquet" not in store.results_files(path.parent)


# --- hand-made version 1 frames ---------------------------------------------------------------------------------


def _version_1(path: Path, frame: pd.DataFrame) -> Path:
    table = pa.Table.from_pandas(frame, preserve_index=False)
    table = table.replace_schema_metadata({b"bench": json.dumps({"schema_version": 1, "run_id": "old"})})
    pq.write_table(table, path)
    return path


def test_a_version_1_file_is_converted_on_read(tmp_path):
    frame = pd.DataFrame([
        {"experiment": "bandwidth", "host_memory": "pinned", "direction": "H2D", "bytes": 4096.0,
         "samples_ms": [0.3, 0.1, 0.2], "median_ms": 0.2, "min_ms": 0.1, "max_ms": 0.3, "status": "ok", "error": "",
         "verified": "true", "docs_waits": None},
        {"experiment": "blocking", "host_memory": None, "direction": None, "bytes": None, "call": "cudaFree",
         "host_ms_samples": [19.0, 20.0, 21.0], "host_ms": 20.0, "status": "ok", "error": "", "verified": None,
         "docs_waits": "false", "matches_docs": ""},
    ])
    rows = store.read(_version_1(tmp_path / "old.parquet", frame), synthetic.suite())
    bandwidth, blocking = rows.iloc[0], rows.iloc[1]
    assert list(bandwidth["samples"]) == [0.3, 0.1, 0.2] and bandwidth["median"] == 0.2
    assert (bandwidth["unit"], bandwidth["clock"], bandwidth["n_samples"]) == ("ms", "gpu", 3)
    assert bandwidth["bytes"] == 4096 and str(rows["bytes"].dtype) == "Int64"
    assert bandwidth["verified"] is True or bandwidth["verified"] == True  # noqa: E712 (a pandas boolean)
    assert (blocking["unit"], blocking["clock"], blocking["median"], blocking["host_ms"]) == ("ms", "host", 20.0,
                                                                                             20.0)
    assert blocking["docs_waits"] == False and pd.isna(blocking["matches_docs"])  # noqa: E712
    assert str(rows["docs_waits"].dtype) == "boolean"
    assert "samples_ms" not in rows or rows["samples_ms"].isna().all()


def test_from_version_1_splits_graph_loops_and_labels_alloc_patterns():
    frame = pd.DataFrame([
        {"experiment": "graphs", "case": "malloc-loop", "iterations": 10, "bytes": 1024,
         "eager_ms_samples": [2.0, 1.0, 3.0], "eager_host_ms": 0.5, "eager_ms": 2.0,
         "graph_ms_samples": [1.0, 1.5], "graph_host_ms": 0.01, "graph_ms": 1.25, "graph_speedup": 1.6},
        {"experiment": "graphs", "case": "sync-in-capture", "iterations": 10, "bytes": 1024},
        {"experiment": "graphs", "case": "stream-order", "iterations": 10, "bytes": 1024},
        {"experiment": "alloc", "pattern": "single", "cycle_us_samples": [5.0, 7.0, 6.0],
         "host_us_per_iteration_samples": None},
        {"experiment": "alloc", "pattern": "loop", "cycle_us_samples": None,
         "host_us_per_iteration_samples": [40.0, 50.0]},
    ])
    rows = from_version_1(frame)
    graphs = rows[rows["experiment"] == "graphs"]
    assert list(graphs["launch"]) == ["eager", "graph", "graph", "eager"]
    eager, graph = graphs.iloc[0], graphs.iloc[1]
    assert (eager["samples"], eager["median"], eager["min"], eager["max"]) == ([2.0, 1.0, 3.0], 2.0, 1.0, 3.0)
    assert (eager["host_enqueue_ms"], graph["host_enqueue_ms"]) == (0.5, 0.01)
    assert (graph["samples"], graph["median"], graph["n_samples"]) == ([1.0, 1.5], 1.25, 2)
    assert (graph["unit"], graph["clock"], graph["metric"]) == ("ms", "gpu", "GPU time of the whole loop")
    assert not {"eager_ms_samples", "graph_ms", "graph_speedup", "eager_host_ms"} & set(graphs.dropna(
        axis=1, how="all").columns)
    alloc = rows[rows["experiment"] == "alloc"].reset_index(drop=True)
    assert list(alloc["samples"][0]) == [5.0, 7.0, 6.0] and alloc["median"][0] == 6.0
    assert list(alloc["samples"][1]) == [40.0, 50.0] and alloc["median"][1] == 45.0
    assert list(alloc["metric"]) == ["host time of one allocate + free round trip",
                                     "host time per (allocate, kernel, free) iteration"]
    assert set(alloc["unit"]) == {"us"} and set(alloc["clock"]) == {"host"}


def test_from_version_1_turns_text_flags_into_booleans():
    frame = pd.DataFrame({"experiment": ["blocking"] * 3, "host_ms_samples": [[1.0]] * 3,
                          "docs_waits": ["true", "false", ""], "matches_docs": ["", "true", "false"]})
    rows = from_version_1(frame)
    assert rows["docs_waits"].tolist() == [True, False, None]
    assert rows["matches_docs"].tolist() == [None, True, False]


def test_from_version_1_leaves_empty_and_foreign_frames_alone():
    empty = pd.DataFrame()
    assert from_version_1(empty) is empty
    foreign = pd.DataFrame({"a": [1]})
    assert from_version_1(foreign) is foreign


# --- version 2 files: today's columns, on disk ---------------------------------------------------------------------

UPGRADE = "python -m bench.cli.upgrade results"


def test_every_committed_main_table_has_todays_columns_and_plain_readers_drop_none():
    """Plain pandas and pyarrow read a directory with one file's schema: a file of fewer columns would lose the
    others' columns. So every committed main table of this schema version has exactly the suite's columns, and a
    column added to the suite fails here until the files are upgraded."""
    names = synthetic.suite().names
    tables = upgrade.main_tables(RESULTS)
    assert len(tables) > 30  # results/ and every _ subdirectory: _quick, _fresh, _full, ...
    stale = [str(path.relative_to(RESULTS)) for path in tables if pq.read_schema(path).names != names]
    assert not stale, f"these main tables lack today's suite columns (or their order); run: {UPGRADE} ({stale})"
    shown = store.results_files(RESULTS)
    columns = {name for path in shown for name in pq.read_schema(path).names}
    frame, dataset = pd.read_parquet(RESULTS), ds.dataset(RESULTS)
    assert set(frame.columns) == set(dataset.schema.names) == columns == set(names)
    assert len(frame) == dataset.count_rows() == sum(pq.ParquetFile(path).metadata.num_rows for path in shown)
    assert frame["host_cpus"].notna().any() and str(frame["n_samples"].dtype) == "Int64"


def test_every_committed_side_table_reads():
    """Side tables (_timeline/ beside their results file) have schemas of their own and are left as they are; so do
    the tables of bench's commands (bench syncs --save in _syncs/, bench trace --save in _trace/), of the syncs
    case table (scripts/syncs_cases.py, in _syncs/), of the answer times (scripts/answer_times.py, in _answers/) and of
    tracing's overhead (scripts/trace_tiny.py, in _trace/), which name what they ran and the GPU."""
    sides = [path for path in sorted(RESULTS.rglob("*.parquet")) if store.read_metadata(path).get("table")]
    assert len(sides) > 30
    for path in sides:
        table = store.read_table(path)
        named = {"syncs": {"target", "gpu_uuid"}, "trace": {"target", "gpu_uuid", "op"},
                 "syncs-cases": {"case", "gpu_uuid"},
                 "answers": {"tool", "target", "t0_s", "wall_s", "gpu_uuid"},
                 "trace-tiny": {"library", "kernels", "variant", "traced_host_ms", "gpu_uuid"}}.get(
            store.read_metadata(path)["table"], {"experiment", "run_id"})
        assert len(table) and named <= set(table.columns), path
    for directory in {path.parent for path in upgrade.main_tables(RESULTS)}:
        store.side_tables_any(directory)  # read beside their results files, as bench reads them: no error


def _older(path: Path, dropped: list[str]) -> pa.Table:
    """The results file at ``path`` as a bench before ``dropped`` were added wrote it, in another column order."""
    table = pq.read_table(path)
    kept = [name for name in table.column_names if name not in dropped][::-1]
    older = table.select(kept)
    metadata = {**table.schema.metadata, b"pandas": store.pandas_metadata(older.schema)}
    pq.write_table(older.replace_schema_metadata(metadata), path)
    return pq.read_table(path)


def test_to_suite_schema_adds_empty_columns_and_changes_nothing_else(tmp_path):
    path = synthetic.write(tmp_path / "r.parquet", synthetic.launch_records() + synthetic.bandwidth_records()[:3])
    before = _older(path, ["host_cpus", "nvlinks", "stop_scale"])
    assert upgrade.to_suite_schema(path, synthetic.suite()) is True
    after = pq.read_table(path)
    assert after.column_names == synthetic.suite().names and after.num_rows == before.num_rows == 6
    for name in before.column_names:
        assert after[name].equals(before[name]), name
        assert after.schema.field(name).equals(before.schema.field(name), check_metadata=True), name
    assert all(after[name].null_count == 6 for name in ("host_cpus", "nvlinks", "stop_scale"))
    assert after.schema.metadata[store.METADATA_KEY] == before.schema.metadata[store.METADATA_KEY]
    assert str(pd.read_parquet(path)["n_samples"].dtype) == "Int64"  # pandas' description covers every column
    stamp = path.stat().st_mtime_ns
    assert upgrade.to_suite_schema(path, synthetic.suite()) is False and path.stat().st_mtime_ns == stamp


def test_to_suite_schema_refuses_a_column_the_suite_lacks_or_types_differently(tmp_path):
    path = synthetic.write(tmp_path / "r.parquet", synthetic.launch_records())
    table = pq.read_table(path)
    pq.write_table(table.append_column("retired", pa.array([1.0] * table.num_rows)), path)
    with pytest.raises(ResultsError, match="column retired \\(double\\) is not in today's suite schema"):
        upgrade.to_suite_schema(path, synthetic.suite())
    pq.write_table(table.set_column(table.schema.get_field_index("n_samples"), "n_samples",
                                    table["n_samples"].cast(pa.float64())), path)
    with pytest.raises(ResultsError, match="column n_samples \\(double\\)"):
        upgrade.to_suite_schema(path, synthetic.suite())


def test_the_upgrade_command_rewrites_only_main_tables_of_this_version(tmp_path, capsys):
    main = synthetic.write(tmp_path / "_quick" / "20261121T000000Z-a.parquet", synthetic.launch_records())
    _older(main, ["stop_scale"])
    current = synthetic.write(tmp_path / "20261122T000000Z-a.parquet", synthetic.launch_records())
    side = store.side_table_path(current, "timeline")
    store.write(side, synthetic.overlap_timeline_records(synthetic.overlap_records())[:2],
                store.table_schema("timeline", registry()), {"run_id": "x", "table": "timeline"})
    (tmp_path / "notes.parquet").write_text("not parquet")
    untouched = {path: path.read_bytes() for path in (current, side, tmp_path / "notes.parquet")}
    assert upgrade_command.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"upgraded {main}", f"{tmp_path}: 1 of 2 main tables upgraded; all have the suite's "
                                       f"{len(synthetic.suite())} columns"]
    assert pq.read_schema(main).names == synthetic.suite().names
    assert {path: path.read_bytes() for path in untouched} == untouched
    assert upgrade_command.main([str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err == (f"bench: error: {tmp_path / 'missing'} is not a directory (usage: python -m "
                                       "bench.cli.upgrade [DIRECTORY ...])\n")
