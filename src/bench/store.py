"""Results on disk: typed parquet, a schema version, atomic writes, and directories read as one dataset.

Layout of a results directory (what ``pandas.read_parquet(DIR)`` and ``pyarrow.dataset.dataset(DIR)`` read as one
table, since both pass over names that start with ``_`` or ``.``)::

    results/
      20261121T145904Z-NVIDIA-H200.parquet     one run's rows (the main table)
      fleet/node-a/20261121T145904Z-NVIDIA-H200.parquet    runs in subdirectories, at any depth (a node's sweep)
      _timeline/20261121T145904Z-NVIDIA-H200.parquet    its side table "timeline", same file name
      _logs/  _superseded/  ...                 anything else: logs, references, older runs

Every main table of a schema version has the same columns (:mod:`bench.schema`), so runs of different experiments
read together. Version 1 files (bench before the one-sample schema) are converted on read.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bench.errors import ResultsError
from bench.schema import FLAG, INT, Column, check_row, column, schema_of, suite_columns

SCHEMA_VERSION = 2
METADATA_KEY = b"bench"
HIDDEN_PREFIXES = ("_", ".")


# --- schemas ---------------------------------------------------------------------------------------------------

def suite_schema(extra: Sequence = ()) -> pa.Schema:
    """The main table's schema: every column of every registered experiment (and of ``extra`` experiments, such
    as a test's)."""
    from bench.experiments import registry

    experiments = {**registry(), **{experiment.name: experiment for experiment in extra}}
    key = tuple((name, id(experiment)) for name, experiment in experiments.items())
    if key not in _SCHEMAS:
        _SCHEMAS[key] = schema_of(suite_columns(experiment.columns for experiment in experiments.values()))
    return _SCHEMAS[key]


_SCHEMAS: dict[tuple, pa.Schema] = {}


@functools.cache
def table_schema(name: str) -> pa.Schema:
    """A side table's schema: the run and the GPU, the experiment and its axes, then the table's own columns."""
    from bench.experiments import registry

    groups: list[Sequence[Column]] = []
    for experiment in registry().values():
        if name in experiment.tables:
            axes = [item for item in experiment.columns if item.name in experiment.axes]
            groups += [axes, experiment.tables[name]]
    if not groups:
        raise KeyError(f"no experiment declares a side table {name!r}")
    head = (column("experiment", pa.string(), "the experiment that measured the row"),
            column("run_id", pa.string(), "the sweep that measured the row"),
            column("gpu_uuid", pa.string(), "the GPU that measured the row (a sweep of several GPUs has one run_id)"),
            column("hostname", pa.string(), "the host of that GPU"))
    merged: dict[str, Column] = {item.name: item for item in head}
    for group in groups:
        for item in group:
            merged.setdefault(item.name, item)
    return schema_of(list(merged.values()))


# --- writing ---------------------------------------------------------------------------------------------------

def write(path: Path, rows: Sequence[Mapping], schema: pa.Schema, metadata: Mapping) -> None:
    """Write ``rows`` to ``path`` atomically (a reader sees the old file or the new one, never half of one), after
    checking every row against ``schema`` (SchemaError names the first that does not fit)."""
    for row in rows:
        check_row(row, schema)
    table = pa.Table.from_pylist([dict(row) for row in rows], schema=schema)
    stamp = {"schema_version": SCHEMA_VERSION, **metadata}
    table = table.replace_schema_metadata({b"pandas": _pandas_metadata(schema), METADATA_KEY: json.dumps(stamp)})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as sink:
            pq.write_table(table, sink)
            sink.flush()
            os.fsync(sink.fileno())
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp makes 0600; a results file is as shareable as any other
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_bytes(path: Path, content: bytes) -> None:
    """Write ``content`` to ``path`` atomically (temporary file, then rename), readable by everyone."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as sink:
            sink.write(content)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@functools.lru_cache(maxsize=8)
def _pandas_metadata(schema: pa.Schema) -> bytes:
    """pandas' own description of the columns, so that plain ``pandas.read_parquet`` gives integer columns as
    ``Int64`` and flags as ``boolean`` (nullable) instead of floats and objects where other experiments' rows
    leave them empty."""
    dtypes = {INT: "Int64", FLAG: "boolean", pa.float64(): "float64"}
    empty = pd.DataFrame({field.name: pd.Series(dtype=dtypes.get(field.type, "object")) for field in schema})
    return pa.Table.from_pandas(empty, schema=schema, preserve_index=False).schema.metadata[b"pandas"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def side_table_path(path: Path, name: str) -> Path:
    """Where side table ``name`` of a results file lives: ``_<name>/<the file's name>`` beside it."""
    path = Path(path)
    return path.parent / f"_{name}" / path.name


