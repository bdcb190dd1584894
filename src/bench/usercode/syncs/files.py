"""Results files of table ``syncs`` (``bench syncs --save``): one row per place (waits and host work), with the
region's time, the environment and the versions of the GPU libraries loaded."""

from __future__ import annotations

from collections.abc import Sequence

from bench.usercode.syncs.result import SyncsResult

TABLE = "syncs"


def columns() -> tuple:
    """The typed columns of a ``syncs`` results file: the target, each place's columns, the environment (and the
    versions of the GPU libraries loaded)."""
    from bench.results.schema import FLAG, FLOAT, INT, TEXT, column, environment_columns

    return (
        column("target", TEXT, "what was run: MODULE:FUNCTION or a script"),
        column("file", TEXT, "the source file of the line"),
        column("line", INT, "its line number"),
        column("function", TEXT, "the function it is in"),
        column("source", TEXT, "the line's code"),
        column("library", TEXT, "the GPU library it waited in (empty: not told)"),
        column("waits", INT, "how many times it stood still there under the hold"),
        column("held_ms", FLOAT, "how long it stood there under the hold, in all (the settle included)"),
        column("natural_ms", FLOAT, "how long it stood there without the hold, in all (0: never seen standing)"),
        column("hold_ms", FLOAT, "how long the GPU stayed held while it stood there: what finding its waits cost"),
        column("cuda_calls", TEXT, "the CUDA driver calls it waited in (CUPTI; empty: not known)"),
        column("into_library", TEXT, "the frames below the line, outermost first"),
        column("thread", TEXT, "the thread whose line it is (empty: the region's own)"),
        column("on_thread", TEXT, "the region's line waited on this thread, which waited for the GPU (empty: on the "
                                  "GPU itself)"),
        column("waited", FLAG, "a wait for the GPU (false: it stood as long without the hold: host work)"),
        column("allowed", TEXT, "the reason of the allow_waits scope it waited in (empty: not allowed)"),
        column("region_ms", FLOAT, "the region without the hold"),
        column("settle_ms", FLOAT, "how long a line stood still under the hold before it counted"),
        *environment_columns(),
    )


def save(found: Sequence[tuple[str, SyncsResult]], environment, path) -> object:
    """Write the rows of each (target, result) (one per place; none for a result that found nothing) to a new
    results file ``path``."""
    from bench.results import store
    from bench.results.schema import schema_of

    rows = [{"target": target, "region_ms": result.region_ms, "settle_ms": result.settle_ms,
             **environment.as_dict(), **result.libraries, **row} for target, result in found for row in result.rows()]
    return store.write(path, rows, schema_of(columns()), {"table": TABLE}, new=True)
