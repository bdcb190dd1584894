"""The report's sections of the tools' own results: where code waited (``bench syncs --save``) and how much it
overlapped (``bench trace --save``), a part per GPU, numbers as the command line prints them."""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from bench import analysis
from bench.analysis import Gpu
from bench.report.markup import anchor, cell, contents, figure, table, text

SYNCS_COLUMNS = {"target": ("what ran", ""), "file": ("file", ""), "line": ("line", ""), "source": ("code", ""),
                 "library": ("library", ""), "waits": ("waits", ""), "natural_ms": ("ms on its own", ".1f"),
                 "cuda_calls": ("CUDA call", "")}  # column -> (header, format as ``bench syncs`` prints it)
TRACE_COLUMNS = {"target": ("what ran", ""), "makespan_ms": ("makespan ms", ".3f"), "bound_ms": ("bound ms", ".3f"),
                 "efficiency": ("efficiency", ".0%"), "hidden": ("copies hidden", ".0%"),
                 "comm_hidden": ("communication hidden", ".0%"), "idle_ms": ("idle ms", ".3f"),
                 "pageable_cost_ms": ("pageable cost ms", ".3f"),
                 "overhead": ("tracing overhead", "+.1%"), "git_commit": ("commit", "")}  # as ``bench trace`` prints
Timeline = Callable[[tuple[Gpu, str]], bytes]  # (GPU, target) -> the PNG of its timeline


def formatted(value, spec: str) -> str:
    """A number as the command line prints it (``spec``: a format spec); other values as :func:`cell` has them."""
    if spec and isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value):
        return format(float(value), spec)
    return cell(value)


def shown(rows: pd.DataFrame, columns: dict) -> pd.DataFrame:
    """The ``columns`` of ``rows`` there are, formatted and under their headers."""
    present = [column for column in columns if column in rows]
    return pd.DataFrame({columns[column][0]: [formatted(value, columns[column][1]) for value in rows[column]]
                         for column in present})


def _label(gpu: Gpu) -> str:
    return f"{gpu.short} on {gpu.host}" if gpu.host else gpu.short


def syncs_section(syncs: pd.DataFrame) -> str:
    """Where code waited (``bench syncs``): per GPU, a row per line that waited, the target it ran in; the lines that
    only stood still on the host are left out."""
    waited = syncs[syncs["waited"].fillna(False).astype(bool)] if "waited" in syncs else syncs
    groups = analysis.by_gpu(syncs)
    parts = ["<h2 id='syncs'>Where code waited (bench syncs)</h2>",
             contents([(anchor("syncs", gpu.host, gpu.uuid), _label(gpu)) for gpu, _ in groups], "GPUs:")]
    for gpu, group in groups:
        mine = analysis.rows_of(waited, gpu) if gpu.uuid or gpu.host else waited
        targets = group["target"].nunique()
        parts.append(f"<h3 id='{anchor('syncs', gpu.host, gpu.uuid)}'>{text(_label(gpu))}</h3><p>{targets} "
                     f"target{'s' * (targets != 1)} run, {mine['target'].nunique()} waited at {len(mine)} "
                     f"line{'s' * (len(mine) != 1)}.</p>")
        if len(mine):
            parts.append(table(shown(mine.assign(file=mine["file"].map(lambda path: Path(str(path)).name)),
                                     SYNCS_COLUMNS)))
    return "".join(parts)


def newest_traces(traces: pd.DataFrame) -> list[tuple[Gpu, pd.DataFrame]]:
    """Each GPU (by host and UUID) with the rows of its newest trace of each target."""
    keys = analysis.key_frame(traces, [*analysis.MACHINE, "gpu_name", "target"]).astype(str)
    traced_at = traces["traced_at"].astype(str)
    newest = traces[traced_at == traced_at.groupby([keys[column] for column in keys.columns]).transform("max")]
    machines = keys.loc[newest.index, list(analysis.MACHINE) + ["gpu_name"]]
    return [(Gpu(*key), group) for key, group in newest.groupby([machines[column] for column in machines.columns],
                                                                sort=True)]


def timelines(groups: list[tuple[Gpu, pd.DataFrame]]) -> dict[tuple[Gpu, str], tuple[pd.DataFrame, str]]:
    """(GPU, target) -> (rows, title) of the timelines the report draws (``groups``: :func:`newest_traces`): of each
    target, its newest trace (the first GPU's of a tie); the tables list every GPU's numbers."""
    newest: dict[str, tuple[str, Gpu, pd.DataFrame]] = {}
    for gpu, rows in groups:
        for target, mine in rows.groupby("target", sort=False):
            traced_at = str(mine["traced_at"].iloc[0])
            if str(target) not in newest or traced_at > newest[str(target)][0]:
                newest[str(target)] = (traced_at, gpu, mine)
    return {(gpu, target): (rows, f"{target} on {gpu.name}") for target, (_, gpu, rows) in newest.items()}


def _draw(drawn: dict, key: tuple[Gpu, str]) -> bytes:
    from bench.report.figures import trace_figure

    return trace_figure(*drawn[key])


def trace_section(groups: list[tuple[Gpu, pd.DataFrame]], timeline: Timeline | None = None) -> str:
    """How much code overlapped (``bench trace``; ``groups``: :func:`newest_traces`): per GPU, a row per traced
    target; the :func:`timelines`, drawn by ``timeline`` ((GPU, target) -> PNG; default: here and now)."""
    drawn = timelines(groups)
    if timeline is None:
        timeline = functools.partial(_draw, drawn)
    parts = ["<h2 id='trace'>How much code overlapped (bench trace)</h2>",
             contents([(anchor("trace", gpu.host, gpu.uuid), _label(gpu)) for gpu, _ in groups], "GPUs:"),
             "<p class='meta'>Of each target, the timeline of its newest trace is drawn; the tables list every "
             "GPU's numbers.</p>"]
    for gpu, rows in groups:
        parts.append(f"<h3 id='{anchor('trace', gpu.host, gpu.uuid)}'>{text(_label(gpu))}</h3>")
        parts.append(table(shown(rows.drop_duplicates("target"), TRACE_COLUMNS)))
        for target in dict.fromkeys(map(str, rows["target"])):
            if (gpu, target) in drawn:
                parts.append(figure(f"trace {target}", timeline((gpu, target))))
    return "".join(parts)
