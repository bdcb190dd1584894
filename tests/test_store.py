"""Results on disk: the suite's schema, validated atomic writes, typed reads, side tables, directories of runs."""

import json
import math
import os

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import synthetic
from bench.results import store
from bench.platform.errors import ResultsError, UsageError
from bench.experiments import registry
from bench.results.schema import RowCheck, SchemaError
from fake_experiments import FINE


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


# --- schemas ---------------------------------------------------------------------------------------------------


def test_suite_schema_holds_every_experiments_columns():
    schema = synthetic.suite()
    assert schema.names[:3] == ["experiment", "status", "error"]
    for experiment in registry().values():
        for item in experiment.columns:
            assert item.name in schema.names, (experiment.name, item.name)
            assert schema.field(item.name).type == item.type
    assert synthetic.suite() is synthetic.suite()  # built once
    assert "n" not in schema.names


def test_suite_schema_with_extra_experiments():
    schema = synthetic.suite([FINE])
    assert {"n", "count", "note"} <= set(schema.names)
    assert set(synthetic.suite().names) < set(schema.names)


def test_table_schema():
    schema = store.table_schema("timeline", registry())
    overlap = registry()["overlap"]
    head = ["experiment", "run_id", "gpu_uuid", "hostname"]  # a sweep of several GPUs has one run id
    assert schema.names[:4] == head
    assert schema.names[4:4 + len(overlap.axes)] == list(overlap.axes)
    assert schema.names[4 + len(overlap.axes):] == [item.name for item in overlap.tables["timeline"]]
    with pytest.raises(KeyError):
        store.table_schema("nothing", registry())


def test_side_table_path():
    assert store.side_table_path("results/r.parquet", "timeline") == store.Path("results/_timeline/r.parquet")


# --- writing and reading ----------------------------------------------------------------------------------------


def test_round_trip_is_typed_and_stamped(tmp_path):
    path = tmp_path / "r.parquet"
    records = synthetic.all_records()
    synthetic.write(path, records, run_id="x", mode="default")
    assert store.read_metadata(path) == {"schema_version": store.SCHEMA_VERSION, "run_id": "x", "mode": "default"}
    assert store.SCHEMA_VERSION == 2
    rows = store.read(path, synthetic.suite())
    assert rows.columns.tolist() == synthetic.suite().names
    assert len(rows) == len(records)
    assert str(rows["bytes"].dtype) == "Int64" and str(rows["n_samples"].dtype) == "Int64"
    assert str(rows["verified"].dtype) == "boolean" and str(rows["matches_docs"].dtype) == "boolean"
    bandwidth = rows[rows["experiment"] == "bandwidth"]
    assert bandwidth["bytes"].notna().all() and rows.loc[rows["experiment"] == "launch", "bytes"].isna().all()
    assert list(bandwidth["samples"].iloc[0]) == records[0]["samples"]
    pd.testing.assert_frame_equal(rows, synthetic.frame(records))
    assert len(pd.read_parquet(path)) == len(records)  # one plain pandas call reads it too
    assert path.stat().st_mode & 0o777 == 0o666 & ~_umask()


def test_write_checks_every_row_and_writes_nothing_wrong(tmp_path):
    path = tmp_path / "r.parquet"
    good = synthetic.bandwidth_records()[:3]
    bad = {**good[1], "bytes": 1.5}
    with pytest.raises(SchemaError, match="bandwidth row: column 'bytes'"):
        store.write(path, [good[0], bad], synthetic.suite(), {"run_id": "x"})
    assert list(tmp_path.iterdir()) == []
    synthetic.write(path, good)
    before = path.read_bytes()
    with pytest.raises(SchemaError, match="'nope' is not declared"):
        store.write(path, [*good, {**good[0], "nope": 1}], synthetic.suite(), {"run_id": "y"})
    assert path.read_bytes() == before


