"""Result columns: types, allowed values, how experiments' columns merge, and row checks."""

import json

import numpy as np
import pyarrow as pa
import pytest

from bench.results import schema
from bench.platform.env import Environment
from bench.results.schema import (COMMON, FLAG, FLOAT, FLOATS, INT, MONITOR, RUN, SAMPLES, TEXT, TEXTS, Column,
                                  SchemaError, check_row, column, describe, environment_columns, schema_of,
                                  suite_columns)


def test_column_and_its_arrow_field():
    item = column("direction", TEXT, "copy direction", ["H2D", "D2H"])
    assert item == Column("direction", TEXT, "copy direction", ("H2D", "D2H"))
    field = item.field()
    assert field.name == "direction" and field.type == pa.string() and field.nullable
    assert field.metadata[b"doc"] == b"copy direction"
    assert json.loads(field.metadata[b"values"]) == ["H2D", "D2H"]
    assert schema.allowed_values(field) == ("H2D", "D2H")
    open_field = column("bytes", INT, "bytes").field()
    assert b"values" not in open_field.metadata and schema.allowed_values(open_field) == ()


def test_environment_columns_follow_the_environment_dataclass_then_the_optional_libraries_versions():
    from bench.platform.libraries import LIBRARIES

    columns = environment_columns()
    fields = Environment.fields()
    optional = [library.version_column for library in LIBRARIES if library.optional]
    assert [item.name for item in columns] == [field.name for field in fields] + optional
    types = {item.name: item.type for item in columns}
    assert types["gpu_name"] == TEXT and types["sm_count"] == INT and types["pcie_gen"] == INT
    assert types["hostname"] == TEXT and types["device_memory_bytes"] == INT


def test_suite_columns_order_and_groups():
    own = (column("bytes", INT), column("gbps", FLOAT))
    names = [item.name for item in suite_columns([own])]
    groups = [COMMON, own, SAMPLES, RUN, MONITOR, environment_columns()]
    assert names == [item.name for group in groups for item in group]
    assert len(names) == len(set(names))


def test_suite_columns_refuse_a_type_conflict():
    with pytest.raises(SchemaError, match="'bytes' is declared as int64 and as double"):
        suite_columns([(column("bytes", INT),), (column("bytes", FLOAT),)])
    with pytest.raises(SchemaError, match="median"):  # an experiment cannot redefine a sample column
        suite_columns([(column("median", TEXT),)])


def test_suite_columns_union_allowed_values_and_keep_open_columns_open():
    merged = {item.name: item for item in suite_columns([
        (column("verdict", TEXT, "host", ("returns", "waits")), column("api", TEXT, "open"),
         column("launch", TEXT, "", ("eager", "graph"))),
        (column("verdict", TEXT, "device", ("overlaps", "returns")), column("api", TEXT, "", ("cudaMalloc",)),
         column("launch", TEXT, "", ("graph", "eager"))),
    ])}
    assert merged["verdict"].values == ("returns", "waits", "overlaps")
    assert merged["verdict"].doc == "host"  # the first declaration's description stays
    assert merged["api"].values == ()  # one side leaves it open: it stays open
    assert set(merged["launch"].values) == {"eager", "graph"}
    # and the other way round: open first, closed second
    merged = {item.name: item for item in suite_columns([(column("api", TEXT, "", ("a",)),), (column("api", TEXT),)])}
    assert merged["api"].values == ()


def test_schema_of_and_describe():
    columns = (column("n", INT, "a count"), column("flag", FLAG, "yes or no"), column("xs", FLOATS))
    built = schema_of(columns)
    assert built.names == ["n", "flag", "xs"] and built.field("xs").type == pa.list_(pa.float64())
    assert describe(built) == [("n", "int64", "a count"), ("flag", "bool", "yes or no"), ("xs", "list<item: double>",
                                                                                          "")]


