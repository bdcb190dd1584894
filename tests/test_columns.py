"""Every reader of the report's rows reads only the columns it declares, for the report hands each only those (an
experiment's rows are selected once, of a few columns, not the suite's 165): a view (``View.reads``) gives the same
headline, answer and figures of only its columns and side tables (``View.tables``) as of every column and table, and
so do a GPU's section (its experiments' rows as :func:`bench.report.gpu.by_experiment` hands them) and the claims
(``claims.COLUMNS``). Checked on every experiment's synthetic rows (with a failed row each) and on a committed run of
a real GPU. Every figure drawn here of every column (and so of a view's own, which must show the same) also keeps the
contract ``bench plot`` and the report rely on: a figure with axes under a file stem, no text of its own cut off at
its sides; and of the synthetic rows, each figure function draws one at least."""

import functools
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import synthetic
from bench.analysis import claims, plots
from bench.results import store
from bench.analysis.selection import Gpu, only
from bench.experiments import registry
from bench.analysis.results import GpuResults, Results
from bench.report.gpu import gpu_section
from bench.views import View, in_order, views

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = sorted((ROOT / "results").glob("*.parquet"))[-1]  # the newest headline run: a default sweep


@functools.cache  # made once for the tests a worker runs (they only read them)
def synthetic_results() -> tuple[pd.DataFrame, dict]:
    """Every experiment's rows and a failed row of each, on one GPU, and the overlap timeline."""
    records = synthetic.all_records()
    failed = [row for name in synthetic.RECORDS for row in synthetic.failed_records(name)[:1]]
    rows = synthetic.frame(records + failed)
    return rows, {"timeline": synthetic.overlap_timeline(rows[rows["experiment"] == "overlap"])}


@functools.cache
def committed_results() -> tuple[pd.DataFrame, dict]:
    return store.read(COMMITTED, store.suite_schema(registry())), store.side_tables(COMMITTED)


def drawn(figure) -> list[str]:
    """What a figure shows, artist by artist (texts, lines, patches, collections, images; of each axis, its ticks'
    places and labels), without rendering it or making its tick artists."""
    from matplotlib.axis import Axis
    from matplotlib.collections import Collection
    from matplotlib.image import AxesImage
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.text import Text

    found = []

    def visit(artist) -> None:
        kind = type(artist).__name__
        if isinstance(artist, Axis):  # its ticks as its locator and formatter place and label them
            places = artist.get_majorticklocs()
            found.append(repr((kind, artist.axis_name, list(places), artist.major.formatter.format_ticks(places))))
            children = [artist.label, artist.offsetText]
        else:
            children = artist.get_children()
        if isinstance(artist, Text):
            found.append(repr((kind, artist.get_text(), artist.get_position(), artist.get_color())))
        elif isinstance(artist, Line2D):
            found.append(repr((kind, artist.get_xydata().tolist(), artist.get_color(), artist.get_linestyle())))
        elif isinstance(artist, Patch):
            found.append(repr((kind, np.asarray(artist.get_verts()).tolist(), artist.get_facecolor())))
        elif isinstance(artist, Collection):
            found.append(repr((kind, [path.vertices.tolist() for path in artist.get_paths()],
                               artist.get_offsets().tolist(), artist.get_facecolor().tolist())))
        elif isinstance(artist, AxesImage):
            found.append(repr((kind, artist.get_array().tolist())))
        for child in children:
            visit(child)

    visit(figure)
    return found


def cut_off(figure) -> list[str]:
    """The figure's own texts (its title: the library truth table's is long) that do not lie inside it from side to
    side once :func:`bench.analysis.plots.fit_titles` wrapped them, as :func:`bench.analysis.plots.draw` does. Each is measured with
    the renderer a draw uses, without laying out or drawing the figure: a layout moves a figure's title up or down,
    never sideways, so its left and right edges are what a draw finds."""
    plots.fit_titles(figure)
    extents = [(text.get_text()[:40], text.get_window_extent()) for text in figure.texts]
    return [said for said, extent in extents if extent.x0 < 0 or extent.x1 > figure.bbox.width]