def test_atomic_write_survives_interruption(tmp_path, monkeypatch):
    path = tmp_path / "r.parquet"
    rows = synthetic.bandwidth_records()[:2]
    synthetic.write(path, rows[:1], run_id="old")
    before = path.read_bytes()

    def interrupted(table, sink, **kwargs):
        sink.write(b"PAR1 half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr(pq, "write_table", interrupted)
    with pytest.raises(KeyboardInterrupt):
        synthetic.write(path, rows, run_id="new")
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["r.parquet"]  # no temporary file left behind


def test_write_makes_the_directory(tmp_path):
    path = tmp_path / "a" / "b" / "r.parquet"
    synthetic.write(path, synthetic.launch_records())
    assert len(store.read(path, synthetic.suite())) == 3


def test_rejects_foreign_newer_unreadable_and_missing_files(tmp_path):
    foreign = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"a": [1]}), foreign)
    with pytest.raises(ResultsError, match="not a bench results file"):
        store.read(foreign, synthetic.suite())

    newer = tmp_path / "newer.parquet"
    table = pa.table({"a": [1]}).replace_schema_metadata(
        {store.METADATA_KEY: json.dumps({"schema_version": store.SCHEMA_VERSION + 1})})
    pq.write_table(table, newer)
    with pytest.raises(ResultsError, match=f"schema version {store.SCHEMA_VERSION + 1}"):
        store.read(newer, synthetic.suite())

    garbled = tmp_path / "garbled.parquet"
    pq.write_table(pa.table({"a": [1]}).replace_schema_metadata({store.METADATA_KEY: b"{not json"}), garbled)
    with pytest.raises(ResultsError, match="unreadable bench metadata"):
        store.read(garbled, synthetic.suite())

    text = tmp_path / "text.parquet"
    text.write_text("hello")
    with pytest.raises(ResultsError, match="cannot read"):
        store.read(text, synthetic.suite())
    with pytest.raises(ResultsError, match="cannot read"):
        store.read(tmp_path / "missing.parquet", synthetic.suite())
    assert issubclass(ResultsError, UsageError)


def test_read_refuses_side_tables_and_files_without_result_rows(tmp_path):
    side = tmp_path / "_timeline" / "r.parquet"
    rows = synthetic.overlap_timeline_records(synthetic.overlap_records()[:1])
    store.write(side, rows, store.table_schema("timeline", registry()), {"run_id": "x", "table": "timeline"})
    with pytest.raises(ResultsError, match="side table 'timeline'"):
        store.read(side, synthetic.suite())
    assert len(store.read_table(side)) == len(rows)

    no_rows = tmp_path / "no-rows.parquet"
    table = pa.table({"a": [1]}).replace_schema_metadata({store.METADATA_KEY: json.dumps({"schema_version": 2})})
    pq.write_table(table, no_rows)
    with pytest.raises(ResultsError, match="no bench result rows"):
        store.read(no_rows, synthetic.suite())

    main = synthetic.write(tmp_path / "r.parquet", synthetic.launch_records())
    with pytest.raises(ResultsError, match="is a results file, not a side table"):
        store.read_table(main)


def test_typed_converts_older_representations():
    schema = synthetic.suite()
    rows = pd.DataFrame({"experiment": ["a", "b", "c"], "bytes": [1.0, float("nan"), 3.0],
                         "verified": ["true", "", "False"], "matches_docs": [1.0, None, 0.0],
                         "gbps": [1.0, 2.0, float("nan")], "unknown": [1, 2, 3]})
    out = store.typed(rows, schema)
    assert str(out["bytes"].dtype) == "Int64" and out["bytes"].tolist()[::2] == [1, 3] and out["bytes"].isna()[1]
    assert out["verified"].tolist()[::2] == [True, False] and out["verified"].isna()[1]
    assert out["matches_docs"].tolist()[::2] == [True, False] and out["matches_docs"].isna()[1]
    assert out["gbps"].dtype == float and out["unknown"].tolist() == [1, 2, 3]
    typed = store.typed(out, schema)
    pd.testing.assert_frame_equal(typed, out)
    empty = pd.DataFrame({"bytes": []})
    assert store.typed(empty, schema) is empty


# --- side tables and directories --------------------------------------------------------------------------------


def _timeline(path, run_id="x"):
    records = [{**row, "run_id": run_id} for row in synthetic.overlap_records()[:2]]
    synthetic.write(path, records, run_id=run_id)
    entries = synthetic.overlap_timeline_records(records)
    store.write(store.side_table_path(path, "timeline"), entries, store.table_schema("timeline", registry()),
                {"run_id": run_id, "table": "timeline"})
    return records, entries


