"""Results on disk: typed parquet, a schema version, atomic writes, and directories read as one dataset.

A results directory holds a parquet file per run (at any depth), each side table in ``_<table>/`` under its run's file
name, and anything else in directories whose names start with ``_`` or ``.``, which ``pandas.read_parquet(DIR)`` and
``pyarrow.dataset.dataset(DIR)`` pass over. Every main table of a schema version has the same columns
(:mod:`bench.results.schema`): the suite's are those of the experiments the caller hands in, for the store imports
none. Version 1 files are converted on read (:mod:`bench.results.version1`). Its writes are
:mod:`bench.results.writes`': never half a file, never through a symlink, and a new run's file never replaces another
file. The layout: docs/usage.md.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bench.platform.errors import ResultsError
from bench.results.schema import FLAG, INT, Column, RowCheck, column, schema_of, suite_columns
from bench.results.version1 import from_version_1
from bench.results.writes import kind_of, umask, write_file

SCHEMA_VERSION = 2
METADATA_KEY = b"bench"
HIDDEN_PREFIXES = ("_", ".")


# --- schemas ---------------------------------------------------------------------------------------------------

def suite_schema(experiments: Mapping) -> pa.Schema:
    """The main table's schema: every column of every experiment of ``experiments`` (name -> description: the
    registry, and a test's own experiments after it). Built once for the same experiments."""
    key = tuple((name, id(experiment)) for name, experiment in experiments.items())
    if key not in _SCHEMAS:
        _SCHEMAS[key] = schema_of(suite_columns(experiment.columns for experiment in experiments.values()))
    return _SCHEMAS[key]


_SCHEMAS: dict[tuple, pa.Schema] = {}


def table_schema(name: str, experiments: Mapping) -> pa.Schema:
    """A side table's schema: the run and the GPU, the experiment and its axes, then the table's own columns (of
    the ``experiments`` that declare the table)."""
    key = (name, *((label, id(experiment)) for label, experiment in experiments.items()))
    if key not in _TABLE_SCHEMAS:
        _TABLE_SCHEMAS[key] = _table_schema(name, experiments.values())
    return _TABLE_SCHEMAS[key]


_TABLE_SCHEMAS: dict[tuple, pa.Schema] = {}


def _table_schema(name: str, experiments: Iterable) -> pa.Schema:
    groups: list[Sequence[Column]] = []
    for experiment in experiments:
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

def write(path: Path, rows: Sequence[Mapping], schema: pa.Schema, metadata: Mapping, new: bool = False) -> Path:
    """Write ``rows`` to ``path`` atomically (a reader sees the old file or the new one, never half of one), after
    checking every row against ``schema`` (SchemaError names the first that does not fit). ``new``: see
    :func:`write_table`. Returns where it wrote."""
    check = RowCheck(schema)
    for row in rows:
        check(row)
    table = pa.Table.from_pylist([dict(row) for row in rows], schema=schema)
    stamp = {"schema_version": SCHEMA_VERSION, **metadata}
    table = table.replace_schema_metadata({b"pandas": pandas_metadata(schema), METADATA_KEY: json.dumps(stamp)})
    return write_table(path, table, new)


def write_declared(path: Path, rows: Iterable[Mapping], columns: Sequence[Column], table: str,
                   new: bool = False) -> Path:
    """``rows`` written as table ``table`` of the typed ``columns``, each row keeping the columns declared only (a
    script's rows carry a whole environment, of which a table declares some), through :func:`write`."""
    names = {item.name for item in columns}
    return write(path, [{name: value for name, value in row.items() if name in names} for row in rows],
                 schema_of(columns), {"table": table}, new)


def write_table(path: Path, table: pa.Table, new: bool = False) -> Path:
    """Write ``table``, its schema's metadata as it is, to ``path`` atomically, as shareable as any file of the
    user's (umask). ``new`` (a new run's file): never replace a file; where ``path`` is taken (another run of the
    same second), the first free ``<stem>_<n>.parquet`` beside it, which sorts after it. Returns where it wrote."""
    return write_file(path, functools.partial(pq.write_table, table), 0o666 & ~umask(), new)


