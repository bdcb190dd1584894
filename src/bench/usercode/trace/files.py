"""Results files of table ``trace`` (``bench trace --save``): one row per kernel, copy, memset, idle gap and host wait
of the described run, each with the trace's headline numbers, its GPU's own (``gpu_*``) and the environment. A row keeps
what :mod:`bench.usercode.trace.load` needs to read the trace back and :mod:`bench.usercode.trace.merge` to put it on
one clock with other ranks' traces: its GPU, its rank, the run's origin on CUPTI's clock, the call that made it."""

from __future__ import annotations

import datetime
import math
from collections.abc import Sequence

from bench.usercode.trace.model import Trace
from bench.usercode.trace.overlap import GAP_NS

TABLE = "trace"
SUMMARY_DOCS = {
    "makespan_ms": "first start to last end on the GPU of the described run: the traced run of median makespan (the "
                   "lower middle one of an even count)",
    "bound_ms": "the least time the same work can take with perfect overlap on this GPU",
    "efficiency": "bound_ms / makespan_ms",
    "hidden": "share of H2D and D2H copy time during which a kernel or memset ran",
    "fill_ms": "from the first GPU start until a kernel or memset first ran",
    "drain_ms": "from the last kernel's or memset's end to the last GPU end",
    "busy_compute_ms": "time kernels or memsets ran", "busy_H2D_ms": "time H2D copies ran",
    "busy_D2H_ms": "time D2H copies ran", "busy_D2D_ms": "time D2D copies ran",
    "copy_ms": "time H2D or D2H copies ran", "hidden_ms": "of copy_ms, the time compute ran too",
    "duplex_ms": "time H2D and D2H copies ran at once",
    "concurrent_kernels_ms": "time two or more kernels ran at once",
    "comm_ms": "time NCCL's kernels (communication) ran",
    "comm_hidden_ms": "of comm_ms, the time compute ran on the same GPU",
    "comm_hidden": "comm_hidden_ms / comm_ms: communication hidden behind compute (HTA's overlap)",
    "comm_exposed_ms": "comm_ms - comm_hidden_ms: communication with no compute beside it",
    "comm_idle_ms": "of comm_exposed_ms, the time between the GPU's first and last compute: compute stood idle",
    "idle_ms": f"time nothing ran, in gaps of {GAP_NS / 1000:g} µs or more",
    "pageable_cost_ms": "pageable copies' time beyond pinned copies of their sizes",
    "overhead": "traced runs' host time over untraced runs', less one",
    "bound_compute_ms": "the bound's compute term (of several GPUs, the largest)",
    "bound_copies_ms": "the bound's term of H2D and D2H copies at pinned speed (the largest of any GPU)",
    "bound_D2D_ms": "the bound's term of D2D copies (the largest of any GPU)",
}  # the headline numbers every row carries: summary() names, each with what it is; of several GPUs, times summed
SUMMARY = tuple(SUMMARY_DOCS)
GPU_DOCS = {"makespan_ms": "first start to last end on the row's GPU", "busy_compute_ms": "time compute ran on it",
            "hidden": "share of its H2D and D2H copy time during which compute ran on it",
            "comm_ms": "time NCCL's kernels ran on it", "comm_hidden": "its communication hidden behind its compute",
            "comm_exposed_ms": "its communication with no compute beside it",
            "comm_idle_ms": "its compute idle during exposed communication",
            "idle_ms": "time nothing ran on it, in gaps", "bound_ms": "its bound", "efficiency": "its bound / makespan"}
GPU_COLUMNS = {f"gpu_{name}": name for name in GPU_DOCS}  # column -> GpuFigures.as_dict() name
RUNS = {"makespan_runs_ms": "makespan_ms", "efficiency_runs": "efficiency", "hidden_runs": "hidden",
        "idle_runs_ms": "idle_ms", "pageable_cost_runs_ms": "pageable_cost_ms",
        "comm_hidden_runs": "comm_hidden"}  # column -> RunFigures field
KERNEL_RUNS = "name_runs_ms"


