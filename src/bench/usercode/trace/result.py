"""What :func:`bench.trace` found: :class:`TraceResult`, a :class:`~bench.usercode.trace.model.Trace` that prints as
its text (:mod:`bench.usercode.trace.text`) and writes its Perfetto timeline (:mod:`bench.usercode.trace.perfetto`):
the model stands below the outputs that read it, and this stands above them."""

from __future__ import annotations

from pathlib import Path

from bench.usercode.trace.model import Trace
from bench.usercode.trace.perfetto import write
from bench.usercode.trace.text import describe


class TraceResult(Trace):
    """What :func:`bench.trace` found (see :class:`~bench.usercode.trace.model.Trace`): ``str()`` is its text,
    ``to_json()`` its JSON, ``to_perfetto(path)`` its timeline."""

    def to_perfetto(self, path, force: bool = False) -> Path:
        """Write the described run's timeline to ``path``, a JSON file Perfetto (ui.perfetto.dev) and
        chrome://tracing open (:mod:`bench.usercode.trace.perfetto`); a file there only if bench wrote it, unless
        ``force``."""
        return write(self, path, force)

    def __str__(self) -> str:
        return "\n".join(describe(self))

    def _repr_html_(self) -> str:
        """In a notebook: the text and the timeline, drawn as ``bench trace --plot`` draws it."""
        import pandas as pd

        from bench.analysis import plots
        from bench.usercode.html import trace_html
        from bench.usercode.tools import tool

        svg = plots.rendered(tool("trace").figure(pd.DataFrame(self.table()), self.target), "svg")
        return trace_html(self, svg)
