"""A one-colour PNG of a figure's size: what the tests' stand-in painters paint in place of the figure
(tests/blank_figures.py in a test's process, sitecustomize.py beside this file in a child's)."""

import io


def blank_png(figure, dpi: float) -> bytes:
    """A one-colour PNG of ``figure``'s size at ``dpi``; the figure is left open."""
    from PIL import Image

    figure.set_dpi(dpi)
    out = io.BytesIO()
    Image.new("P", figure.canvas.get_width_height(physical=True)).save(out, format="PNG")
    return out.getvalue()