def columns() -> tuple:
    """The typed columns of a ``trace`` results file: one row per kernel, copy, memset, idle gap and host wait of the
    described run, each with the trace's headline numbers and the environment."""
    from bench.results.schema import FLOAT, FLOATS, INT, TEXT, column, environment_columns

    return (
        column("target", TEXT, "what was traced: MODULE:FUNCTION, a script, or a name the caller gave"),
        column("traced_at", TEXT, "when the results file was written (UTC, ISO 8601)"),
        column("op", TEXT, "kernel, memset, H2D, D2H, D2D, H2H, P2P; idle (a gap of the GPU) or wait (a host call)"),
        column("device", INT, "the GPU that ran it (CUPTI's device id; empty for a wait)"),
        column("rank", INT, "the rank (process) that traced it, where ranks traced at once (torchrun's RANK)"),
        column("stream", INT, "the CUDA stream's id (idle: -1, wait: -2)"),
        column("start_ms", FLOAT, "start, ms after the run's first GPU start (CUPTI's clock)"),
        column("end_ms", FLOAT, "end, ms after the run's first GPU start"),
        column("bytes", INT, "bytes a copy or memset moved"),
        column("host_memory", TEXT, "a copy's host memory: pinned, pageable, managed; device, array or unknown for "
                                    "copies without a host side"),
        column("name", TEXT, "a kernel's name"),
        column("call", TEXT, "the driver call that made it, or that the host was in (idle, wait)"),
        column("line", TEXT, "the user's line of that call (FILE:LINE), where its stack was kept"),
        column("correlation", INT, "CUPTI's correlation id of the record and of the call that made it"),
        column("call_start_ms", FLOAT, "that call's host start, ms after the run's first GPU start"),
        column("call_end_ms", FLOAT, "that call's host end"),
        column("pinned_ms", FLOAT, "a pageable copy's row: one pinned copy of its size on this GPU"),
        column("origin_ns", INT, "the run's first GPU start on CUPTI's clock (ns): where start_ms is 0"),
        column("runs", INT, "traced runs; the one of median makespan is described"),
        column("gpus", INT, "the GPUs the trace ran on"),
        column("copy_engines", INT, "the copy engines the copies' bound counted"),
        *(column(name, FLOAT, doc) for name, doc in SUMMARY_DOCS.items()),
        *(column(name, FLOAT, f"the row's GPU: {GPU_DOCS[figure]}") for name, figure in GPU_COLUMNS.items()),
        *(column(name, FLOATS, f"every traced run's {figure}, in the order they ran (their spread; NaN where a run "
                                "had none)") for name, figure in RUNS.items()),
        column(KERNEL_RUNS, FLOATS, "a kernel's row: the time the kernels of its name ran in each traced run"),
        *environment_columns(),
    )


def save(found: Sequence[tuple[str, Trace]], environment, path) -> object:
    """Write each (target, result)'s rows to a new results file ``path`` (table ``trace``). ``environment``: the
    GPU's (:class:`bench.platform.env.Environment`); None takes each rank's from a read or merged result."""
    from bench.results import store
    from bench.results.schema import schema_of

    return store.write(path, rows_of(found, environment), schema_of(columns()), {"table": TABLE}, new=True)


def rows_of(found: Sequence[tuple[str, Trace]], environment) -> list[dict]:
    """The rows :func:`save` writes (also what a trace is compared with its baseline by, unwritten)."""
    traced_at = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    if environment is None and not all(result.provenance.environments for _, result in found):
        raise ValueError("no environment to record: give the GPU's, or save a trace read back or merged from files")
    rows = []
    for target, result in found:
        summary = result.summary()
        shared_columns = {name: summary.get(name) for name in SUMMARY}
        spread = {name: _spread([getattr(run, figure) for run in result.runs.per_run])
                  for name, figure in RUNS.items()}
        gpus = {device: figures.as_dict() for device, figures in result.gpus.items()}
        for row in result.table():
            mine = gpus.get(row["device"], {})
            rows.append({"target": target, "traced_at": traced_at, "runs": len(result.runs.makespans_ms),
                         "gpus": len(result.gpus), "copy_engines": result.bound.copy_engines,
                         "origin_ns": result.records.origin_ns, **shared_columns, **spread,
                         **{name: mine.get(figure) for name, figure in GPU_COLUMNS.items()},
                         KERNEL_RUNS: _kernel_runs(result, row), **_environment(result, row, environment),
                         **result.provenance.libraries, **row})
    return rows


def _environment(result: Trace, row: dict, environment) -> dict:
    """The environment a row records: the GPU's given, else that of the rank that traced it."""
    if environment is not None:
        return environment.as_dict()
    environments = result.provenance.environments
    return environments.get(row["rank"], next(iter(environments.values()), {}))


def _spread(values: list[float | None]) -> list[float] | None:
    """Every run's number, NaN where a run has none (no copies to hide, no bound); None where none has one."""
    if all(value is None for value in values):
        return None
    return [math.nan if value is None else value for value in values]


def _kernel_runs(result: Trace, row: dict) -> list[float] | None:
    """Of a kernel's row, the time the kernels of its name ran in each traced run (None for other rows)."""
    if row["op"] != "kernel" or not result.runs.per_run:
        return None
    return [run.kernel_ms.get(row["name"], 0.0) for run in result.runs.per_run]
