"""Drawing the report's figures: in worker processes where the machine has several CPUs (a figure takes a good
part of a second; the report of a fleet has dozens), in this one otherwise, the results in the order asked for
(the same results, the same bytes). Each PNG is stored with a palette of at most 256 colours: figures are flat
colours and anti-aliased lines, which a palette keeps at a third of the bytes."""

from __future__ import annotations

import gc
import io
import multiprocessing
import os
import pickle
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor

import pandas as pd

from bench.platform import cache
from bench.analysis import plots
from bench.analysis.escape import warnings_as_lines
from bench.report.markup import DPI
from bench.timing.phases import phase

DRAWING = "drawing figures (what the workers had not finished)"

Progress = Callable[[int, int], None]  # (figures done, figures asked for)
Paint = Callable[[object], bytes]  # a drawn figure -> its PNG (the figure closed): :func:`compact`
COLLECT_AFTER = 50_000  # a worker's objects made (less those gone) between its garbage collections (Python's: 700)


def compact(figure) -> bytes:
    """The PNG of ``figure`` at :data:`DPI` with a palette of (at most) 256 colours (an octree's: quick),
    undithered: the same picture to a reader. Drawn to raw RGBA (what a PNG of it would hold), never through a PNG
    of all its colours; its layout (constrained) laid out once, as ``savefig`` would, without the second,
    draw-less pass ``savefig`` takes for it. The figure is closed."""
    from PIL import Image

    plt, sink = plots.pyplot(), io.BytesIO()
    try:
        with plots.quiet():
            figure.set_dpi(DPI)
            width, height = figure.canvas.get_width_height(physical=True)  # Agg's canvas at DPI
            layout = figure.get_layout_engine()
            if layout is not None:
                layout.execute(figure)  # with the canvas's renderer at DPI, as savefig's first pass does
                with plt.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
                    figure.set_layout_engine(None)  # laid out: savefig draws it as it stands
            figure.savefig(sink, format="rgba", dpi=DPI)
    finally:
        plt.close(figure)
    if len(sink.getbuffer()) != 4 * width * height:
        raise ValueError(f"a {width}×{height} figure drew {len(sink.getbuffer())} bytes of RGBA")
    with Image.frombuffer("RGBA", (width, height), sink.getbuffer(), "raw", "RGBA", 0, 1) as image:
        paletted = image.convert("RGB").quantize(colors=256, method=Image.Quantize.FASTOCTREE,
                                                 dither=Image.Dither.NONE)
    out = io.BytesIO()
    paletted.save(out, format="PNG")
    return out.getvalue()


def experiment_figures(rows: pd.DataFrame, tables: dict, names: Sequence[str],
                       paint: Paint) -> list[tuple[str, str, bytes]]:
    """(experiment, stem, PNG) of every figure the views of ``names`` draw of one GPU's rows and side tables, each
    painted by ``paint``; kept in the cache by what they show and who painted them (:func:`kept`)."""
    from bench.views import in_order

    def drawn() -> list[bytes]:
        return [field for name, stem, figure in plots.draw(rows, tables, in_order(names))
                for field in (name.encode(), stem.encode(), paint(figure))]

    fields = kept(drawn, (rows, tables, list(names)), paint)
    return [(fields[at].decode(), fields[at + 1].decode(), fields[at + 2]) for at in range(0, len(fields), 3)]


def kept(draw: Callable[[], list[bytes]], shown: object, paint: Paint) -> list[bytes]:
    """``draw()``'s byte strings, from the cache where the same ``shown`` (what the figures show: rows, tables, a
    title, the drawing function's name; pickled for the key) was painted by the same ``paint`` and code before. With
    the cache off, no key is made."""
    if cache.directory() is None:
        return draw()
    painter = f"{getattr(paint, '__module__', '')}.{getattr(paint, '__qualname__', repr(paint))}"
    entry = cache.key("figures", [painter, pickle.dumps(shown, protocol=5)], cache.DRAWING)
    found = cache.get(entry)
    fields = cache.unpacked(found) if found is not None else None
    if fields is None:
        fields = draw()
        cache.put(entry, cache.packed(fields))
    return fields


def _workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _forkserver():
    """The context the workers start from: a fork server (never a fork of this process's Arrow threads) that has
    imported what drawing needs, once for every worker."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["bench.report.figures", "matplotlib.pyplot"])
    return context


def warm_up() -> None:
    """Start the workers' fork server now, where figures will be drawn in workers: it imports what they need while
    this process reads the results."""
    if _workers() > 1:
        from multiprocessing import forkserver

        _forkserver()
        forkserver.ensure_running()


def start_worker() -> None:
    """A worker leaves interrupts to the process that asked for its figures: Ctrl-C on a terminal reaches every
    process of the group, and only bench's own says so, in one line. Its warnings are bench's lines too. Its garbage
    is collected seldom, and never what it starts with (the fork server's modules): a figure makes objects by the
    hundred thousand, most of them gone once it is painted, and each collection would go over them all."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    warnings_as_lines()
    gc.freeze()
    gc.set_threshold(COLLECT_AFTER)


class Painter:
    """Figures asked for (:meth:`ask`) are drawn at once in worker processes, or where there is one CPU, when
    their result is wanted (:meth:`result`), which counts them for ``progress``. Each is painted to PNG by
    :attr:`paint`, which the figure functions it is asked for are handed: :func:`compact` as this module has it when
    the painter is made (the one seam where a test of the report's markup puts a painter that skips the pixels, for
    this process and its workers alike)."""

    def __init__(self, progress: Progress | None = None):
        self.progress = progress
        self.paint: Paint = compact
        self.asked: list[Future | tuple] = []
        self.done = 0
        self.pool: Executor | None = None

    def __enter__(self) -> Painter:
        if _workers() > 1:
            self.pool = ProcessPoolExecutor(_workers(), mp_context=_forkserver(), initializer=start_worker)
        return self

    def __exit__(self, *error) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)

    def ask(self, function: Callable, *args) -> int:
        """Ask for ``function(*args)`` (a function of this module); its ticket for :meth:`result`."""
        self.asked.append(self.pool.submit(function, *args) if self.pool is not None else (function, args))
        return len(self.asked) - 1

    def result(self, ticket: int):
        asked = self.asked[ticket]
        with phase(DRAWING):
            found = asked.result() if isinstance(asked, Future) else asked[0](*asked[1])
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, len(self.asked))
        return found
