"""The report's section of ``bench trace --save`` rows (:class:`bench.usercode.tools.Section`): per GPU, a row per
traced target, and of each target the timeline of its newest trace. The analysis side: pandas only."""

from __future__ import annotations

import pandas as pd

from bench.analysis import selection
from bench.analysis.selection import Gpu
from bench.usercode.tools import Figure, GpuPart, Section

COLUMNS = {"target": ("what ran", ""), "makespan_ms": ("makespan ms", ".3f"), "bound_ms": ("bound ms", ".3f"),
           "efficiency": ("efficiency", ".0%"), "hidden": ("copies hidden", ".0%"),
           "comm_hidden": ("communication hidden", ".0%"), "idle_ms": ("idle ms", ".3f"),
           "pageable_cost_ms": ("pageable cost ms", ".3f"),
           "overhead": ("tracing overhead", "+.1%"), "git_commit": ("commit", "")}  # as ``bench trace`` prints
NOTE = "Of each target, the timeline of its newest trace is drawn; the tables list every GPU's numbers."


def section(traces: pd.DataFrame) -> Section:
    groups = newest_traces(traces)
    drawn = timelines(groups)
    parts = [GpuPart(gpu, rows=rows.drop_duplicates("target"),
                     figures=tuple(drawn[(gpu, target)] for target in dict.fromkeys(map(str, rows["target"]))
                                   if (gpu, target) in drawn))
             for gpu, rows in groups]
    return Section(tuple(parts), COLUMNS, NOTE)


def newest_traces(traces: pd.DataFrame) -> list[tuple[Gpu, pd.DataFrame]]:
    """Each GPU (by host and UUID) with the rows of its newest trace of each target."""
    keys = selection.key_frame(traces, [*selection.MACHINE, "gpu_name", "target"]).astype(str)
    traced_at = traces["traced_at"].astype(str)
    newest = traces[traced_at == traced_at.groupby([keys[column] for column in keys.columns]).transform("max")]
    machines = keys.loc[newest.index, list(selection.MACHINE) + ["gpu_name"]]
    return [(Gpu(*key), group) for key, group in newest.groupby([machines[column] for column in machines.columns],
                                                                sort=True)]


def timelines(groups: list[tuple[Gpu, pd.DataFrame]]) -> dict[tuple[Gpu, str], Figure]:
    """(GPU, target) -> the timeline the report draws (``groups``: :func:`newest_traces`): of each target, its newest
    trace (the first GPU's of a tie); the tables list every GPU's numbers."""
    newest: dict[str, tuple[str, Gpu, pd.DataFrame]] = {}
    for gpu, rows in groups:
        for target, mine in rows.groupby("target", sort=False):
            traced_at = str(mine["traced_at"].iloc[0])
            if str(target) not in newest or traced_at > newest[str(target)][0]:
                newest[str(target)] = (traced_at, gpu, mine)
    return {(gpu, target): Figure(f"trace {target}", rows, f"{target} on {gpu.name}")
            for target, (_, gpu, rows) in newest.items()}
