"""A one-colour PNG of a figure's size: what the tests' stand-in painters paint in place of the figure, for
:func:`bench.analysis.plots.render` and :func:`bench.report.figures.compact` alike (tests/blank_figures.py in a test's
process, sitecustomize.py beside this file in a child's)."""

import io


def blank_png(figure, dpi: float) -> bytes:
    """A one-colour PNG of ``figure``'s size at ``dpi``; the figure is left open."""
    from PIL import Image

    figure.set_dpi(dpi)
    out = io.BytesIO()
    Image.new("P", figure.canvas.get_width_height(physical=True)).save(out, format="PNG")
    return out.getvalue()


def blank_compact(figure) -> bytes:
    """:func:`bench.report.figures.compact` without drawing: a blank PNG of the figure's size at the report's DPI;
    the figure is closed."""
    from bench.analysis import plots
    from bench.report.markup import DPI

    try:
        return blank_png(figure, DPI)
    finally:
        plots.pyplot().close(figure)


def blank_render(figure, fmt: str, dpi: float = 150) -> bytes:
    """:func:`bench.analysis.plots.render` without drawing: a blank PNG of the figure's size, or an empty SVG."""
    return blank_png(figure, dpi) if fmt == "png" else b"<svg xmlns='http://www.w3.org/2000/svg'/>\n"