SCHEMA = schema_of((column("experiment", TEXT), column("n", INT), column("x", FLOAT), column("ok", FLAG),
                    column("kind", TEXT, "", ("a", "b")), column("xs", FLOATS), column("words", TEXTS, "", ("a", "b")),
                    column("names", TEXTS)))


@pytest.mark.parametrize("row", [
    {"experiment": "e", "n": 3, "x": 1.5, "ok": True, "kind": "a", "xs": [1.0, 2.0], "words": ["a", "b"]},
    {"n": np.int64(3), "x": np.float32(1.5), "ok": np.bool_(False), "xs": np.array([1.0]), "names": ("x", "y")},
    {"x": 2, "xs": [1, 2.5], "words": []},  # an integer is a fine float
    {"n": None, "x": None, "ok": None, "kind": None, "xs": None, "words": None},  # None fits every column
    {"x": float("nan")},
    {},
])
def test_rows_that_fit_are_stored_as_they_are(row):
    """A row the check lets through is one the results file holds: every value back as it was given."""
    check_row(row, SCHEMA)
    stored = pa.Table.from_pylist([row], schema=SCHEMA).to_pylist()[0]
    for name, value in row.items():
        given = list(value) if isinstance(value, (list, tuple, np.ndarray)) else value
        back = stored[name]
        assert back == given or (back != back and given != given), (name, given, back)  # NaN is NaN
    assert all(stored[name] is None for name in SCHEMA.names if name not in row)


@pytest.mark.parametrize("row, message", [
    ({"experiment": "e", "nope": 1}, "e row: column 'nope' is not declared"),
    ({"n": 1.0}, "column 'n' holds float 1.0, not int64"),
    ({"n": True}, "column 'n' holds bool"),  # a flag is not a number
    ({"n": "3"}, "column 'n' holds str"),
    ({"x": True}, "column 'x' holds bool"),
    ({"x": "1.5"}, "column 'x' holds str"),
    ({"ok": 1}, "column 'ok' holds int"),
    ({"ok": "true"}, "column 'ok' holds str"),
    ({"kind": 1}, "column 'kind' holds int"),
    ({"kind": "c"}, "column 'kind' holds 'c'; allowed: a, b"),
    ({"xs": 1.0}, "column 'xs' holds float"),
    ({"xs": [1.0, None]}, "column 'xs'"),
    ({"xs": [1.0, "2"]}, "column 'xs'"),
    ({"xs": "12"}, "column 'xs'"),
    ({"words": ["a", "c"]}, "column 'words' holds 'c'"),
    ({"names": [1]}, "column 'names'"),
])
def test_rows_that_do_not_fit(row, message):
    with pytest.raises(SchemaError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_row(row, SCHEMA)


def test_a_schema_error_names_the_experiment():
    with pytest.raises(SchemaError, match=r"^bandwidth row: column 'bytes'"):
        check_row({"experiment": "bandwidth", "bytes": 1.5}, schema_of((column("experiment", TEXT),
                                                                         column("bytes", INT))))
    with pytest.raises(SchemaError, match=r"^\? row"):
        check_row({"bytes": 1.5}, schema_of((column("bytes", INT),)))


def test_common_sample_and_monitor_columns_are_typed():
    types = {item.name: item.type for group in (COMMON, SAMPLES, RUN, MONITOR) for item in group}
    assert types["status"] == TEXT and types["samples"] == FLOATS and types["n_samples"] == INT
    assert types["gated"] == FLAG and types["throttled"] == FLAG and types["wall_s"] == FLOAT
    values = {item.name: item.values for group in (COMMON, SAMPLES) for item in group}
    assert set(values["status"]) == {"ok", "failed", "skipped", "unsupported"}
    assert set(values["unit"]) == {"ms", "us"} and set(values["clock"]) == {"gpu", "host"}
    assert set(values["stop_reason"]) == {"converged", "time_cap", "max_samples", "fixed"}
