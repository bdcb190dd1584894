"""How much does my code overlap? ``bench.trace(fn)`` records what ``fn`` ran on the GPU with CUPTI
(:mod:`bench.usercode.activity`) and tells, from the records' execution intervals, the makespan and each engine's
busy time, the copy time hidden behind compute, the GPU's idle gaps (:data:`~bench.usercode.trace.overlap.GAP_NS` or
more) with the driver call and line the host was in, the pageable copies against pinned ones, and the bound (the
overlap experiment's rule) and efficiency; on several GPUs each GPU's and the whole's, NCCL's kernels as communication.

``fn`` runs once to warm up, then ``runs`` times untraced and ``runs`` times traced, alternately: the traced run of
median makespan is described. :func:`tracing` records one run of a ``with`` block. This module runs the region under
CUPTI; what it finds is assembled, shown, saved and exported by the rest of :mod:`bench.usercode.trace`, whose public
names :mod:`bench.trace` gives. What each number means: docs/trace.md.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.platform.libraries import loaded_versions
from bench.timing.phases import CUPTI_START, VERSIONS, WARM_UP, phase
from bench.usercode.activity import Activity, Op, Recording, TraceUnavailable
from bench.usercode.defaults import DEFAULT_RUNS
from bench.usercode.trace import files
from bench.usercode.trace.assemble import result_of
from bench.usercode.trace.result import TraceResult

PINNED, ANALYSIS = "pinned reference copies", "reading the records"


# --- running on the GPU --------------------------------------------------------------------------------------------

def pinned_results(results, gpu_uuid: str) -> dict[tuple[str, int], float]:
    """(direction, bytes) -> median ms of the bandwidth experiment's pinned, ok rows of GPU ``gpu_uuid`` in
    ``results`` (rows of results files); of several runs, the newest."""
    if not {"experiment", "gpu_uuid", "host_memory", "direction", "bytes", "status", "median_ms"} <= set(results):
        return {}
    mine = results[(results["experiment"] == "bandwidth") & (results["gpu_uuid"] == gpu_uuid)
                   & (results["host_memory"] == "pinned") & (results["status"] == "ok")]
    order = mine.sort_values("run_id", kind="stable") if "run_id" in mine else mine  # the newest run last: it wins
    return {(str(row["direction"]), int(row["bytes"])): float(row["median_ms"]) for _, row in order.iterrows()}


def references(results=None, bound: bool = True):
    """The GPU-side references: the copies' bound (None without ``bound``) and one pinned copy's time, from
    ``results`` (rows of results files, or a function that reads them: the bandwidth experiment's pinned copies on
    this GPU) where they hold the size, else measured."""
    from bench.usercode.pinned import copy_engines, pinned_copy_ms

    @functools.cache
    def known() -> dict[tuple[str, int], float]:
        """The results' pinned copies of this GPU, read once, when a pageable copy first needs one."""
        rows = results() if callable(results) else results
        if rows is None or not len(rows):
            return {}
        from bench.platform.cuda import runtime
        from bench.platform.env import gpu_uuid

        return pinned_results(rows, gpu_uuid(runtime.deviceGetPCIBusId(runtime.getDevice())))

    def copy_bound(h2d_bytes: int, d2h_bytes: int) -> tuple[float, int]:
        with phase(PINNED):
            engines = copy_engines(h2d_bytes, d2h_bytes)
        return engines.bound_ms(), engines.engines

    def pinned(op: Op, nbytes: int) -> tuple[float, str]:
        if (str(op), nbytes) in known():
            return known()[(str(op), nbytes)], "results"
        with phase(PINNED):
            return pinned_copy_ms(str(op), nbytes), "measured"

    return (copy_bound if bound else None), pinned


def _run_synchronized(call: Callable[[], object], synchronize: Callable[[], None]) -> float:
    """The host time (ms) of ``call()`` from an idle GPU until ``synchronize()`` found the GPU idle again."""
    from bench.timing import host_interval

    synchronize()
    ms, _ = host_interval(lambda: (call(), synchronize()))
    return ms


def rank_of(rank: int | None) -> int | None:
    """``rank``, else the process's rank as torchrun (and launchers like it) give it in ``RANK``, else None."""
    if rank is not None:
        return rank
    given = os.environ.get("RANK", "")
    return int(given) if given.isdigit() else None


