"""CUDA folklore against measurement: each claim, what the documentation says, what was measured, and a verdict.

Pure pandas over the rows of the ``blocking``, ``serialization``, ``alloc``, ``graphs`` and ``library``
experiments; never imports CUDA. A claim whose rows are missing from the results reads "not measured".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bench.analysis.numbers import ms_range
from bench.analysis.selection import only, row_dicts
from bench.catalogs.pages import (ASYNC_ALLOC_PAGE, CUPY_DOCS, ERROR_PAGE, GUIDE_IMPLICIT, GUIDE_STREAMS, JAX_ASYNC,
                                  MEMORY_PAGE, STREAM_PAGE, SYNC_PAGE, TORCH_DOCS)
from bench.platform.vocabulary import ClaimVerdict, DeviceVerdict, HostVerdict, Status

TORCH_TO = TORCH_DOCS + "generated/torch.Tensor.to.html"
TORCH_ITEM = TORCH_DOCS + "generated/torch.Tensor.item.html"
TORCH_EMPTY_CACHE = TORCH_DOCS + "generated/torch.cuda.empty_cache.html"
CUPY_ASARRAY = CUPY_DOCS + "cupy.asarray.html"
CUPY_NDARRAY = CUPY_DOCS + "cupy.ndarray.html"

Judgement = tuple[str, str]  # (what was measured, verdict: true, false or partly, a ClaimVerdict)
LABELS = {ClaimVerdict.TRUE: "holds", ClaimVerdict.FALSE: "busted", ClaimVerdict.PARTLY: "partly",
          ClaimVerdict.NOT_MEASURED: "not measured"}  # for the folklore


@dataclass(frozen=True)
class Claim:
    text: str
    docs: str
    source: str
    needs: tuple[str, ...]  # the experiments whose rows judge it
    judge: Callable[[pd.DataFrame], Judgement | None]  # None: the needed rows are not there


def _equal(values: pd.Series, value) -> np.ndarray:
    """Which of ``values`` equal ``value`` (a missing one none): a comparison of a few rows without pandas'."""
    return values.to_numpy(dtype=object, na_value=None) == value


def _ok(rows: pd.DataFrame, experiment: str) -> pd.DataFrame:
    if "experiment" not in rows or "status" not in rows:
        return rows.iloc[0:0]
    mine = _equal(rows["experiment"], experiment) & _equal(rows["status"], Status.OK)
    return rows if mine.all() else rows[mine]  # rows judgements() selected: as they are


def _blocking(rows: pd.DataFrame, api: str) -> pd.DataFrame:
    mine = _ok(rows, "blocking")
    return mine[_equal(mine["api"], api)] if len(mine) else mine


def _waits(call: str, rows: pd.DataFrame) -> Judgement | None:
    """A claim that ``call`` waits for running kernels."""
    mine = _blocking(rows, call)
    if mine.empty:
        return None
    waited = mine[mine["verdict"] == HostVerdict.WAITS_FOR_DEVICE]
    if waited.empty:
        return (f"returned while a kernel ran in all {len(mine)} placements × streams; host "
                f"{ms_range(mine['host_ms'])}", ClaimVerdict.FALSE)
    if len(waited) == len(mine):
        return (f"waited for the running kernel in all {len(mine)} cases; host {ms_range(mine['host_ms'])}",
                ClaimVerdict.TRUE)
    return (f"waited in {len(waited)} of {len(mine)} cases ({_cases(waited)}), host {ms_range(waited['host_ms'])}",
            ClaimVerdict.PARTLY)


def _malloc_synchronous(rows: pd.DataFrame) -> Judgement | None:
    host = _blocking(rows, "cudaMalloc")
    if host.empty:
        return None
    waited = (host["verdict"] == HostVerdict.WAITS_FOR_DEVICE).any()
    device = _ok(rows, "serialization")
    device = device[device["api"] == "cudaMalloc"] if len(device) else device
    serialized = device[device["verdict"] == DeviceVerdict.SERIALIZES] if len(device) else device
    parts = [f"host: {'waited for' if waited else 'returned during'} a running kernel "
             f"({ms_range(host['host_ms'])})"]
    if len(device):
        parts.append(f"kernels on two streams around it: {len(serialized)} of {len(device)} serialized")
    if waited:
        return "; ".join(parts), ClaimVerdict.TRUE
    return "; ".join(parts), ClaimVerdict.PARTLY if len(serialized) else ClaimVerdict.FALSE


