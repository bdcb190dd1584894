"""Results → figures (PNG and SVG), one set per GPU. pandas and matplotlib only; never imports CUDA.

Each experiment lists its figures (functions of one GPU's rows and side tables, in its module); this module picks
the rows, draws them and writes the files. Files are reproducible: re-plotting unchanged results writes the same
bytes (fixed SVG ids, no dates), and a file whose bytes would not change is left alone.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from bench.units import format_size


def pyplot():
    """matplotlib's pyplot with the file-only backend and reproducible SVG output."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "bench"  # fixed element ids instead of random ones
    import matplotlib.pyplot as plt

    return plt


def size_axis(ax, sizes: np.ndarray) -> None:
    """log2 x axis: a label every other power of two (when many), human units."""
    from matplotlib.ticker import FixedLocator, NullFormatter

    ax.set_xscale("log", base=2)
    powers = np.unique(sizes)
    labelled = powers[::2] if len(powers) > 10 else powers
    ax.xaxis.set_major_locator(FixedLocator(labelled))
    ax.xaxis.set_minor_locator(FixedLocator(powers))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(labelled, [format_size(int(size)) for size in labelled], rotation=45, ha="right")
    ax.set_xlabel("transfer size")


def _render(figure, fmt: str) -> bytes:
    sink = io.BytesIO()
    metadata = {"Date": None} if fmt == "svg" else {"Software": None}
    figure.savefig(sink, format=fmt, dpi=150, metadata=metadata)
    return sink.getvalue()


def _write_if_changed(path: Path, content: bytes) -> None:
    if path.is_file() and path.read_bytes() == content:
        return
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as sink:
            sink.write(content)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def save(figure, stem: Path) -> list[Path]:
    """``stem``.png and ``stem``.svg, each written only if its bytes changed."""
    plt = pyplot()
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    try:
        for path in paths:
            _write_if_changed(path, _render(figure, path.suffix[1:]))
    finally:
        plt.close(figure)
    return paths


def gpu_label(rows: pd.DataFrame) -> str:
    """'NVIDIA H200 (GPU-1a2b3c4d)' for the rows of one GPU."""
    first = rows.iloc[0]
    uuid = str(first.get("gpu_uuid", "") or "")
    return f"{first.get('gpu_name', 'GPU')}" + (f" ({uuid[:12]})" if uuid else "")


def gpu_slug(rows: pd.DataFrame) -> str:
    first = rows.iloc[0]
    text = f"{first.get('gpu_name', 'GPU')}-{str(first.get('gpu_uuid', '') or '')[4:12]}"
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")


def by_gpu(rows: pd.DataFrame) -> list[pd.DataFrame]:
    """The rows of each GPU (by UUID, and host where several hosts report the same UUID), in a stable order."""
    keys = [key for key in ("hostname", "gpu_uuid") if key in rows]
    if not keys or not len(rows):
        return [rows] if len(rows) else []
    filled = rows[keys].astype(object).where(rows[keys].notna(), "")
    return [group for _, group in rows.groupby([filled[key] for key in keys], sort=True)]


def plot_results(rows: pd.DataFrame, out_dir: Path, tables: Mapping[str, pd.DataFrame] | None = None) -> list[Path]:
    """Every figure the rows (and side tables) support, one set per GPU: into ``out_dir`` when the rows come from
    one GPU, else into ``out_dir/<gpu>/``. Returns the files written or found unchanged."""
    from bench.experiments import registry

    tables = tables or {}
    groups = by_gpu(rows)
    paths: list[Path] = []
    for group in groups:
        target = Path(out_dir) if len(groups) == 1 else Path(out_dir) / gpu_slug(group)
        mine = _tables_of(tables, group)
        drawn = set()
        present = set(group["experiment"].dropna())
        for name, experiment in registry().items():
            if name not in present:
                continue
            for draw in experiment.figures:
                if draw in drawn:  # a figure two experiments share (the truth table)
                    continue
                drawn.add(draw)
                for stem, figure in draw(group, mine):
                    paths += save(figure, target / stem)
    return paths


def _tables_of(tables: Mapping[str, pd.DataFrame], rows: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The side-table rows of the runs in ``rows``."""
    runs = set(rows["run_id"].dropna()) if "run_id" in rows else set()
    return {name: table[table["run_id"].isin(runs)] if "run_id" in table else table
            for name, table in tables.items()}
