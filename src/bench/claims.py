"""CUDA folklore against measurement: each claim, what the documentation says, what was measured, and a verdict.

Pure pandas over the rows of the ``blocking``, ``serialization``, ``alloc`` and ``graphs`` experiments; never
imports CUDA. A claim whose experiment is missing from the results reads "not measured".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from bench.calls import (ASYNC_ALLOC_PAGE, ERROR_PAGE, GUIDE_IMPLICIT, GUIDE_STREAMS, MEMORY_PAGE, STREAM_PAGE,
                         SYNC_PAGE)

Judgement = tuple[str, str]  # (what was measured, verdict: "true", "false", "partly")
LABELS = {"true": "holds", "false": "busted", "partly": "partly", "not measured": "not measured"}  # for the folklore


@dataclass(frozen=True)
class Claim:
    text: str
    docs: str
    source: str
    needs: tuple[str, ...]  # the experiments whose rows judge it
    judge: Callable[[pd.DataFrame], Judgement | None]  # None: the needed rows are not there


def _ok(rows: pd.DataFrame, experiment: str) -> pd.DataFrame:
    if "experiment" not in rows or "status" not in rows:
        return rows.iloc[0:0]
    return rows[(rows["experiment"] == experiment) & (rows["status"] == "ok")]


def _blocking(rows: pd.DataFrame, api: str) -> pd.DataFrame:
    mine = _ok(rows, "blocking")
    return mine[mine["api"] == api] if len(mine) else mine


def _waits(call: str, rows: pd.DataFrame) -> Judgement | None:
    """A claim that ``call`` waits for running kernels."""
    mine = _blocking(rows, call)
    if mine.empty:
        return None
    waited = mine[mine["verdict"] == "waits-for-device"]
    if waited.empty:
        return (f"returned while a kernel ran in all {len(mine)} placements × streams; host "
                f"{_ms_range(mine['host_ms'])}", "false")
    if len(waited) == len(mine):
        return f"waited for the running kernel in all {len(mine)} cases; host {_ms_range(mine['host_ms'])}", "true"
    return (f"waited in {len(waited)} of {len(mine)} cases ({_cases(waited)}), host {_ms_range(waited['host_ms'])}",
            "partly")


def _malloc_synchronous(rows: pd.DataFrame) -> Judgement | None:
    host = _blocking(rows, "cudaMalloc")
    if host.empty:
        return None
    waited = (host["verdict"] == "waits-for-device").any()
    device = _ok(rows, "serialization")
    device = device[device["api"] == "cudaMalloc"] if len(device) else device
    serialized = device[device["verdict"] == "serializes"] if len(device) else device
    parts = [f"host: {'waited for' if waited else 'returned during'} a running kernel "
             f"({_ms_range(host['host_ms'])})"]
    if len(device):
        parts.append(f"kernels on two streams around it: {len(serialized)} of {len(device)} serialized")
    if waited:
        return "; ".join(parts), "true"
    return "; ".join(parts), "partly" if len(serialized) else "false"


def _memcpy_async_returns(rows: pd.DataFrame) -> Judgement | None:
    mine = _blocking(rows, "cudaMemcpyAsync")
    if mine.empty:
        return None
    slow = mine[mine["verdict"] != "returns"]
    if slow.empty:
        return f"returned within {mine['host_ms'].max():.3f} ms in all {len(mine)} cases", "true"
    pinned = mine[mine["call"].str.contains("pinned")]
    pinned_note = (f"pinned: returned in all {len(pinned)} cases (≤ {pinned['host_ms'].max():.3f} ms); "
                   if len(pinned) and (pinned["verdict"] == "returns").all() else "")
    return (f"{pinned_note}{len(slow)} of {len(mine)} did not return at once: {_cases(slow, limit=4)}",
            "partly")


def _stream_order(rows: pd.DataFrame) -> Judgement | None:
    mine = _ok(rows, "graphs")
    mine = mine[mine["case"] == "stream-order"] if len(mine) else mine
    if mine.empty:
        return None
    trials, wrong = int(mine["trials"].sum()), int(mine["wrong_results"].sum())
    return (f"{wrong} wrong results in {trials} unsynchronized mallocAsync → copy → 2 kernels → copy → freeAsync "
            f"chains on one stream"), "false" if wrong == 0 else "true"


def _sync_in_capture(rows: pd.DataFrame) -> Judgement | None:
    mine = _ok(rows, "graphs")
    mine = mine[mine["case"] == "sync-in-capture"] if len(mine) else mine
    if mine.empty:
        return None
    row = mine.iloc[0]
    if row["sync_error"]:
        return (f"the runtime refused the call: {row['sync_error']}; capture {row['capture_state_after_sync']}, "
                f"ending it: {row['end_capture_error'] or 'no error'}"), "false"
    return f"the call succeeded; capture {row['capture_state_after_sync']}", "partly"


def _malloc_async_cheaper(rows: pd.DataFrame) -> Judgement | None:
    mine = _ok(rows, "alloc")
    mine = mine[mine["pattern"] == "loop"] if len(mine) else mine
    if mine.empty:
        return None
    parts, verdicts = [], []
    for size, group in mine.groupby("bytes"):
        by_api = {(row["api"], row["release_threshold"]): row["median"]
                  for _, row in group.iterrows()}
        malloc = by_api.get(("cudaMalloc", "none"))
        pooled, trimmed = by_api.get(("cudaMallocAsync", "max")), by_api.get(("cudaMallocAsync", "0"))
        if malloc is None or pooled is None:
            continue
        verdicts.append(pooled < malloc)
        trimmed_text = f", threshold 0 {trimmed:.1f}" if trimmed is not None else ""
        parts.append(f"{_size(size)}: malloc {malloc:.1f}, mallocAsync threshold max {pooled:.1f}{trimmed_text}")
    if not verdicts:
        return None
    verdict = "true" if all(verdicts) else "false" if not any(verdicts) else "partly"
    return "host µs per (allocate, kernel, free) iteration: " + "; ".join(parts), verdict


def _ms_range(values: pd.Series) -> str:
    low, high = float(values.min()), float(values.max())
    return f"{low:.3f} ms" if abs(high - low) < 5e-4 else f"{low:.3f}–{high:.3f} ms"


def _cases(rows: pd.DataFrame, limit: int = 3) -> str:
    described = [f"{row['call']} on {row['placement']} ({row['spin_stream']}): {row['verdict']}"
                 for _, row in rows.head(limit).iterrows()]
    more = f", and {len(rows) - limit} more" if len(rows) > limit else ""
    return "; ".join(described) + more


def _size(nbytes: int) -> str:
    from bench.units import format_size

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
)


def needed_experiments() -> list[str]:
    return list(dict.fromkeys(name for claim in CLAIMS for name in claim.needs))


def missing_experiments(rows: pd.DataFrame) -> list[str]:
    """The experiments the claims need that have no finished rows in ``rows``."""
    return [name for name in needed_experiments() if _ok(rows, name).empty]


def table(rows: pd.DataFrame) -> pd.DataFrame:
    """One line per claim: claim, docs, measured, verdict ("not measured" where the rows are missing)."""
    lines = []
    for claim in CLAIMS:
        judgement = claim.judge(rows)
        measured, verdict = judgement if judgement else ("—", "not measured")
        lines.append({"claim": claim.text, "docs say": claim.docs, "measured": measured, "verdict": verdict,
                      "source": claim.source})
    return pd.DataFrame(lines)