@functools.lru_cache(maxsize=8)
def pandas_metadata(schema: pa.Schema) -> bytes:
    """pandas' own description of the columns, so that plain ``pandas.read_parquet`` gives integer columns as
    ``Int64`` and flags as ``boolean`` (nullable) instead of floats and objects where other experiments' rows
    leave them empty."""
    dtypes = {INT: "Int64", FLAG: "boolean", pa.float64(): "float64"}
    empty = pd.DataFrame({field.name: pd.Series(dtype=dtypes.get(field.type, "object")) for field in schema})
    return pa.Table.from_pandas(empty, schema=schema, preserve_index=False).schema.metadata[b"pandas"]


def side_table_path(path: Path, name: str) -> Path:
    """Where side table ``name`` of a results file lives: ``_<name>/<the file's name>`` beside it."""
    path = Path(path)
    return path.parent / f"_{name}" / path.name


# --- reading ---------------------------------------------------------------------------------------------------

def read_metadata(path: Path) -> dict:
    """The bench metadata of a file; ResultsError if it is unreadable, foreign or too new."""
    with _opened(path) as file:
        return _metadata(file.schema_arrow, path)


def _metadata(schema: pa.Schema, path: Path) -> dict:
    raw = (schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise ResultsError(f"{path} is not a bench results file (no bench metadata)")
    try:
        metadata = json.loads(raw)
    except ValueError:
        raise ResultsError(f"{path} has unreadable bench metadata") from None
    if not isinstance(metadata, dict) or not isinstance(metadata.get("schema_version", 1), int):
        raise ResultsError(f"{path} has unreadable bench metadata (not an object with a whole schema_version)")
    if metadata.get("schema_version", 0) > SCHEMA_VERSION:
        raise ResultsError(
            f"{path} has schema version {metadata['schema_version']}; this bench reads up to {SCHEMA_VERSION}"
        )
    return metadata


def named_tables(directory: Path, name: str, on_unreadable: OnUnreadable = None) -> pd.DataFrame:
    """The rows of every results file of table ``name`` (its metadata says so) in ``directory/_<name>/``: a
    command's own table (``bench syncs --save`` into ``results/_syncs/``), read as a side table is; none where there
    is no such directory. Files of another table there are passed over. The files are joined as Arrow tables and
    converted to pandas once (a conversion per file took twice as long), or one by one where their columns' types
    do not merge. ``on_unreadable``: see :data:`OnUnreadable`."""
    folder = Path(directory) / f"_{name}"
    files = [path for path in sorted(folder.glob("*.parquet")) if path.is_file()] if folder.is_dir() else []
    found = [(path, table) for path, tables in _readable(files, functools.partial(_table_named, name=name),
                                                         on_unreadable) for table in tables]
    if not found:
        return pd.DataFrame()
    paths, tables = zip(*found)
    try:
        return pa.concat_tables(tables, promote_options="permissive").to_pandas(types_mapper=PANDAS_TYPES.get)
    except pa.ArrowException:
        return pd.concat([_pandas(table, path) for table, path in zip(tables, paths)], ignore_index=True)


def _table_named(path: Path, name: str) -> list[pa.Table]:
    """The file's table where its metadata names it table ``name``, else none."""
    with _opened(path) as file:
        return [file.read()] if _metadata(file.schema_arrow, path).get("table") == name else []


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[pq.ParquetFile]:
    """``path`` as one parquet file, its footer read (schema and metadata), closed on leaving; ResultsError where it
    cannot be opened or read. Read as one file: through pyarrow's datasets (``pq.read_table``) a results file took
    about half as long again. Anything but a regular file (a pipe, a device, a socket) is refused unopened: opening
    one could wait for ever."""
    if not Path(path).is_file():
        why = f"it is {kind_of(path)}, not a regular file" if Path(path).exists() else "no such file or directory"
        raise ResultsError(f"cannot read results file {path}: {why}")
    try:  # opened by Python: Arrow takes only names that are UTF-8
        with open(path, "rb") as source, pq.ParquetFile(source) as file:
            yield file
    except (OSError, pa.ArrowException) as error:
        raise ResultsError(f"cannot read results file {path}: {_first_line(error)}") from None


def _frame(path: Path) -> pd.DataFrame:
    with _opened(path) as file:
        return _pandas(file.read(), path)


def _pandas(table: pa.Table, path: Path) -> pd.DataFrame:
    """``table`` (read from ``path``) as pandas, typed by :data:`PANDAS_TYPES`."""
    try:
        return table.to_pandas(types_mapper=PANDAS_TYPES.get)
    except (pa.ArrowException, ValueError, TypeError, KeyError) as error:  # pandas' metadata in the file is broken
        raise ResultsError(f"cannot read results file {path}: {_first_line(error)}") from None


TEXT = pd.StringDtype("python", na_value=np.nan)  # pandas' str, its values Python strings: rows select quickly
PANDAS_TYPES = {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype(), pa.string(): TEXT, pa.large_string(): TEXT}
"""How results read into pandas: integers and flags nullable; text as :data:`TEXT` (an Arrow-backed column copies
each selection of rows through Arrow, several times slower for the many text columns of a results frame)."""


def read(path: Path, schema: pa.Schema) -> pd.DataFrame:
    """A results file's main table as one DataFrame, typed by ``schema`` (the suite's, :func:`suite_schema`):
    integer columns as ``Int64`` and flags as ``boolean`` (nullable), a version 1 file converted to the suite's
    columns. ResultsError for a side table or a file without rows of bench experiments."""
    with _opened(path) as file:
        metadata = _metadata(file.schema_arrow, path)
        if metadata.get("table"):
            raise ResultsError(f"{path} is the side table {metadata['table']!r} of a results file, not a results file")
        rows = _pandas(file.read(), path)
    if len(rows.columns) and not {"experiment", "status"} <= set(rows.columns):
        raise ResultsError(f"{path} holds no bench result rows (no experiment and status columns)")
    try:
        if metadata.get("schema_version", 1) < 2:
            rows = from_version_1(rows).reindex(columns=schema.names)  # exactly today's columns
        return typed(rows, schema)
    except (KeyError, ValueError, TypeError) as error:  # a file that says it is bench's but is not as bench writes
        raise ResultsError(f"cannot read results file {path}: a column is not as bench writes it "
                           f"({type(error).__name__}: {_first_line(error)})") from None


def read_table(path: Path) -> pd.DataFrame:
    """A side table (``_timeline/...``)."""
    with _opened(path) as file:
        if not _metadata(file.schema_arrow, path).get("table"):
            raise ResultsError(f"{path} is a results file, not a side table")
        return _pandas(file.read(), path)


def typed(rows: pd.DataFrame, schema: pa.Schema) -> pd.DataFrame:
    """Integer and flag columns of ``schema`` as nullable pandas types (older files stored them as floats or
    text); other columns as they are."""
    if not len(rows):
        return rows
    dtypes, changes = rows.dtypes.to_dict(), {}
    for field in schema:
        if field.name not in dtypes:
            continue
        dtype = str(dtypes[field.name])
        if field.type == INT and dtype != "Int64":
            changes[field.name] = pd.array([None if _absent(v) else int(v) for v in rows[field.name]], dtype="Int64")
        elif field.type == FLAG and dtype != "boolean":
            changes[field.name] = pd.array([_flag(v) for v in rows[field.name]], dtype="boolean")
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


OnUnreadable = Callable[[ResultsError], object] | None
"""Hears of each file of a directory that bench cannot read, which is then passed over; None: raise."""


def _readable(paths: Sequence[Path], reader: Callable[[Path], object],
              on_unreadable: OnUnreadable) -> Iterator[tuple[Path, object]]:
    """(path, what ``reader`` made of it) for each of ``paths`` it can read (see :data:`OnUnreadable`)."""
    for path in paths:
        try:
            value = reader(path)
        except ResultsError as error:
            if on_unreadable is None:
                raise
            on_unreadable(error)
            continue
        yield path, value


def read_any(path: Path, schema: pa.Schema, on_unreadable: OnUnreadable = None) -> pd.DataFrame:
    """A results file, or every results file under a directory (:func:`results_files`: at any depth, but not under
    ``_`` or ``.`` names) as one frame, typed by ``schema`` (see :func:`read`); the rows carry their hostname, GPU
    UUID and run_id, so runs from many machines stay apart. ``on_unreadable``: see :data:`OnUnreadable` (a file
    named itself must be readable). ResultsError if there is nothing bench can read."""
    path = Path(path)
    if not path.exists():
        raise ResultsError(f"cannot read results file {path}: no such file or directory")
    if not path.is_dir():
        return read(path, schema)
    files = results_files(path)
    if not files:
        raise ResultsError(f"no results files (*.parquet) under {path}/")
    frames = [rows for _, rows in _readable(files, functools.partial(read, schema=schema), on_unreadable)]
    if not frames:
        raise ResultsError(f"no results file under {path}/ could be read")
    return pd.concat(frames, ignore_index=True)


def side_tables_any(path: Path, on_unreadable: OnUnreadable = None) -> dict[str, pd.DataFrame]:
    """The side tables of a results file, or of every results file under a directory, by name; ``on_unreadable``:
    see :data:`OnUnreadable`."""
    path = Path(path)
    files = results_files(path) if path.is_dir() else [path]
    tables: dict[str, list[pd.DataFrame]] = {}
    for _, found in _readable(files, side_tables, on_unreadable):
        for name, table in found.items():
            tables.setdefault(name, []).append(table)
    return {name: pd.concat(parts, ignore_index=True) for name, parts in tables.items()}


def _direct_files(directory: Path) -> list[Path]:
    """The results files directly in ``directory``, oldest first (names start with a UTC timestamp, so they sort;
    of two runs of one second, the second's name has a ``_2`` after the first's)."""
    return [path for path in results_files(directory) if path.parent == Path(directory)]


def newest(directory: Path) -> Path:
    """The newest results file directly in ``directory``."""
    candidates = _direct_files(directory)
    if not candidates:
        raise ResultsError(f"no results files (*.parquet) in {directory}/; run 'python -m bench sweep' first")
    return candidates[-1]


def read_newest(directory: Path, schema: pa.Schema, on_unreadable: OnUnreadable = None) -> tuple[Path, pd.DataFrame]:
    """The newest results file directly in ``directory`` that bench can read, and its rows (typed by ``schema``);
    ``on_unreadable`` hears of each newer one passed over (None: the newest must be readable)."""
    newest(directory)  # ResultsError when there is none
    for path, rows in _readable(_direct_files(directory)[::-1], functools.partial(read, schema=schema), on_unreadable):
        return path, rows
    raise ResultsError(f"no results file in {directory}/ could be read")


def newest_rows(directory: Path, schema: pa.Schema, experiments: Sequence[str],
                on_unreadable: OnUnreadable = None) -> pd.DataFrame:
    """For each experiment, its rows from the newest results file directly in ``directory`` that has any (an empty
    frame when none has), typed by ``schema``; ``on_unreadable``: see :data:`OnUnreadable`."""
    found: dict[str, pd.DataFrame] = {}
    for _, rows in _readable(_direct_files(directory)[::-1], functools.partial(read, schema=schema), on_unreadable):
        for name in [name for name in experiments if name not in found]:
            mine = rows[rows["experiment"] == name] if "experiment" in rows else rows.iloc[0:0]
            if len(mine):
                found[name] = mine
        if len(found) == len(experiments):
            break
    return pd.concat(found.values(), ignore_index=True) if found else pd.DataFrame()
