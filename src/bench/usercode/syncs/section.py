"""The report's section of ``bench syncs --save`` rows (:class:`bench.usercode.tools.Section`): per GPU, a row per
line that waited, the target it ran in; the lines that only stood still on the host are left out. The analysis side:
pandas only."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench.analysis import selection
from bench.usercode.tools import GpuPart, Section

COLUMNS = {"target": ("what ran", ""), "file": ("file", ""), "line": ("line", ""), "source": ("code", ""),
           "library": ("library", ""), "waits": ("waits", ""), "natural_ms": ("ms on its own", ".1f"),
           "cuda_calls": ("CUDA call", "")}  # column -> (header, format as ``bench syncs`` prints it)


def section(syncs: pd.DataFrame) -> Section:
    waited = syncs[syncs["waited"].fillna(False).astype(bool)] if "waited" in syncs else syncs
    parts = []
    for gpu, group in selection.by_gpu(syncs):
        mine = selection.rows_of(waited, gpu) if gpu.uuid or gpu.host else waited
        targets = group["target"].nunique()
        sentence = (f"{targets} target{'s' * (targets != 1)} run, {mine['target'].nunique()} waited at {len(mine)} "
                    f"line{'s' * (len(mine) != 1)}.")
        parts.append(GpuPart(gpu, sentence, mine.assign(file=mine["file"].map(lambda path: Path(str(path)).name))))
    return Section(tuple(parts), COLUMNS)