def shown(function, rows: pd.DataFrame, tables: dict, contract: bool = False) -> list[tuple[str, list[str]]]:
    """(stem, what it shows) of each figure the figure function ``function`` draws of ``rows``, handed them as they
    are (:func:`bench.analysis.plots.draw` hands them only the columns the view declares). ``contract``: each must also be a
    figure with axes under a file stem, no text of its own cut off (AssertionError naming the stem otherwise)."""
    from matplotlib.figure import Figure

    found = []
    for stem, figure in function(plots.literal_rows(rows), tables):
        try:
            found.append((stem, drawn(figure)))
            if contract:
                assert isinstance(figure, Figure) and figure.axes and re.fullmatch(r"[a-z0-9_]+", stem), f"{stem!r}"
                outside = cut_off(figure)
                assert not outside, f"{stem}: cut off at its sides: {outside}"
        finally:
            plots.pyplot().close(figure)
    return found


@functools.cache  # of every column: the same for each view that draws with ``function`` (blocking, serialization)
def shown_of_all(function, results) -> list[tuple[str, list[str]]]:
    """What ``function`` shows of every column; its figures keep the contract. Of only the columns a view declares,
    it must show the same, figure by figure and artist by artist, so those keep it too and are not measured again."""
    return shown(function, *results(), contract=True)


def differences(view: View, results) -> list[str]:
    """What ``view`` shows differently of the rows ``results()`` makes given only the columns and side tables it
    declares (an undeclared column it reads raises, or silently changes what it shows)."""
    rows, tables = results()
    name, narrow = view.name, only(rows, view.reads())
    tables = {table: tables[table] for table in view.tables if table in tables}
    mine, narrow_mine = rows[rows["experiment"] == name], narrow[narrow["experiment"] == name]
    found = []
    try:
        table, narrow_table = view.headline(mine), view.headline(narrow_mine)
        pd.testing.assert_frame_equal(table, narrow_table)
        if view.answer(mine, table) != view.answer(narrow_mine, narrow_table):
            found.append(f"{name}: its answer")
        if any(shown_of_all(function, results) != shown(function, narrow, tables) for function in view.figures):
            found.append(f"{name}: its figures")
    except (KeyError, AssertionError) as error:
        found.append(f"{name}: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
    return found


RESULTS = pytest.mark.parametrize("results", [synthetic_results, committed_results], ids=["synthetic", "committed"])


@RESULTS
def test_every_view_reads_only_the_columns_it_declares(results):
    rows, _ = results()
    present = set(rows["experiment"])
    checked = [view for name, view in views().items() if name in present]
    assert len(checked) >= (len(views()) if results is synthetic_results else 10)
    assert [problem for view in checked for problem in differences(view, results)] == []
    if results is synthetic_results:  # every experiment measured: each figure function draws
        assert [function.__name__ for view in checked for function in view.figures
                if not shown_of_all(function, results)] == []


def test_a_view_that_reads_an_undeclared_column_is_found():
    bandwidth = views()["bandwidth"]
    quiet = View("bandwidth", bandwidth.headline, bandwidth.answer, bandwidth.figures,
                 columns=tuple(column for column in bandwidth.columns if column != "l2_cache_bytes"))
    loud = View("bandwidth", bandwidth.headline, bandwidth.answer,
                columns=tuple(column for column in bandwidth.columns if column != "gbps"))
    assert differences(quiet, synthetic_results) == ["bandwidth: its figures"]  # read with .get: a line left out
    assert differences(loud, synthetic_results)[0].startswith("bandwidth: KeyError")


@RESULTS
def test_a_gpus_section_reads_only_the_columns_it_is_handed(results):
    rows, _ = results()
    experiments = registry()
    part = Results(rows, experiments, in_order(experiments)).gpus[0]
    handed = part.experiments
    assert len(handed) >= 17 and all(len(frame.columns) < len(rows.columns) / 3 for frame in handed.values())
    whole = {name: rows[rows["experiment"] == name] for name in handed}
    views = in_order(experiments)

    def section(experiment_rows: dict) -> list[str]:
        made = {name: views[name].headline(mine) for name, mine in experiment_rows.items() if name in views}
        return gpu_section(GpuResults(Gpu("host", "GPU-1", "GPU"), rows, experiment_rows, made), "", experiments,
                           views, lambda name: [], lambda name: "")

    assert section(handed) == section(whole)


@RESULTS
def test_the_claims_read_only_the_columns_they_declare(results):
    rows, _ = results()
    judged = [claim.judge(rows) for claim in claims.CLAIMS]
    assert sum(judgement is not None for judgement in judged) >= 10
    assert [claim.judge(only(rows, claims.COLUMNS)) for claim in claims.CLAIMS] == judged
