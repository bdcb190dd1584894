"""Results → figures (PNG and SVG), one set per GPU. pandas and matplotlib only; never imports CUDA, nor an
experiment.

Each experiment's view lists its figures (functions of one GPU's rows and side tables, :mod:`bench.views`; the
truth table two experiments share is here, with the colours and drawing helpers the views share); this module is
handed the views, in the order to draw them, picks the rows (one GPU at a time, one value of a view's
``split_axis`` at a time), draws them and writes the files. Files are reproducible: re-plotting unchanged results
writes the same bytes (fixed SVG ids, no dates), and a file whose bytes would not change is left alone.
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from bench.analysis import selection
from bench.analysis.escape import CONTROL, terminal, visible
from bench.platform.units import format_size
from bench.platform.vocabulary import PLACEMENTS, SPIN_MS, SPIN_STREAMS, DeviceVerdict, HostVerdict, Status

DPI = 150


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


def render(figure, fmt: str, dpi: float = DPI) -> bytes:
    """The figure as PNG or SVG bytes: the same figure always gives the same bytes (no dates, fixed SVG ids), marked
    as bench's (:data:`bench.results.writes.MAKER`), so that a later write may replace it."""
    from bench.results.writes import MAKER

    sink = io.BytesIO()
    metadata = {"Date": None, "Creator": MAKER} if fmt == "svg" else {"Software": MAKER}
    with quiet():
        figure.savefig(sink, format=fmt, dpi=dpi, metadata=metadata)
    return sink.getvalue()


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """A context where drawing says nothing: matplotlib's and numpy's warnings about degenerate data (one point, an
    empty legend, a glyph the font lacks) are of the figure, which shows them, not news for the user."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def rendered(figure, fmt: str, dpi: float = DPI) -> bytes:
    """:func:`render`, then the figure closed (also when rendering failed): a figure drawn to be shown once."""
    try:
        return render(figure, fmt, dpi)
    finally:
        pyplot().close(figure)


def _write_if_changed(path: Path, content: bytes) -> None:
    if path.is_file() and path.read_bytes() == content:
        return
    from bench.results.writes import write_bytes

    write_bytes(path, content)


def literal(text: str) -> str:
    """``text`` as matplotlib draws it character for character: a ``$`` in it starts no mathtext, and a control
    character (an escape sequence, a tab, a line break: :data:`bench.analysis.escape.CONTROL`) is drawn as its Python
    escape (:func:`bench.analysis.escape.visible`), so that no figure runs it nor has matplotlib warn of a glyph missing
    with the character itself in the warning."""
    return visible(text).replace("$", r"\$")


def literal_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its texts as :func:`literal` writes them: rows from a results file, which anyone may have
    written, are drawn as they are, never parsed as mathtext nor run as control characters. The frame itself when no
    text holds a ``$`` or a control character."""
    escaped = {}
    for column, texts in frame.items():
        if _needs_escaping(texts):
            escaped[column] = texts.map(lambda value: literal(value) if isinstance(value, str) else value)
    return frame.assign(**escaped) if escaped else frame


def _needs_escaping(texts: pd.Series) -> bool:
    """Whether a text in ``texts`` (a column of text, or of any Python objects) holds a ``$`` or a control
    character."""
    if isinstance(texts.dtype, pd.StringDtype):
        values = texts.to_numpy(dtype=object)
        return _special("".join(values[pd.notna(values)]))
    return texts.dtype == object and any(isinstance(value, str) and _special(value) for value in texts.to_numpy())


def _special(text: str) -> bool:
    return "$" in text or CONTROL.search(text) is not None


def save(figure, stem: Path) -> list[Path]:
    """``stem``.png and ``stem``.svg, each written only if its bytes changed."""
    plt = pyplot()
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    try:
        for path in paths:
            _write_if_changed(path, render(figure, path.suffix[1:]))
    finally:
        plt.close(figure)
    return paths


def gpu_label(rows: pd.DataFrame) -> str:
    """'NVIDIA H200 (GPU-1a2b3c4d)' for the rows of one GPU."""
    first = rows.iloc[0]
    uuid = str(first.get("gpu_uuid", "") or "")
    return f"{first.get('gpu_name', 'GPU')}" + (f" ({uuid[:12]})" if uuid else "")


