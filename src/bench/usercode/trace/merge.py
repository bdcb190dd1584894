"""Several ranks' traces as one: each process of a data-parallel step (torchrun, one process per GPU) traces its own
GPU and saves it (``bench.tracing(save=..., rank=...)``, ``bench trace --save``); :func:`merged` puts them on one
timeline with a figure set per GPU and the whole.

Each rank's figures are its own, as its process found them (its GPUs' gaps joined with its own host calls). The whole is
:func:`bench.usercode.trace.overlap.combined` of every GPU's: the makespan from the first start on any GPU to the last
end on any, which holds only where the ranks' timestamps are on one clock. CUPTI's timestamps of the processes of one
host are (they read the host's clock); those of two hosts are not, so bench merges the ranks of one host only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from bench.platform.errors import UsageError
from bench.usercode.trace.assemble import described, waits_of
from bench.usercode.trace.model import GpuFigures, Provenance, Runs
from bench.usercode.trace.overlap import Gap, combined
from bench.usercode.trace.result import TraceResult


def merged(results: Sequence[TraceResult], target: str | None = None) -> TraceResult:
    """One result of the ranks' ``results`` (each of its own GPUs; a result's ``rank``, else its place in the list,
    names it). ValueError (one line) where two results share a rank or a GPU, ran on different hosts, or one is
    merged already."""
    if not results:
        raise ValueError("no traces to merge")
    for result in results:
        if len({figures.rank for figures in result.gpus.values()}) > 1:
            raise ValueError("a trace of several ranks is merged already: merge each rank's own trace")
    ranks = [result.provenance.rank if result.provenance.rank is not None else index
             for index, result in enumerate(results)]
    for rank in ranks:
        if ranks.count(rank) > 1:
            raise ValueError(f"two traces of rank {rank}: merge one trace of each rank")
    hosts = {str(env.get("hostname")) for result in results for env in result.provenance.environments.values()}
    if len(hosts) > 1:
        raise ValueError(f"traces of {len(hosts)} hosts ({', '.join(sorted(hosts))}): CUPTI's clocks of different "
                         "hosts are not one clock; merge the ranks of one host")
    gpus: dict[int, GpuFigures] = {}
    for rank, result in zip(ranks, results):
        for device, figures in result.gpus.items():
            if device in gpus:
                raise ValueError(f"GPU {device} is in the traces of ranks {gpus[device].rank} and {rank}: device ids "
                                 "name GPUs only where every rank sees every GPU (no CUDA_VISIBLE_DEVICES per rank)")
            gaps = [_gap(gap, rank) for gap in figures.overlap.gaps]
            gpus[device] = GpuFigures(device, dataclasses.replace(figures.overlap, gaps=gaps), figures.bound_ms, rank)
    gpus = dict(sorted(gpus.items()))
    calls = [dataclasses.replace(call, rank=rank) for rank, result in zip(ranks, results)
             for call in result.records.calls]
    terms: dict[str, float] = {}
    for result in results:
        for term, ms in result.bound.terms.items():
            terms[term] = max(terms.get(term, ms), ms)
    libraries: dict[str, str] = {}
    for result in results:
        libraries.update(result.provenance.libraries)
    sources = {wait.line: wait.source for result in results for wait in result.waits}
    waits = [dataclasses.replace(wait, source=sources.get(wait.line, "")) for wait in waits_of(calls, sources=False)]
    engines = next((result.bound.copy_engines for result in results if result.bound.copy_engines is not None), None)
    named = target if target is not None else " + ".join(dict.fromkeys(result.target for result in results))
    environments = {rank: env for rank, result in zip(ranks, results)
                    for env in list(result.provenance.environments.values())[:1]}
    return described(
        [dataclasses.replace(a, rank=rank) for rank, result in zip(ranks, results) for a in result.records.activities],
        calls, gpus, bound_terms=terms, copy_engines=engines,
        pageable=[group for result in results for group in result.pageable], waits=waits,
        runs=Runs([combined([figures.overlap for figures in gpus.values()]).makespan_ns / 1e6]),
        provenance=Provenance(named, None, libraries, environments))


def _gap(gap: Gap, rank: int) -> Gap:
    """``gap`` with the call it followed made by ``rank``."""
    return dataclasses.replace(gap, wait=dataclasses.replace(gap.wait, rank=rank)) if gap.wait is not None else gap


def merged_files(paths: Sequence[Path]) -> TraceResult:
    """:func:`merged` of the traces saved in ``paths`` (one trace each); UsageError (one line) for a file that is
    not one trace or traces that cannot be merged."""
    from bench.usercode.trace.load import load

    results = [load(path) for path in paths]
    try:
        return merged(results)
    except ValueError as error:
        raise UsageError(f"trace --merge: {error}") from None
