"""Results on disk: one tidy parquet table per run, a schema version in its metadata, atomic writes."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA_VERSION = 1
METADATA_KEY = b"bench"


class ResultsError(Exception):
    """A results file that cannot be used; the message is one line for the user."""


def write(path: Path, rows: Sequence[dict], metadata: dict) -> None:
    """Write ``rows`` to ``path`` atomically: a reader sees the old file or the new one, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = _table(rows)
    stamp = {"schema_version": SCHEMA_VERSION, **metadata}
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), METADATA_KEY: json.dumps(stamp)})
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


def _table(rows: Sequence[dict]) -> pa.Table:
    """Rows as an Arrow table. A column whose values mix types (experiments that disagree on a column's type)
    is stored as text rather than losing the sweep's rows."""
    frame = pd.DataFrame(list(rows))
    try:
        return pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        for column in frame.columns[frame.dtypes == object]:
            try:
                pa.array(frame[column], from_pandas=True)
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                frame[column] = [None if value is None or value != value else str(value) for value in frame[column]]
        return pa.Table.from_pandas(frame, preserve_index=False)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def read_metadata(path: Path) -> dict:
    """The bench metadata of a results file; ResultsError if it is unreadable, foreign or too new."""
    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException) as error:
        raise ResultsError(f"cannot read results file {path}: {error}") from None
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


def read(path: Path) -> pd.DataFrame:
    """A results file as one DataFrame (plain ``pandas.read_parquet`` works too; this also checks it)."""
    read_metadata(path)
    try:
        return pd.read_parquet(path)
    except (OSError, pa.ArrowException) as error:
        raise ResultsError(f"cannot read results file {path}: {error}") from None


def side_table_path(path: Path, name: str) -> Path:
    """Where a side table of a results file lives: ``<stem>.<name>.parquet`` beside it."""
    path = Path(path)
    return path.with_name(f"{path.stem}.{name}.parquet")


def read_side_tables(path: Path) -> dict[str, pd.DataFrame]:
    """The side tables written beside a results file, by name."""
    path = Path(path)
    found = {}
    for candidate in sorted(path.parent.glob(f"{path.stem}.*.parquet")):
        name = candidate.name[len(path.stem) + 1 : -len(".parquet")]
        if name and "." not in name:
            found[name] = read(candidate)
    return found


def newest(directory: Path) -> Path:
    """The newest results file in ``directory`` (names start with a UTC timestamp, so they sort by time)."""
    candidates = sorted(p for p in Path(directory).glob("*.parquet") if "." not in p.stem)
    if not candidates:
        raise ResultsError(f"no results files (*.parquet) in {directory}/; run 'python -m bench sweep' first")
    return candidates[-1]


def newest_rows(directory: Path, experiments: Sequence[str]) -> pd.DataFrame:
    """For each experiment, its rows from the newest results file in ``directory`` that has any (an empty frame
    when none has); files bench cannot read are passed over."""
    candidates = sorted((p for p in Path(directory).glob("*.parquet") if "." not in p.stem), reverse=True)
    found: dict[str, pd.DataFrame] = {}
    for candidate in candidates:
        wanted = [name for name in experiments if name not in found]
        if not wanted:
            break
        try:
            rows = read(candidate)
        except ResultsError:
            continue
        if "experiment" not in rows:
            continue
        for name in wanted:
            mine = rows[rows["experiment"] == name]
            if len(mine):
                found[name] = mine
    return pd.concat(found.values(), ignore_index=True) if found else pd.DataFrame()


def _results_files(directory: Path) -> list[Path]:
    return sorted(p for p in Path(directory).rglob("*.parquet") if "." not in p.stem)


def read_any(path: Path) -> pd.DataFrame:
    """A results file, or every results file under a directory as one frame (the rows carry their hostname, GPU
    UUID and run_id, so runs from many machines stay apart). ResultsError if there is nothing bench can read."""
    path = Path(path)
    if not path.is_dir():
        if not path.exists():
            raise ResultsError(f"cannot read results file {path}: no such file or directory")
        return read(path)
    files = _results_files(path)
    if not files:
        raise ResultsError(f"no results files (*.parquet) under {path}/")
    return pd.concat([read(file) for file in files], ignore_index=True)


def read_side_tables_any(path: Path) -> dict[str, pd.DataFrame]:
    """The side tables of a results file, or of every results file under a directory, by name."""
    path = Path(path)
    files = _results_files(path) if path.is_dir() else [path]
    tables: dict[str, list[pd.DataFrame]] = {}
    for file in files:
        for name, table in read_side_tables(file).items():
            tables.setdefault(name, []).append(table)
    return {name: pd.concat(parts, ignore_index=True) for name, parts in tables.items()}


def latest_runs(rows: pd.DataFrame) -> pd.DataFrame:
    """Of several runs of an experiment on one GPU, the newest (run ids are UTC timestamps); different GPUs and
    hosts all stay."""
    if not len(rows) or "run_id" not in rows:
        return rows
    machine = "gpu_uuid" if "gpu_uuid" in rows else "hostname" if "hostname" in rows else None
    keys = ["experiment", machine] if machine else ["experiment"]
    newest = rows.fillna({key: "" for key in keys}).groupby(keys)["run_id"].transform("max")
    return rows[rows["run_id"] == newest].reset_index(drop=True)


def top_level_files(directory: Path) -> list[Path]:
    """The results files directly in ``directory`` (not in its subdirectories)."""
    return sorted(p for p in Path(directory).glob("*.parquet") if "." not in p.stem)