def gpu_slug(rows: pd.DataFrame) -> str:
    """'NVIDIA-H200-0ae58127': a directory name for the figures of one GPU (the name's first 48 characters: a
    file's name may be long)."""
    first = rows.iloc[0]
    text = f"{str(first.get('gpu_name', 'GPU'))[:48]}-{str(first.get('gpu_uuid', '') or '')[4:12]}"
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")


def skipped(message: str) -> None:
    """The default ``on_skip`` of :func:`draw`: a warning line on stderr (a GPU's name from a file escaped)."""
    print(terminal(f"bench: warning: {message}"), file=sys.stderr)


def draw(rows: pd.DataFrame, tables: Mapping[str, pd.DataFrame], views: Mapping,
         on_skip: Callable[[str], None] = skipped) -> Iterator[tuple[str, str, object]]:
    """(experiment, file stem, matplotlib figure) for every figure one GPU's rows (and side tables) support, by the
    ``views`` (experiment -> :class:`bench.views.View`, in the order to draw them: :func:`bench.views.in_order`). An
    experiment whose view has a ``split_axis``, measured at several values of it, gets one set of figures per value,
    its stems suffixed with the value ('overlap_scaling-1GiB'). A view is handed only the columns it declares
    (``View.reads``). Texts are drawn literally (:func:`literal_rows`); a figure its rows cannot give (a file altered
    by hand) is left out, ``on_skip`` told why in one line."""
    drawn = set()
    rows = literal_rows(rows)
    tables = {name: literal_rows(table) for name, table in tables.items()}
    present = set(rows["experiment"].dropna())
    for name, view in views.items():
        if name not in present:
            continue
        mine = selection.only(rows, view.reads())
        for function in view.figures:
            if function in drawn:  # a figure two experiments share (the truth table)
                continue
            drawn.add(function)
            for suffix, part in _split(mine, name, view.split_axis):
                for stem, figure in _figures(function, part, tables, on_skip):
                    fit_titles(figure)
                    yield name, stem + suffix, figure


def _figures(function: Callable, rows: pd.DataFrame, tables: Mapping, on_skip: Callable[[str], None]) -> list:
    """``function``'s figures of ``rows``; none, ``on_skip`` told why, where the rows break it."""
    plt = pyplot()
    before = set(plt.get_fignums())
    try:
        with quiet():
            return function(rows, tables)
    except Exception as error:  # rows from an untrusted file: one figure fewer, never a crash
        for number in set(plt.get_fignums()) - before:
            plt.close(number)
        reason = (str(error).splitlines() or [""])[0][:200]
        on_skip(f"left out {function.__name__} of {gpu_label(rows)}: its rows cannot be drawn "
                f"({type(error).__name__}: {reason})")
        return []


def fit_titles(figure) -> None:
    """Wrap the figure's own texts (its title, a footnote) at its width: one wider than the figure would be cut off
    at both edges. Constrained layout makes room for the lines this adds."""
    for text in figure.texts:
        text.set_wrap(True)


def _split(rows: pd.DataFrame, name: str, axis: str) -> list[tuple[str, pd.DataFrame]]:
    mine = rows["experiment"] == name
    values = sorted(rows.loc[mine, axis].dropna().unique()) if axis and axis in rows else []
    if len(values) < 2:
        return [("", rows)]
    return [(f"-{format_size(int(value)).replace(' ', '')}", rows[~mine | (rows[axis] == value).fillna(False)])
            for value in values]