def test_side_tables_of_both_layouts(tmp_path):
    path = tmp_path / "20261121T000000Z-a.parquet"
    _, entries = _timeline(path)
    (tmp_path / "_logs").mkdir()
    (tmp_path / "_logs" / "other.parquet").write_text("not this file's")
    tables = store.side_tables(path)
    assert list(tables) == ["timeline"] and len(tables["timeline"]) == len(entries)
    assert set(tables["timeline"]["run_id"]) == {"x"}

    old = tmp_path / "v1" / "20261101T000000Z-a.parquet"
    old.parent.mkdir()
    synthetic.write(old, synthetic.launch_records())
    pq.write_table(pa.table({"op": ["H2D"], "start_ms": [0.0]}), old.parent / f"{old.stem}.timeline.parquet")
    pq.write_table(pa.table({"op": ["H2D"]}), old.parent / f"{old.stem}.a.b.parquet")  # not a side table name
    tables = store.side_tables(old)
    assert list(tables) == ["timeline"] and tables["timeline"]["op"].tolist() == ["H2D"]
    assert store.side_tables(synthetic.write(tmp_path / "plain" / "r.parquet", synthetic.launch_records())) == {}


def test_results_files_pass_over_hidden_names_and_side_tables(tmp_path):
    for name in ("20261101T000000Z-a.parquet", "sub/20261102T000000Z-b.parquet", "sub/deeper/c.parquet",
                 "_timeline/20261101T000000Z-a.parquet", "_superseded/old.parquet", "sub/_logs/x.parquet",
                 ".hidden/d.parquet", ".e.parquet", "_f.parquet", "20261101T000000Z-a.timeline.parquet", "notes.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    found = [path.relative_to(tmp_path).as_posix() for path in store.results_files(tmp_path)]
    assert found == ["20261101T000000Z-a.parquet", "sub/20261102T000000Z-b.parquet", "sub/deeper/c.parquet"]


def test_read_any_reads_a_file_or_a_directory_as_one_dataset(tmp_path):
    a = [{**row, "hostname": "node-a", "gpu_uuid": "GPU-a"} for row in synthetic.bandwidth_records()[:4]]
    b = [{**row, "hostname": "node-b", "gpu_uuid": "GPU-b"} for row in synthetic.launch_records()]
    synthetic.write(tmp_path / "fleet" / "node-a" / "r1.parquet", a, run_id="r1")
    synthetic.write(tmp_path / "fleet" / "node-b" / "r2.parquet", b, run_id="r2")
    _timeline(tmp_path / "fleet" / "node-b" / "r3.parquet")
    rows = store.read_any(tmp_path / "fleet", synthetic.suite())
    assert len(rows) == 4 + 3 + 2 and set(rows["hostname"]) == {"node-a", "node-b"}
    assert set(rows["experiment"]) == {"bandwidth", "launch", "overlap"}
    assert str(rows["bytes"].dtype) == "Int64"
    assert len(store.read_any(tmp_path / "fleet" / "node-a" / "r1.parquet", synthetic.suite())) == 4
    tables = store.side_tables_any(tmp_path / "fleet")
    assert list(tables) == ["timeline"] and len(tables["timeline"]) > 0
    (tmp_path / "empty").mkdir()
    with pytest.raises(ResultsError, match="no results files"):
        store.read_any(tmp_path / "empty", synthetic.suite())
    with pytest.raises(ResultsError, match="cannot read results file"):
        store.read_any(tmp_path / "missing", synthetic.suite())


def test_a_directory_reads_with_plain_pandas_and_pyarrow(tmp_path):
    """Two runs of different experiments, their side tables and logs: pandas and pyarrow read the main tables."""
    synthetic.write(tmp_path / "20261121T000000Z-Test-GPU.parquet",
                    synthetic.tagged(synthetic.bandwidth_records()[:5], run_id="r1"), run_id="r1")
    records, _ = _timeline(tmp_path / "20261121T010000Z-Test-GPU.parquet", run_id="r2")
    (tmp_path / "_logs").mkdir()
    (tmp_path / "_logs" / "x.log").write_text("a sweep's log\n")
    names = synthetic.suite().names
    frame = pd.read_parquet(tmp_path)
    assert len(frame) == 5 + len(records) and frame.columns.tolist() == names
    assert set(frame["experiment"]) == {"bandwidth", "overlap"} and set(frame["run_id"]) == {"r1", "r2"}
    table = ds.dataset(tmp_path).to_table()
    assert table.num_rows == 5 + len(records) and table.column_names == names


def test_newest(tmp_path):
    with pytest.raises(ResultsError, match="no results files"):
        store.newest(tmp_path)
    for name in ("20261101T000000Z-a.parquet", "20261121T120000Z-a.parquet", "20261105T000000Z-a.parquet",
                 "sub/20261231T000000Z-a.parquet", "_superseded/20261231T000000Z-a.parquet"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    assert store.newest(tmp_path).name == "20261121T120000Z-a.parquet"  # directly in the directory only


def test_newest_rows_takes_each_experiment_from_the_newest_file_that_has_it(tmp_path):
    def tagged(records, run_id):
        return synthetic.tagged(records, run_id=run_id)

    synthetic.write(tmp_path / "20261101T000000Z-a.parquet",
                    tagged(synthetic.bandwidth_records()[:3] + synthetic.launch_records(), "r1"), run_id="r1")
    synthetic.write(tmp_path / "20261102T000000Z-a.parquet", tagged(synthetic.bandwidth_records()[:2], "r2"),
                    run_id="r2")
    failed = [{**row, "status": "failed"} for row in synthetic.graphs_records()[:1]]
    synthetic.write(tmp_path / "20261103T000000Z-a.parquet", tagged(failed, "r3"), run_id="r3")
    (tmp_path / "20261104T000000Z-a.parquet").write_text("not parquet")  # passed over
    synthetic.write(tmp_path / "sub" / "20261105T000000Z-a.parquet",
                    tagged(synthetic.bandwidth_records()[:1], "r5"), run_id="r5")  # not directly in the directory
    synthetic.write(tmp_path / "_superseded" / "20261106T000000Z-a.parquet",
                    tagged(synthetic.launch_records()[:1], "r6"), run_id="r6")

    skipped = []
    rows = store.newest_rows(tmp_path, synthetic.suite(), ["bandwidth", "launch", "graphs", "alloc"], skipped.append)
    assert [str(error) for error in skipped] == [f"cannot read results file {tmp_path / '20261104T000000Z-a.parquet'}: "
                                                 "Parquet magic bytes not found in footer. Either the file is "
                                                 "corrupted or this is not a parquet file."]
    with pytest.raises(ResultsError, match="20261104T000000Z-a.parquet"):
        store.newest_rows(tmp_path, synthetic.suite(), ["launch"])  # no one to tell: the file stops it
    by = {name: group for name, group in rows.groupby("experiment")}
    assert set(by) == {"bandwidth", "launch", "graphs"}
    assert len(by["bandwidth"]) == 2 and set(by["bandwidth"]["run_id"]) == {"r2"}
    assert len(by["launch"]) == 3 and set(by["launch"]["run_id"]) == {"r1"}
    assert set(by["graphs"]["run_id"]) == {"r3"}  # any rows count, finished or not
    assert str(rows["bytes"].dtype) == "Int64"
    only = store.newest_rows(tmp_path, synthetic.suite(), ["launch"], skipped.append)
    assert set(only["experiment"]) == {"launch"} and len(only) == 3
    assert store.newest_rows(tmp_path, synthetic.suite(), ["alloc"], skipped.append).empty
    (tmp_path / "empty").mkdir()
    assert store.newest_rows(tmp_path / "empty", synthetic.suite(), ["launch"]).empty


def test_read_any_of_version_1_side_table_layout_passes_over_side_tables(tmp_path):
    synthetic.write(tmp_path / "20261101T000000Z-a.parquet", synthetic.launch_records())
    pq.write_table(pa.table({"op": ["H2D"]}), tmp_path / "20261101T000000Z-a.timeline.parquet")
    rows = store.read_any(tmp_path, synthetic.suite())
    assert len(rows) == 3 and not math.isnan(rows["median"].iloc[0])


def test_rows_read_back_can_be_written_again(tmp_path):
    """A resumed sweep writes a file's rows again: read, typed, they must turn back into rows that fit."""
    first = synthetic.write(tmp_path / "a.parquet", synthetic.all_records())
    records = store.records(store.read(first, synthetic.suite()))
    check = RowCheck(synthetic.suite())
    for row in records:
        check(row)
    assert records[0]["samples"] == synthetic.all_records()[0]["samples"] and records[0]["launch"] is None
    assert all(type(value) in (str, int, float, bool, list, type(None)) for row in records for value in row.values())
    again = synthetic.write(tmp_path / "b.parquet", records)
    pd.testing.assert_frame_equal(store.read(again, synthetic.suite()), store.read(first, synthetic.suite()))
