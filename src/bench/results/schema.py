"""Result columns: each one's Arrow type, what it holds and, for a few, the only values it may take.

Every results file of a bench version has the same schema: the columns every row has (:data:`COMMON`, the sample
columns, the monitor's and the environment's) and every registered experiment's own, in a fixed order. Rows of one
experiment leave the others' columns empty (null), so whole numbers stay integers and flags stay booleans however
experiments share a file, and ``pandas.read_parquet`` or ``pyarrow.dataset`` read a directory of runs as one table.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from bench.platform.vocabulary import Clock, Status, StopReason, Unit, values

INT, FLOAT, TEXT, FLAG = pa.int64(), pa.float64(), pa.string(), pa.bool_()
FLOATS, TEXTS = pa.list_(pa.float64()), pa.list_(pa.string())
STATUSES = values(Status)
UNITS, CLOCKS, STOP_REASONS = values(Unit), values(Clock), values(StopReason)


class SchemaError(ValueError):
    """A row that does not fit the schema; the message names the row's experiment and the column."""


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    doc: str = ""
    values: tuple[str, ...] = ()  # the only values a text column (or the items of a text list) may hold

    def field(self) -> pa.Field:
        metadata = {b"doc": self.doc.encode()}
        if self.values:
            metadata[b"values"] = json.dumps(list(self.values)).encode()
        return pa.field(self.name, self.type, nullable=True, metadata=metadata)


def column(name: str, type: pa.DataType, doc: str = "", values: Sequence[str] = ()) -> Column:
    return Column(name, type, doc, tuple(values))


COMMON = (
    column("experiment", TEXT, "the experiment that measured the row"),
    column("status", TEXT, "ok, failed (error says why), skipped (out of memory) or unsupported (the runtime "
                           "refused)", STATUSES),
    column("error", TEXT, "why a row is not ok"),
)

SAMPLES = (
    column("samples", FLOATS, "every raw sample, in unit"),
    column("unit", TEXT, "unit of samples, median, min and max", tuple(UNITS)),
    column("clock", TEXT, "the clock that read the samples: CUDA events or the GPU's global timer (gpu), or the "
                          "host's wall clock (host)", CLOCKS),
    column("metric", TEXT, "what one sample is"),
    column("n_samples", INT, "number of samples"),
    column("ops_per_sample", INT, "operations one sample was averaged over"),
    column("gated", FLAG, "GPU samples: the work waited behind the gate until the host had enqueued all of it"),
    column("median", FLOAT, "median of samples"),
    column("min", FLOAT, "fastest sample"),
    column("max", FLOAT, "slowest sample"),
    column("stdrel", FLOAT, "sample standard deviation / mean"),
    column("median_relerr", FLOAT, "robust standard error of the median / median"),
    column("stop_reason", TEXT, "why sampling stopped", STOP_REASONS),
)

RUN = (
    column("run_id", TEXT, "the sweep that measured the row: its UTC start time and process id (older files: the "
                           "time alone)"),
    column("wall_s", FLOAT, "seconds the harness spent on the configuration"),
    column("stop_scale", FLOAT, "how far the sweep scaled the stop rule's time cap down from its plan (the file's "
                                "stop_rules) to keep to its time budget on this machine (older files: its minimum "
                                "samples too); 1: as planned"),
    column("floor_met", FLAG, "the samples meet the experiment's accuracy floor (the file's floors: enough samples, "
                              "or a 95% interval of the median narrow enough); false: read the row as unclear"),
    column("concurrent_gpus", INT, "the most experiments measuring on the sweep's GPUs at the same time as this row, its "
                                   "own included (a sweep of several GPUs); 1: alone"),
)

MONITOR = (
    column("sm_clock_seen_mhz", INT, "lowest SM clock NVML reported around the configuration"),
    column("throttle_reasons", TEXT, "NVML clock-event reasons that slow the GPU, seen around the configuration"),
    column("throttled", FLAG, "any throttle reason was active around the configuration"),
    column("other_processes", INT, "processes besides bench's own using the GPU around the configuration"),
)


