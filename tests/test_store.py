import json
import os

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench import store
from bench.store import ResultsError

ROWS = [
    {"experiment": "bandwidth", "direction": "H2D", "bytes": 4096, "samples_ms": [0.1, 0.2], "gbps": 1.5},
    {"experiment": "bandwidth", "direction": "D2H", "bytes": 8192, "samples_ms": [], "gbps": float("nan")},
]


def test_round_trip_with_metadata(tmp_path):
    path = tmp_path / "r.parquet"
    store.write(path, ROWS, {"run_id": "x"})
    rows = pd.read_parquet(path)  # one plain pandas call reads it
    assert list(rows["direction"]) == ["H2D", "D2H"]
    assert list(rows["samples_ms"].iloc[0]) == [0.1, 0.2] and len(rows["samples_ms"].iloc[1]) == 0
    assert store.read_metadata(path) == {"schema_version": store.SCHEMA_VERSION, "run_id": "x"}
    assert store.read(path).equals(rows)
    assert path.stat().st_mode & 0o777 == 0o666 & ~_current_umask()


def test_a_column_of_mixed_types_is_kept_as_text(tmp_path):
    path = tmp_path / "r.parquet"
    rows = [{"experiment": "a", "flag": True, "x": 1.5}, {"experiment": "b", "flag": "maybe"}, {"experiment": "c"}]
    store.write(path, rows, {"run_id": "x"})
    back = store.read(path)
    assert list(back["flag"].iloc[:2]) == ["True", "maybe"] and back["flag"].isna().iloc[2]
    assert back["x"].iloc[0] == 1.5


def _current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_atomic_write_survives_interruption(tmp_path, monkeypatch):
    path = tmp_path / "r.parquet"
    store.write(path, ROWS[:1], {"run_id": "old"})
    before = path.read_bytes()

    def interrupted(table, sink, **kwargs):
        sink.write(b"PAR1 half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr(pq, "write_table", interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.write(path, ROWS, {"run_id": "new"})
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["r.parquet"]  # no temporary file left behind


def test_rejects_foreign_newer_and_unreadable_files(tmp_path):
    foreign = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"a": [1]}), foreign)
    with pytest.raises(ResultsError, match="not a bench results file"):
        store.read(foreign)

    newer = tmp_path / "newer.parquet"
    table = pa.table({"a": [1]}).replace_schema_metadata(
        {store.METADATA_KEY: json.dumps({"schema_version": store.SCHEMA_VERSION + 1})})
    pq.write_table(table, newer)
    with pytest.raises(ResultsError, match="schema version"):
        store.read(newer)

    text = tmp_path / "text.parquet"
    text.write_text("hello")
    with pytest.raises(ResultsError, match="cannot read"):
        store.read(text)
    with pytest.raises(ResultsError, match="cannot read"):
        store.read(tmp_path / "missing.parquet")


def test_newest(tmp_path):
    with pytest.raises(ResultsError, match="no results files"):
        store.newest(tmp_path)
    for name in ("20261101T000000Z-a.parquet", "20261121T120000Z-a.parquet", "20261105T000000Z-a.parquet"):
        (tmp_path / name).write_bytes(b"")
    assert store.newest(tmp_path).name == "20261121T120000Z-a.parquet"