def plot_results(rows: pd.DataFrame, out_dir: Path, views: Mapping,
                 tables: Mapping[str, pd.DataFrame] | None = None, formats: Sequence[str] = ("png", "svg"),
                 force: bool = False, progress: Callable[[int], None] | None = None) -> list[Path]:
    """Every figure the rows (and side tables) support by the ``views`` (see :func:`draw`), one set per GPU: into
    ``out_dir`` when the rows come from one GPU, else into ``out_dir/<gpu>/``. All or nothing: the figures are
    rendered into a temporary directory and moved in only once every one rendered, and none where a file they would
    replace is not bench's (``force``: any regular file). ``progress`` hears how many figures are drawn, after each.
    Returns the files written or found unchanged (a file whose bytes would not change is left alone), each in
    ``formats``."""
    out_dir = Path(out_dir)
    groups = selection.by_gpu(rows)
    paths: list[Path] = []
    with tempfile.TemporaryDirectory(prefix=".bench-plot-", dir=_nearest_directory(out_dir)) as name:
        staging = Path(name)
        for _, group in groups:
            part = Path() if len(groups) == 1 else Path(gpu_slug(group))
            for _, stem, figure in draw(group, tables_of(tables or {}, group), views):
                paths += _stage(figure, staging, out_dir, part / stem, formats)
                if progress is not None:
                    progress(len(paths) // len(formats))
        _move_in(staging, out_dir, force)
    return paths


def _nearest_directory(path: Path) -> Path:
    """``path`` or its nearest existing parent: where a temporary directory beside it can go."""
    while not path.exists():
        path = path.parent
    return path


def _stage(figure, staging: Path, out_dir: Path, stem: Path, formats: Sequence[str]) -> list[Path]:
    """``stem`` rendered in each of ``formats``: into ``staging`` where its bytes differ from those in ``out_dir``."""
    paths = []
    try:
        for fmt in formats:
            relative = stem.with_name(f"{stem.name}.{fmt}")
            content = render(figure, fmt)
            target = out_dir / relative
            if not (target.is_file() and target.read_bytes() == content):
                (staging / relative).parent.mkdir(parents=True, exist_ok=True)
                (staging / relative).write_bytes(content)
            paths.append(target)
    finally:
        pyplot().close(figure)
    return paths


def _move_in(staging: Path, out_dir: Path, force: bool) -> None:
    """Every file under ``staging`` to its place under ``out_dir``, each replaced whole; every place is checked
    first (:func:`bench.results.writes.replaceable`: never through a symlink, never a file bench did not write unless
    ``force``), so a refusal writes none of them."""
    from bench.results.writes import replaceable, write_bytes, writer

    staged = sorted(path for path in staging.rglob("*") if path.is_file())
    for path in staged:
        replaceable(out_dir / path.relative_to(staging), writer("plot", "--out"), force)
    for path in staged:
        write_bytes(out_dir / path.relative_to(staging), path.read_bytes())


def tables_of(tables: Mapping[str, pd.DataFrame], rows: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The side-table rows of the runs and GPUs in ``rows`` (a table written before side tables named their GPU
    matches by run alone)."""
    chosen = {}
    for name, table in tables.items():
        for key in ("run_id", "gpu_uuid", "hostname"):
            if key in table and key in rows and table[key].notna().any():
                table = table[table[key].isin(set(rows[key].dropna()))]
        chosen[name] = table
    return chosen


# --- figures several experiments share -----------------------------------------------------------------------

DIRECTION_COLORS = {"H2D": "#1f77b4", "D2H": "#d62728", "BIDIR": "#2ca02c", "D2D": "#9467bd"}
VERDICT_COLORS = {HostVerdict.RETURNS: "#4daf4a", HostVerdict.OWN_WORK: "#ffd92f",
                  HostVerdict.WAITS_FOR_DEVICE: "#e41a1c", HostVerdict.UNCLEAR: "#bdbdbd",
                  DeviceVerdict.OVERLAPS: "#4daf4a", DeviceVerdict.PARTIAL: "#ff7f00",
                  DeviceVerdict.SERIALIZES: "#e41a1c"}


def cell_ms(value) -> str:
    """A truth-table cell's host time in ms, two significant digits, never in another unit: '56', '0.13', '0.0072'."""
    value = float(value)
    return np.format_float_positional(value, precision=2, fractional=False, trim="-") if np.isfinite(value) else "?"


def truth_cell(plt, ax, x: float, y: float, verdict: str, text: str, contradicts: bool) -> None:
    """One truth-table cell: coloured by ``verdict``, ``text`` in the middle, a bold ``!`` at its right edge where
    the measurement contradicts the documentation. The table has set ``ax``'s limits: the cell is added without
    ``add_patch``'s update of the data limits (most of a cell's cost), which set limits never read."""
    ax.add_artist(plt.Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=VERDICT_COLORS.get(verdict, "w"),
                               edgecolor="white", linewidth=1.5))
    ax.text(x, y, text, ha="center", va="center", fontsize=6.5)
    if contradicts:
        ax.text(x + 0.44, y, "!", ha="right", va="center", fontsize=10, fontweight="bold")


def truth_legend(plt, figure, verdicts, what_blank: str, ncol: int) -> None:
    """The truth tables' legend: the ``verdicts``' colours, what a blank cell and a ``!`` mean."""
    from matplotlib.lines import Line2D

    handles = [plt.Rectangle((0, 0), 1, 1, color=VERDICT_COLORS[verdict]) for verdict in verdicts]
    handles += [plt.Rectangle((0, 0), 1, 1, facecolor="white", edgecolor="0.6"),
                Line2D([], [], linestyle="none", marker="$!$", markersize=8, color="black")]
    labels = [str(verdict) for verdict in verdicts] + [f"blank: {what_blank}", "contradicts the documentation"]
    figure.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize=8)