def environment_columns() -> tuple[Column, ...]:
    """The environment every row records, typed from :class:`bench.platform.env.Environment`; then the version of each
    GPU library that is not a field there (:mod:`bench.platform.libraries`), which the rows that measured it or ran with
    it loaded record."""
    from bench.platform.env import Environment
    from bench.platform.libraries import LIBRARIES

    types = {"int": INT, "str": TEXT}
    fields = tuple(column(field.name, types[field.type], field.metadata.get("doc", ""))
                   for field in Environment.fields())
    names = {item.name for item in fields}
    return fields + tuple(column(library.version_column, TEXT, library.version_doc) for library in LIBRARIES
                          if library.version_column not in names)


def suite_columns(experiment_columns: Iterable[Sequence[Column]]) -> tuple[Column, ...]:
    """Every column, in file order: identity, each experiment's own, samples, run, monitor, environment. A name two
    experiments declare with different types is a programming error (SchemaError)."""
    chosen: dict[str, Column] = {}
    for group in (COMMON, *experiment_columns, SAMPLES, RUN, MONITOR, environment_columns()):
        for item in group:
            known = chosen.get(item.name)
            if known is None:
                chosen[item.name] = item
            elif known.type != item.type:
                raise SchemaError(f"column {item.name!r} is declared as {known.type} and as {item.type}")
            elif set(item.values) != set(known.values):  # the union; a column that one leaves open stays open
                values = tuple(dict.fromkeys(known.values + item.values)) if item.values and known.values else ()
                chosen[item.name] = dataclasses.replace(known, values=values)
    return tuple(chosen.values())


def schema_of(columns: Sequence[Column]) -> pa.Schema:
    return pa.schema([item.field() for item in columns])


def allowed_values(field: pa.Field) -> tuple[str, ...]:
    raw = (field.metadata or {}).get(b"values")
    return tuple(json.loads(raw)) if raw else ()


def _is_int(value) -> bool:
    kind = type(value)  # int first: an abstract class's isinstance is slow, and rows hold thousands of numbers
    return kind is int or (kind is not bool and isinstance(value, numbers.Integral))


def _is_float(value) -> bool:
    kind = type(value)
    return kind is float or kind is int or (kind is not bool and isinstance(value, numbers.Real))


def _is_flag(value) -> bool:
    return isinstance(value, (bool, np.bool_))


def _is_text(value) -> bool:
    return isinstance(value, str)


_SCALARS = {INT: _is_int, FLOAT: _is_float, FLAG: _is_flag, TEXT: _is_text}


def _fits(column_type: pa.DataType) -> Callable[[object], bool]:
    """Whether a value fits a column of ``column_type`` (a list: a list, tuple or array of fitting items)."""
    if pa.types.is_list(column_type):
        fits_item = _fits(column_type.value_type)
        return lambda value: isinstance(value, (list, tuple, np.ndarray)) and all(
            item is not None and fits_item(item) for item in value)
    return _SCALARS.get(column_type, lambda value: False)


def check_row(row: Mapping, schema: pa.Schema) -> None:
    """Raise SchemaError unless every value of ``row`` fits its column: declared, of the column's type (integers
    for integer columns, booleans for flags; None is allowed everywhere), and one of its allowed values. Checking
    many rows against one schema: :class:`RowCheck`."""
    RowCheck(schema)(row)


class RowCheck:
    """:func:`check_row` against one schema, each column's type test and allowed values made once (a writer checks
    thousands of rows)."""

    def __init__(self, schema: pa.Schema):
        self.columns = {field.name: (field.type, _fits(field.type), allowed_values(field),
                                     pa.types.is_list(field.type)) for field in schema}

    def __call__(self, row: Mapping) -> None:
        experiment = row.get("experiment", "?")
        for name, value in row.items():
            column = self.columns.get(name)
            if column is None:
                raise SchemaError(f"{experiment} row: column {name!r} is not declared in the schema")
            if value is None:
                continue
            column_type, fits, allowed, is_list = column
            if not fits(value):
                raise SchemaError(f"{experiment} row: column {name!r} holds {type(value).__name__} {value!r:.60}, "
                                  f"not {column_type}")
            for item in (value if is_list else [value]) if allowed else ():
                if item not in allowed:
                    raise SchemaError(f"{experiment} row: column {name!r} holds {item!r}; allowed: "
                                      f"{', '.join(allowed)}")


def describe(schema: pa.Schema) -> list[tuple[str, str, str]]:
    """(name, type, what it holds) for every column: the data dictionary."""
    return [(field.name, str(field.type), (field.metadata or {}).get(b"doc", b"").decode()) for field in schema]
