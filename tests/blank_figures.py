"""A stand-in for the report's painter (:func:`bench.report.figures.compact`, which ``Painter`` hands its figure
functions in this process and its workers alike) for tests that read a report's markup, not its pixels: each figure
is built by its view as the report builds it (so the same figures, stems and warnings), then becomes a one-colour PNG
of the size its picture would have, neither laid out nor drawn (a report of every synthetic experiment: a third of
the CPU time). The figures' pixels are tested where the report draws them for real (the committed H200 runs'
report, the same bytes of the same results, a file with a $ in its texts)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from clone_site import blank_painting


def blank_png(figure) -> bytes:
    """A one-colour PNG of ``figure``'s size at the report's DPI (as :func:`bench.report.figures.compact` would draw
    it); the figure is closed."""
    from bench import plots
    from bench.report.markup import DPI

    try:
        return blank_painting.blank_png(figure, DPI)
    finally:
        plots.pyplot().close(figure)


@contextlib.contextmanager
def blank_figures() -> Iterator[None]:
    """Every report made meanwhile in this process (``bench report`` too) paints its figures with :func:`blank_png`,
    and builds them here, as a machine of one CPU does: with nothing to draw, worker processes would only add the
    cost of sending them each GPU's rows. The workers are tested where the report draws for real."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("bench.report.figures.compact", blank_png)
        patch.setattr("bench.report.figures._workers", lambda: 1)
        yield