def _memcpy_async_returns(rows: pd.DataFrame) -> Judgement | None:
    mine = _blocking(rows, "cudaMemcpyAsync")
    if mine.empty:
        return None
    slow = mine[mine["verdict"] != HostVerdict.RETURNS]
    if slow.empty:
        return f"returned within {mine['host_ms'].max():.3f} ms in all {len(mine)} cases", ClaimVerdict.TRUE
    pinned = mine[mine["call"].str.contains("pinned")]
    pinned_note = (f"pinned: returned in all {len(pinned)} cases (≤ {pinned['host_ms'].max():.3f} ms); "
                   if len(pinned) and (pinned["verdict"] == HostVerdict.RETURNS).all() else "")
    return (f"{pinned_note}{len(slow)} of {len(mine)} did not return at once: {_cases(slow, limit=4)}",
            ClaimVerdict.PARTLY)


def _stream_order(rows: pd.DataFrame) -> Judgement | None:
    mine = _ok(rows, "graphs")
    mine = mine[mine["case"] == "stream-order"] if len(mine) else mine
    if mine.empty:
        return None
    trials, wrong = int(mine["trials"].sum()), int(mine["wrong_results"].sum())
    return (f"{wrong} wrong results in {trials} unsynchronized mallocAsync → copy → 2 kernels → copy → freeAsync "
            f"chains on one stream"), ClaimVerdict.FALSE if wrong == 0 else ClaimVerdict.TRUE


def _sync_in_capture(rows: pd.DataFrame) -> Judgement | None:
    mine = _ok(rows, "graphs")
    mine = mine[mine["case"] == "sync-in-capture"] if len(mine) else mine
    if mine.empty:
        return None
    row = mine.iloc[0]
    if row["sync_error"]:
        return (f"the runtime refused the call: {row['sync_error']}; capture {row['capture_state_after_sync']}, "
                f"ending it: {row['end_capture_error'] or 'no error'}"), ClaimVerdict.FALSE
    return f"the call succeeded; capture {row['capture_state_after_sync']}", ClaimVerdict.PARTLY


def _malloc_async_cheaper(rows: pd.DataFrame) -> Judgement | None:
    mine = _ok(rows, "alloc")
    mine = mine[mine["pattern"] == "loop"] if len(mine) else mine
    if mine.empty:
        return None
    parts, verdicts = [], []
    for size, group in mine.groupby("bytes"):
        by_api = {(row["api"], row["release_threshold"]): row["median"]
                  for row in row_dicts(group)}
        malloc = by_api.get(("cudaMalloc", "none"))
        pooled, trimmed = by_api.get(("cudaMallocAsync", "max")), by_api.get(("cudaMallocAsync", "0"))
        if malloc is None or pooled is None:
            continue
        verdicts.append(pooled < malloc)
        trimmed_text = f", threshold 0 {trimmed:.1f}" if trimmed is not None else ""
        parts.append(f"{_size(size)}: malloc {malloc:.1f}, mallocAsync threshold max {pooled:.1f}{trimmed_text}")
    if not verdicts:
        return None
    verdict = _of(sum(verdicts), len(verdicts))
    return "host µs per (allocate, kernel, free) iteration: " + "; ".join(parts), verdict


def _library(rows: pd.DataFrame, calls: tuple[str, ...], placement: str = "same") -> pd.DataFrame:
    mine = _ok(rows, "library")
    if not len(mine):
        return mine
    return mine[mine["call"].isin(calls).to_numpy(dtype=bool) & _equal(mine["placement"], placement)]


def _library_waits(calls: tuple[str, ...], placement: str = "same"):
    """A claim that these library calls wait for the GPU (a spin kernel on their own stream, or on another)."""
    def judge(rows: pd.DataFrame) -> Judgement | None:
        mine = _library(rows, calls, placement)
        if mine.empty:
            return None
        waited = mine[mine["verdict"] == HostVerdict.WAITS_FOR_DEVICE]
        described = "; ".join(f"{row['call']}: {row['verdict']} ({row['host_ms']:.3f} ms)" for row in row_dicts(mine))
        verdict = _of(len(waited), len(mine))
        return described, verdict
    return judge