def _truth_panel(plt, ax, rows: pd.DataFrame, calls: list[str], columns: list[tuple[str, str]], annotate) -> None:
    """One cell per (call, placement × spinning stream), coloured by verdict; ``!`` where it contradicts the docs."""
    ax.set_xlim(-0.5, len(columns) - 0.5)
    ax.set_ylim(len(calls) - 0.5, -0.5)
    cells = {(row["call"], row["placement"], row["spin_stream"]): row for _, row in rows.iterrows()}
    for y, call in enumerate(calls):
        for x, (spin, placement) in enumerate(columns):
            row = cells.get((call, placement, spin))
            if row is not None:
                truth_cell(plt, ax, x, y, row["verdict"], annotate(row), selection.contradicts_docs(row))
    ax.set_xticks(range(len(columns)), [f"{placement}\n({spin})" for spin, placement in columns], fontsize=7)
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(calls)), calls, fontsize=7.5)
    for x in range(1, len(columns)):
        if columns[x][0] != columns[x - 1][0]:
            ax.axvline(x - 0.5, color="k", linewidth=1.5)


def truth_table_figure(rows: pd.DataFrame, tables: dict) -> list:
    """The blocking truth table: does the call hold the host (left), do two kernels around it still overlap
    (right); calls × placement and spinning stream, host ms in each cell."""
    panels = [(name, rows[(rows["experiment"] == name) & (rows["status"] == Status.OK)])
              for name in ("blocking", "serialization")]
    panels = [(name, ok) for name, ok in panels if len(ok)]
    if not panels:
        return []
    plt = pyplot()
    calls = list(dict.fromkeys(call for _, ok in panels for call in ok["call"]))
    figure, axes = plt.subplots(1, len(panels), figsize=(9.5 * len(panels), 0.3 * len(calls) + 2.6), squeeze=False,
                                constrained_layout=True)
    for ax, (name, ok) in zip(axes[0], panels):
        present = set(zip(ok["spin_stream"], ok["placement"]))
        columns = [(spin, placement) for spin in SPIN_STREAMS for placement in PLACEMENTS
                   if (spin, placement) in present]
        if name == "blocking":
            _truth_panel(plt, ax, ok, calls, columns, lambda row: cell_ms(row["host_ms"]))
            ax.set_title(f"host: does the call return while a {SPIN_MS:g} ms kernel runs? (cell: host time, ms)",
                         fontsize=10)
        else:
            _truth_panel(plt, ax, ok, calls, columns, lambda row: "host" if row["host_waited"] else "")
            ax.set_title("device: do kernels on two streams around the call overlap? (\"host\": the call held the "
                         "host)", fontsize=10)
        if ax is not axes[0][0]:
            ax.set_yticks(range(len(calls)), [""] * len(calls))
    truth_legend(plt, figure, VERDICT_COLORS, "not measured (the call takes no such stream)", len(VERDICT_COLORS) + 2)
    env = panels[0][1].iloc[0]
    figure.suptitle(f"Which CUDA calls block, on {gpu_label(panels[0][1])} (driver {env['driver_version']}); "
                    "columns: the call's stream (the spinning stream's kind); ! = contradicts the CUDA documentation",
                    fontsize=10)
    return [("blocking_truth_table", figure)]
