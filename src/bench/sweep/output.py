"""What a sweep writes: :class:`Output`, its results file (where, its schema and metadata, a resumed file's rows, this
run's, and what the file holds as last saved), saved atomically as it goes with its side tables; a save that fails
says what the file kept."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from bench.experiments import Experiment
from bench.platform.errors import WriteError
from bench.results import store
from bench.timing import Stopwatch


@dataclass
class Output:
    """The results file a sweep writes: where, its schema and metadata, a resumed file's rows and side-table rows, this
    run's, and what the file holds as last saved."""

    path: Path | None  # where it saves: a new run's first save may take the next free name
    schema: pa.Schema
    metadata: dict
    earlier: list[dict]  # a resumed file's rows
    earlier_tables: dict[str, list[dict]]
    own_file: bool  # path is this run's: resumed, or saved once
    rows: list[dict] = field(default_factory=list)  # this run's
    tables: dict[str, list[dict]] = field(default_factory=dict)
    saved: int = 0  # rows in path as last saved
    last_save: Stopwatch = field(default_factory=Stopwatch)

    def save(self, stamp: dict, experiments: Mapping[str, Experiment]) -> None:
        """Write the rows so far, then their side tables, with ``stamp`` (the file's metadata). A new run's first save
        takes a name no other run has (:func:`bench.results.store.write_table`); later saves rewrite that file.
        WriteError (a full disk) names the file that failed and what the results file kept."""
        rows = self.earlier + self.rows
        try:
            self.path = store.write(self.path, rows, self.schema, stamp, new=not self.own_file)
            self.own_file, self.saved = True, len(rows)
            for name in {*self.tables, *self.earlier_tables}:
                entries = self.earlier_tables.get(name, []) + self.tables.get(name, [])
                store.write(store.side_table_path(self.path, name), entries, store.table_schema(name, experiments),
                            {**stamp, "table": name})
        except WriteError as error:
            raise WriteError(f"{error}; {self.kept()}") from None

    def kept(self) -> str:
        """What the results file holds after a failed save, for its message."""
        measured = f"{len(self.rows)} configurations measured in this run"
        if not self.own_file:
            return f"nothing was written ({measured})"
        path = self.path
        return f"{path} keeps its last save, {self.saved} configurations ({measured}); --resume {path} finishes it"
