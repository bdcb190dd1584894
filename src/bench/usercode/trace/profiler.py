"""bench's figures of a trace the PyTorch profiler wrote (:mod:`bench.usercode.trace.kineto` reads it): the same
analysis as a trace bench took, on the trace's records. The bound and the pageable copies' cost need pinned copies
of the trace's GPU: they are measured (or read from results) only where this machine's GPU has the trace's GPU's
name, and left out otherwise, with a note that says why.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from bench.platform.errors import ResultsError
from bench.usercode.activity import Op
from bench.usercode.trace.assemble import result_of
from bench.usercode.trace.compare import is_trace
from bench.usercode.trace.kineto import TARGET, Kineto, is_profiler_trace, read
from bench.usercode.trace.overlap import LINK
from bench.usercode.trace.result import TraceResult

NO_REFERENCE = "no reference"


def described_trace(path: Path, device: int | None, results: Callable[[], object] | None = None,
                    references: bool = True) -> tuple[TraceResult, list[str]]:
    """The result of the profiler's trace at ``path``, and notes on what it leaves out. ``device``: the GPU here
    whose pinned copies stand in for the trace's (default 0); ``results``: a function that reads the rows of results
    files whose pinned bandwidth rows of that GPU stand in for measuring; ``references=False``: none (no bound, no
    pageable cost). ResultsError for a file that is not a profiler's trace."""
    kineto = read(path)
    notes = list(kineto.missing)
    copy_bound, pinned = (_pinned_references(kineto, device or 0, results, notes)
                          if references and kineto.bytes_known else (None, _no_pinned))
    result = result_of([kineto.recording], copy_bound=copy_bound, pinned=pinned, target=TARGET, rank=kineto.rank,
                       sources=False)  # the files it names are the tracing machine's: none is read here
    used = {activity.device for activity in kineto.recording.activities}
    names = sorted({name for device, name in kineto.gpu_names.items() if device in used})
    # the trace names no host and no GPU's UUID: an empty one stands for them (one machine, unnamed)
    environment = {"hostname": "", "gpu_uuid": "", "gpu_name": ", ".join(names)}
    result.provenance = dataclasses.replace(result.provenance, environments={kineto.rank: environment})
    return result, notes


def trace_rows(path: Path) -> pd.DataFrame:
    """The rows of a trace file, or of a profiler's trace as :func:`described_trace` reads it without references
    (no bound, no pageable cost), under the target :data:`~bench.usercode.trace.kineto.TARGET`: what ``bench
    compare`` reads."""
    from bench.usercode.trace.compare import read as read_saved
    from bench.usercode.trace.files import rows_of

    if not is_profiler_trace(path) or is_trace(path):
        return read_saved(path)
    result, _ = described_trace(Path(path), None, references=False)
    rows = rows_of([(TARGET, result)], None)
    if not rows:
        raise ResultsError(f"{path} holds no trace rows (nothing ran on the GPU in it)")
    return pd.DataFrame(rows)


def _no_pinned(op: Op, nbytes: int) -> tuple[float, str]:
    return math.nan, NO_REFERENCE


def _pinned_references(kineto: Kineto, device: int, results, notes: list[str]) -> tuple[Callable | None, Callable]:
    """The copies' bound and the pinned reference (:func:`bench.usercode.trace.run.references`) where this
    machine's GPU ``device`` is the trace's; else none, and a note."""
    used = {activity.device for activity in kineto.recording.activities if activity.op in LINK}
    if not used:
        return None, _no_pinned  # no copy over the link: neither is asked for
    names = {kineto.gpu_names.get(gpu) for gpu in used}
    needs = ("the bound, the efficiency and the pageable copies' cost against pinned memory need pinned copies on the "
             "trace's GPU")
    if None in names:
        notes.append(f"{needs}, and the trace does not name its GPU (deviceProperties): they are left out")
        return None, _no_pinned
    from bench.platform.env import gpu_name, no_gpu_reason, use_device

    reason = no_gpu_reason()
    if reason:
        notes.append(f"{needs} ({', '.join(sorted(names))}), and here: {reason}; they are left out")
        return None, _no_pinned
    here = gpu_name(device)
    if names != {here}:
        notes.append(f"{needs} ({', '.join(sorted(names))}), and GPU {device} here is an {here}: they are left out")
        return None, _no_pinned
    use_device(device, load_numba=False)
    from bench.usercode.trace.run import references

    notes.append(f"the bound and the pinned references come from GPU {device} here ({here}), not from the machine "
                 "that took the trace: its host and link may differ")
    return references(results)