def _non_blocking_async(rows: pd.DataFrame) -> Judgement | None:
    """True only if every non_blocking host-to-device copy returned while its stream was busy."""
    calls = ("torch t.to('cuda', non_blocking=True) from pinned", "torch t.to('cuda', non_blocking=True) from pageable")
    mine = _library(rows, calls)
    if mine.empty:
        return None
    returned = mine[mine["verdict"] == HostVerdict.RETURNS]
    described = "; ".join(f"{row['call'].split(' from ')[-1]}: {row['verdict']} ({row['host_ms']:.3f} ms)"
                          for row in row_dicts(mine))
    verdict = _of(len(returned), len(mine))
    return f"with a kernel running on the copy's stream: {described}", verdict


def _of(part: int, whole: int) -> ClaimVerdict:
    """true where ``part`` is all of ``whole``, false where it is none of it, partly in between."""
    return ClaimVerdict.TRUE if part == whole else ClaimVerdict.FALSE if part == 0 else ClaimVerdict.PARTLY


JAX_DISPATCH = ("jax a * 2 + 1", "jax jitted f(a) (compiled)", "jax jnp.sort(a)", "jax jax.random.normal(key, shape)",
                "jax a.at[0].set(1.0)")  # operations: the folklore says they return at once
JAX_READS = ("jax float(a)", "jax a.item()", "jax int(a)", "jax if a > 0:", "jax while a > 3: (condition tested once)",
             "jax repr(a)", "jax np.asarray(a)", "jax jax.device_get(a)",
             "jax a.tolist()")  # reading a value: the folklore says these wait


def _jax_async_until_read(rows: pd.DataFrame) -> Judgement | None:
    """True where JAX's operations returned under the hold and reading a value waited, and nothing else waited;
    partly where other calls waited too (they read nothing); false where an operation waited or a read did not."""
    mine = _ok(rows, "library")
    if not len(mine):
        return None
    jax = mine[(mine["library"] == "jax") & (mine["placement"] == "same")]
    if jax.empty:
        return None
    waited = set(jax.loc[jax["verdict"] == HostVerdict.WAITS_FOR_DEVICE, "call"])
    dispatch = [call for call in JAX_DISPATCH if call in set(jax["call"])]
    reads = [call for call in JAX_READS if call in set(jax["call"])]
    dispatch_waited = [call for call in dispatch if call in waited]
    reads_returned = [call for call in reads if call not in waited]
    others = sorted(waited - set(reads) - {"jax a.block_until_ready()"})
    described = (f"with every stream held: {len(dispatch) - len(dispatch_waited)} of {len(dispatch)} operations "
                 f"returned, {len(reads) - len(reads_returned)} of {len(reads)} reads of a value waited")
    if dispatch_waited or reads_returned:
        return described + f"; not as claimed: {', '.join(dispatch_waited + reads_returned)}", "false"
    if others:
        named = ", ".join(other.removeprefix("jax ") for other in others)
        return described + f"; these read no value and waited too: {named}", "partly"
    return described, "true"


def _cases(rows: pd.DataFrame, limit: int = 3) -> str:
    described = [f"{row['call']} on {row['placement']} ({row['spin_stream']}): {row['verdict']}"
                 for row in row_dicts(rows.head(limit))]
    more = f", and {len(rows) - limit} more" if len(rows) > limit else ""
    return "; ".join(described) + more


def _size(nbytes: int) -> str:
    from bench.platform.units import format_size

    return format_size(int(nbytes))