def _usable() -> None:
    from bench.platform.env import no_gpu_reason

    reason = no_gpu_reason()
    if reason:
        raise TraceUnavailable(f"tracing needs a GPU: {reason}")


def trace(fn: Callable, *args, runs: int = DEFAULT_RUNS, warmup: bool = True, results=None, target: str = "",
          leave_out: Callable[[Activity], bool] | None = None, lines: bool = True, rank: int | None = None,
          **kwargs) -> TraceResult:
    """Trace ``fn(*args, **kwargs)`` (see the module docstring). ``results``: rows of results files whose pinned
    bandwidth rows of this GPU stand in for measuring the pinned reference. ``leave_out``: records that are not the
    region's own (a gate kernel the region's work waits behind). ``lines=False`` leaves out the driver-call callbacks:
    no host waits, no lines, less overhead where every call blocks (pageable copies). ``rank``: this process's rank
    where several trace at once (default: ``RANK`` from the environment). :class:`TraceUnavailable` (one line) without
    a GPU or CUPTI. ``results`` may also be a function that reads those rows: called only where a pageable copy
    needs a reference."""
    if runs < 1:
        raise ValueError("runs must be at least 1")
    _usable()
    from bench.usercode.activity import open_recorder, synchronize_used

    with phase(CUPTI_START):
        recorder = open_recorder(calls=lines)
    recordings: list[Recording] = []
    untraced: list[float] = []
    traced: list[float] = []

    def run() -> None:
        fn(*args, **kwargs)

    try:
        if warmup:
            with phase(WARM_UP):
                _run_synchronized(run, synchronize_used)
        for _ in range(runs):
            with phase("your code, untraced"):
                untraced.append(_run_synchronized(run, synchronize_used))
            with phase("your code, traced"):
                recorder.start()
                try:
                    traced.append(_run_synchronized(run, recorder.synchronize))
                finally:
                    recordings.append(recorder.stop())
    finally:
        recorder.close()
    if leave_out is not None:
        recordings = [Recording([a for a in r.activities if not leave_out(a)], r.calls) for r in recordings]
    copy_bound, pinned = references(results)
    with phase(ANALYSIS):
        result = result_of(recordings, copy_bound=copy_bound, pinned=pinned, untraced_ms=untraced, traced_ms=traced,
                           target=target, rank=rank_of(rank))
    with phase(VERSIONS):
        result.provenance = dataclasses.replace(result.provenance, libraries=loaded_versions())
    return result


class Traced:
    """What :func:`tracing` yields: ``result`` once the block has ended."""

    result: TraceResult | None = None


@contextmanager
def tracing(target: str = "", bound: bool = True, save: str | Path | None = None,
            rank: int | None = None) -> Iterator[Traced]:
    """Trace one run of the ``with`` block (warm it up first: a first call's loading is in the trace otherwise).
    ``bound=False`` skips measuring the copies' bound (seconds of pinned copies): no bound, no efficiency. ``save``:
    also write the trace to this new results file (table ``trace``), with this GPU's environment. ``rank``: this
    process's rank where several trace at once, as :func:`bench.usercode.trace.merge.merged` names them (default:
    ``RANK`` from the environment, as torchrun sets it)."""
    _usable()
    from bench.platform.cuda import runtime
    from bench.usercode.activity import open_recorder, synchronize_used

    recorder = open_recorder()
    box = Traced()
    try:
        synchronize_used()
        recorder.start()
        try:
            yield box
            recorder.synchronize()
        finally:
            recording = recorder.stop()
    finally:
        recorder.close()
    copy_bound, pinned = references(bound=bound)
    box.result = result_of([recording], copy_bound=copy_bound, pinned=pinned, target=target, rank=rank_of(rank))
    box.result.provenance = dataclasses.replace(box.result.provenance, libraries=loaded_versions())
    if save is not None:
        from bench.platform.env import gpu_environment

        environment = gpu_environment(runtime.getDevice())
        provenance = box.result.provenance
        box.result.provenance = dataclasses.replace(provenance, environments={provenance.rank: environment.as_dict()})
        files.save([(target, box.result)], environment, save)
