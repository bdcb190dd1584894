"""Older results files brought up to today's: schema version 1 files (bench before the one-sample schema) are
converted on read to version 2 (:mod:`bench.results.version1`); version 2 files written before a column was added get
it, on disk, from ``python -m bench.cli.upgrade [DIRECTORY ...]`` (:func:`to_suite_schema`), so that every main table of
the version has the same columns and plain ``pandas.read_parquet`` or ``pyarrow.dataset`` drop none of them.
Its command is :mod:`bench.cli.upgrade`, which reads the registry of experiments and hands their schema down.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench.results import store
from bench.platform.errors import ResultsError


def main_tables(directory: Path) -> list[Path]:
    """Every main table of this schema version under ``directory``, in ``_`` and ``.`` subdirectories too (side
    tables, version 1 files and files that are not bench's are left alone)."""
    found = []
    for path in sorted(Path(directory).rglob("*.parquet")):
        try:
            metadata = store.read_metadata(path)
        except ResultsError:
            continue
        if metadata.get("schema_version", 1) == store.SCHEMA_VERSION and not metadata.get("table"):
            found.append(path)
    return found


def to_suite_schema(path: Path, schema: pa.Schema) -> bool:
    """Give the main table at ``path`` every column of today's suite ``schema``
    (:func:`bench.results.store.suite_schema`), in its order: a column the file lacks is added empty (null); each column
    it has keeps its values, type and description, and the file keeps its bench metadata byte for byte. False, writing
    nothing, when it has those columns already. ResultsError for a column the suite lacks or types differently: that
    takes a new schema version."""
    table = pq.read_table(path)
    for field in table.schema:
        if field.name not in schema.names or field.type != schema.field(field.name).type:
            raise ResultsError(f"{path}: column {field.name} ({field.type}) is not in today's suite schema as it is; "
                               "a schema change like that needs a new schema version, not an upgrade")
    if table.column_names == schema.names:
        return False
    fields = [table.schema.field(field.name) if field.name in table.column_names else field for field in schema]
    columns = [table[field.name] if field.name in table.column_names
               else pa.chunked_array([pa.nulls(len(table), field.type)]) for field in schema]
    upgraded = pa.Table.from_arrays(columns, schema=pa.schema(fields))
    metadata = {**table.schema.metadata, b"pandas": store.pandas_metadata(upgraded.schema)}
    store.write_table(path, upgraded.replace_schema_metadata(metadata))
    return True