CLAIMS = (
    Claim("cudaGetLastError waits for running kernels",
          "silent: it returns and resets the last error of a runtime call; nothing about waiting", ERROR_PAGE,
          ("blocking",), lambda rows: _waits("cudaGetLastError", rows)),
    Claim("a kernel after cudaMallocAsync in the same stream needs a synchronization",
          "no: \"basic stream ordering allows future work submitted into the same stream to use the allocation\"",
          ASYNC_ALLOC_PAGE, ("graphs",), _stream_order),
    Claim("cudaMalloc is synchronous",
          "silent on the host; the Programming Guide lists a device memory allocation among the operations that "
          "keep streams from running concurrently", GUIDE_IMPLICIT, ("blocking", "serialization"),
          _malloc_synchronous),
    Claim("cudaFree waits for running kernels", "silent", MEMORY_PAGE, ("blocking",),
          lambda rows: _waits("cudaFree", rows)),
    Claim("cudaMemcpyAsync returns immediately",
          "only for pinned or device memory; pageable copies might be synchronous, device-to-pageable returns once "
          "the copy completed", SYNC_PAGE, ("blocking",), _memcpy_async_returns),
    Claim("the runtime may reorder operations within a stream",
          "no: a stream is a sequence of commands that execute in order", GUIDE_STREAMS, ("graphs",), _stream_order),
    Claim("cudaStreamSynchronize inside a capture makes an allocation safe",
          "synchronizing a capturing stream is not a legal operation in a capture", STREAM_PAGE, ("graphs",),
          _sync_in_capture),
    Claim("cudaMallocAsync is cheaper than cudaMalloc in a loop",
          "the pool reuses freed memory; with release threshold 0 it returns memory at each synchronization",
          ASYNC_ALLOC_PAGE, ("alloc",), _malloc_async_cheaper),
    Claim("non_blocking=True makes a host-to-device copy asynchronous",
          "PyTorch: \"attempts to perform the conversion asynchronously with respect to the host, if possible. This "
          "asynchronous behavior applies to both pinned and pageable memory\"", TORCH_TO, ("library",),
          _non_blocking_async),
    Claim("cupy.asarray of a NumPy array blocks",
          "CuPy: blocking defaults to False, \"if a H2D copy is needed it would run asynchronously on the current "
          "stream\"", CUPY_ASARRAY, ("library",),
          _library_waits(("cupy cupy.asarray(numpy pageable)", "cupy cupy.asarray(numpy pinned)"))),
    Claim("boolean-mask indexing synchronizes",
          "silent in CuPy's and PyTorch's indexing docs (the result's size depends on the data)", CUPY_NDARRAY,
          ("library",), _library_waits(("cupy a[boolean mask]", "torch t[boolean mask]"))),
    Claim(".item() waits for the GPU",
          "silent: CuPy and PyTorch document it as returning a Python scalar", TORCH_ITEM, ("library",),
          _library_waits(("cupy a.item()", "torch t.item()"))),
    Claim("JAX work is asynchronous until you read a value",
          "JAX: operations \"dispatch asynchronously\"; printing, np.asarray or block_until_ready wait for the "
          "computation", JAX_ASYNC, ("library",), _jax_async_until_read),
    Claim("emptying a memory pool waits for kernels on other streams",
          "silent: CuPy's free_all_blocks \"releases free blocks\", PyTorch's empty_cache \"releases all "
          "unoccupied cached memory\"", TORCH_EMPTY_CACHE, ("library",),
          _library_waits(("cupy pool.free_all_blocks()", "torch torch.cuda.empty_cache()"), "other")),
)


def needed_experiments() -> list[str]:
    return list(dict.fromkeys(name for claim in CLAIMS for name in claim.needs))


def missing_experiments(rows: pd.DataFrame) -> list[str]:
    """The experiments to measure so that every claim can be judged: those of the claims ``rows`` cannot judge (an
    experiment missing, or measured without the configurations a claim needs, as a quick sweep is)."""
    unjudged = [claim for claim, judgement in zip(CLAIMS, judgements(rows)) if judgement is None]
    return list(dict.fromkeys(name for claim in unjudged for name in claim.needs))


COLUMNS = ("experiment", "status", "api", "call", "library", "placement", "spin_stream", "verdict", "host_ms", "bytes",
           "pattern", "release_threshold", "median", "case", "trials", "wrong_results", "sync_error",
           "capture_state_after_sync", "end_capture_error")  # every column the claims read


def judgements(rows: pd.DataFrame) -> list[Judgement | None]:
    """Each claim's judgement of ``rows`` (None: the rows it needs are not there), in :data:`CLAIMS`' order. Each
    claim is handed the finished rows of the experiments it needs, of the columns claims read, selected once for
    all claims that need them."""
    rows = only(rows, COLUMNS)
    if "experiment" not in rows or "status" not in rows:
        return [claim.judge(rows.iloc[0:0]) for claim in CLAIMS]
    ok = _equal(rows["status"], Status.OK)
    finished = {needs: rows[rows["experiment"].isin(needs).to_numpy(dtype=bool) & ok]
                for needs in dict.fromkeys(claim.needs for claim in CLAIMS)}
    return [claim.judge(finished[claim.needs]) for claim in CLAIMS]


def table(rows: pd.DataFrame) -> pd.DataFrame:
    """One line per claim: claim, docs, measured, verdict ("not measured" where the rows are missing)."""
    lines = []
    for claim, judgement in zip(CLAIMS, judgements(rows)):
        measured, verdict = judgement if judgement else ("—", ClaimVerdict.NOT_MEASURED)
        lines.append({"claim": claim.text, "docs say": claim.docs, "measured": measured, "verdict": verdict,
                      "source": claim.source})
    return pd.DataFrame(lines)