# --- reading ---------------------------------------------------------------------------------------------------

def read_metadata(path: Path) -> dict:
    """The bench metadata of a file; ResultsError if it is unreadable, foreign or too new."""
    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException) as error:
        raise ResultsError(f"cannot read results file {path}: {_first_line(error)}") from None
    raw = (schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise ResultsError(f"{path} is not a bench results file (no bench metadata)")
    try:
        metadata = json.loads(raw)
    except ValueError:
        raise ResultsError(f"{path} has unreadable bench metadata") from None
    if metadata.get("schema_version", 0) > SCHEMA_VERSION:
        raise ResultsError(
            f"{path} has schema version {metadata['schema_version']}; this bench reads up to {SCHEMA_VERSION}"
        )
    return metadata


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _frame(path: Path) -> pd.DataFrame:
    try:
        return pq.read_table(path).to_pandas(types_mapper=_PANDAS_TYPES.get)
    except (OSError, pa.ArrowException) as error:
        raise ResultsError(f"cannot read results file {path}: {_first_line(error)}") from None


_PANDAS_TYPES = {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}


def read(path: Path) -> pd.DataFrame:
    """A results file's main table as one DataFrame, typed: integer columns as ``Int64`` and flags as
    ``boolean`` (nullable), a version 1 file converted. ResultsError for a side table or a file without rows of
    bench experiments."""
    metadata = read_metadata(path)
    if metadata.get("table"):
        raise ResultsError(f"{path} is the side table {metadata['table']!r} of a results file, not a results file")
    rows = _frame(path)
    if len(rows.columns) and not {"experiment", "status"} <= set(rows.columns):
        raise ResultsError(f"{path} holds no bench result rows (no experiment and status columns)")
    schema = suite_schema()
    if metadata.get("schema_version", 1) < 2:
        from bench.upgrade import from_version_1

        rows = from_version_1(rows).reindex(columns=schema.names)  # exactly today's columns
    return typed(rows, schema)


def read_table(path: Path) -> pd.DataFrame:
    """A side table (``_timeline/...``)."""
    metadata = read_metadata(path)
    if not metadata.get("table"):
        raise ResultsError(f"{path} is a results file, not a side table")
    return _frame(path)


def typed(rows: pd.DataFrame, schema: pa.Schema) -> pd.DataFrame:
    """Integer and flag columns of ``schema`` as nullable pandas types (older files stored them as floats or
    text); other columns as they are."""
    changes = {}
    for field in schema:
        if field.name not in rows or not len(rows):
            continue
        values = rows[field.name]
        if field.type == INT and str(values.dtype) != "Int64":
            changes[field.name] = pd.array([None if _absent(v) else int(v) for v in values], dtype="Int64")
        elif field.type == FLAG and str(values.dtype) != "boolean":
            changes[field.name] = pd.array([_flag(v) for v in values], dtype="boolean")
    return rows.assign(**changes) if changes else rows


def records(rows: pd.DataFrame) -> list[dict]:
    """Rows read back as plain Python values (None where empty), as an experiment would have yielded them: ready to
    be checked and written again (a resumed sweep rewrites its earlier rows)."""
    return [{name: _plain(value) for name, value in record.items()} for record in rows.to_dict("records")]


def _plain(value):
    if isinstance(value, np.ndarray):
        return [_plain(item) for item in value.tolist()]
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if _absent(value):
        return None
    return value.item() if isinstance(value, np.generic) else value


def _absent(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)


def _flag(value):
    if _absent(value) or value == "":
        return None
    if isinstance(value, str):
        return {"true": True, "false": False}[value.lower()]
    return bool(value)


def side_tables(path: Path) -> dict[str, pd.DataFrame]:
    """The side tables of a results file, by name (in ``_<name>/`` beside it, or ``<stem>.<name>.parquet`` for
    version 1 files)."""
    path = Path(path)
    found = {}
    for directory in sorted(path.parent.glob("_*")):
        candidate = directory / path.name
        if candidate.is_file():
            found[directory.name[1:]] = read_table(candidate)
    for candidate in sorted(path.parent.glob(f"{path.stem}.*.parquet")):  # version 1
        name = candidate.name[len(path.stem) + 1: -len(".parquet")]
        if name and "." not in name:
            found[name] = _frame(candidate)
    return found


def is_hidden(path: Path, below: Path) -> bool:
    return any(part.startswith(HIDDEN_PREFIXES) for part in path.relative_to(below).parts)


def results_files(directory: Path) -> list[Path]:
    """The results files under ``directory``, in subdirectories too, passing over names that start with ``_`` or
    ``.`` (side tables, logs, superseded runs) and version 1 side tables (``<stem>.<name>.parquet``)."""
    directory = Path(directory)
    return sorted(path for path in directory.rglob("*.parquet")
                  if not is_hidden(path, directory) and "." not in path.stem)


def read_any(path: Path) -> pd.DataFrame:
    """A results file, or every results file under a directory (:func:`results_files`: at any depth, but not under
    ``_`` or ``.`` names) as one frame; the rows carry their hostname, GPU UUID and run_id, so runs from many
    machines stay apart. ResultsError if there is nothing bench can read."""
    path = Path(path)
    if not path.exists():
        raise ResultsError(f"cannot read results file {path}: no such file or directory")
    if not path.is_dir():
        return read(path)
    files = results_files(path)
    if not files:
        raise ResultsError(f"no results files (*.parquet) under {path}/")
    return pd.concat([read(file) for file in files], ignore_index=True)


def side_tables_any(path: Path) -> dict[str, pd.DataFrame]:
    """The side tables of a results file, or of every results file under a directory, by name."""
    path = Path(path)
    files = results_files(path) if path.is_dir() else [path]
    tables: dict[str, list[pd.DataFrame]] = {}
    for file in files:
        for name, table in side_tables(file).items():
            tables.setdefault(name, []).append(table)
    return {name: pd.concat(parts, ignore_index=True) for name, parts in tables.items()}


def newest(directory: Path) -> Path:
    """The newest results file directly in ``directory`` (names start with a UTC timestamp, so they sort)."""
    candidates = [path for path in results_files(directory) if path.parent == Path(directory)]
    if not candidates:
        raise ResultsError(f"no results files (*.parquet) in {directory}/; run 'python -m bench sweep' first")
    return candidates[-1]


def newest_rows(directory: Path, experiments: Sequence[str]) -> pd.DataFrame:
    """For each experiment, its rows from the newest results file directly in ``directory`` that has any (an empty
    frame when none has); files bench cannot read are passed over."""
    candidates = [path for path in results_files(directory) if path.parent == Path(directory)]
    found: dict[str, pd.DataFrame] = {}
    for candidate in reversed(candidates):
        wanted = [name for name in experiments if name not in found]
        if not wanted:
            break
        try:
            rows = read(candidate)
        except ResultsError:
            continue
        for name in wanted:
            mine = rows[rows["experiment"] == name] if "experiment" in rows else rows.iloc[0:0]
            if len(mine):
                found[name] = mine
    return pd.concat(found.values(), ignore_index=True) if found else pd.DataFrame()
