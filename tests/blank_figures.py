"""Stand-ins for the painters, for tests that read what a command writes or says, not its pixels: the report's
(:func:`bench.report.figures.compact`, which ``Painter`` hands its figure functions in this process and its workers
alike) and ``bench plot``'s (:func:`bench.analysis.plots.render`). Each figure is built by its view as ever (so the same
figures, stems and warnings), then becomes a one-colour PNG of the size its picture would have (an empty SVG),
neither laid out nor drawn (a report of every synthetic experiment: a third of the CPU time). The figures are drawn
for real where their pixels or their drawing are tested (the committed H200 runs' report, the same bytes of the same
results, a file with a $ in its texts, test_plots' bandwidth figure and texts drawn as written). :func:`texts` stands
in for ``bench plot``'s painter where a test reads a figure's words."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from clone_site.blank_painting import blank_compact, blank_render


@contextlib.contextmanager
def blank_figures() -> Iterator[None]:
    """Every report and every ``bench plot`` made meanwhile in this process paints its figures blank, the report
    building them here, as a machine of one CPU does: with nothing to draw, worker processes would only add the cost
    of sending them each GPU's rows. The workers are tested where the report draws for real. bench's cache is off
    meanwhile: blank figures are never kept for a real report to find."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BENCH_CACHE_DIR", "off")  # blank figures are never kept, nor a report of them
        patch.setattr("bench.report.figures.compact", blank_compact)
        patch.setattr("bench.analysis.plots.render", blank_render)
        patch.setattr("bench.report.figures._workers", lambda: 1)
        yield


def texts(figure, fmt: str, dpi: float = 150) -> bytes:
    """A stand-in for :func:`bench.analysis.plots.render` for tests that read a figure's words: its size in pixels at ``dpi``
    (``WIDTHxHEIGHT``) on the first line, then every text it holds (titles, labels, legends, each axis's tick labels
    as its formatter writes them), one a line; nothing laid out or drawn. ``fmt`` is ignored."""
    from matplotlib.text import Text

    ticks = [label.get_text() for axes in figure.axes for label in (*axes.get_xticklabels(), *axes.get_yticklabels())]
    width, height = figure.get_size_inches() * dpi
    words = [text.get_text() for text in figure.findobj(Text)]
    return "\n".join([f"{width:.0f}x{height:.0f}", *ticks, *words]).encode()
