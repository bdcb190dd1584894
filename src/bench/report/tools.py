"""The report's sections of the tools' own results (``bench syncs --save``, ``bench trace --save``, any tool of
:data:`bench.usercode.tools.TOOLS` with a table and a section): each tool's :class:`~bench.usercode.tools.Section`
laid out alike, a part per GPU, numbers as the command line prints them, figures drawn by the tool's figure."""

from __future__ import annotations

import html
import math
import numbers
from collections.abc import Callable, Mapping

import pandas as pd

from bench.analysis.selection import Gpu
from bench.report.figures import Paint, Painter, compact, kept
from bench.report.markup import anchor, cell, contents, figure, table, text, words
from bench.platform.lazy import Name
from bench.usercode.tools import Figure, Section, Tool, saved

Drawn = Callable[[Figure], bytes]  # a section's figure -> its PNG


def sections(tables: Mapping[str, pd.DataFrame | None]) -> list[tuple[Tool, Section]]:
    """Each tool with a section and rows in ``tables`` (tool name -> rows of its results files), in the tools' order,
    with its section of them."""
    return [(tool, tool.section(tables[tool.name])) for tool in saved()
            if tool.section is not None and tables.get(tool.name) is not None and len(tables[tool.name])]


def entries(found: list[tuple[Tool, Section]]) -> list[tuple[str, str]]:
    """The report's contents entries of the tools' sections."""
    return [(tool.name, tool.title) for tool, _ in found]


def asked(painter: Painter, found: list[tuple[Tool, Section]]) -> Drawn:
    """Ask ``painter`` for every figure of the tools' sections now (the workers draw them while the rest is laid
    out); how a section then gets each one's PNG."""
    tickets = {picture: painter.ask(tool_figure, tool.figure, picture.rows, picture.title, painter.paint)
               for tool, section in found for part in section.parts for picture in part.figures}
    return lambda picture: painter.result(tickets[picture])


def tool_figure(figure: Name, rows: pd.DataFrame, title: str, paint: Paint = compact) -> bytes:
    """The PNG of a tool's ``figure`` of ``rows``, painted by ``paint`` (a function the report's figure workers can
    be handed); kept in the cache by what it shows and who painted it."""
    return kept(lambda: [paint(figure(rows, title))], (figure.module, figure.name, rows, title), paint)[0]


def formatted(value, spec: str) -> str:
    """A number as the command line prints it (``spec``: a format spec); other values as :func:`cell` has them."""
    if spec and isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value):
        return format(float(value), spec)
    return cell(value)


def shown(rows: pd.DataFrame, columns: Mapping[str, tuple[str, str]]) -> pd.DataFrame:
    """The ``columns`` of ``rows`` there are, formatted and under their headers."""
    present = [column for column in columns if column in rows]
    return pd.DataFrame({columns[column][0]: [formatted(value, columns[column][1]) for value in rows[column]]
                         for column in present})


def _label(gpu: Gpu) -> str:
    return f"{gpu.short} on {gpu.host}" if gpu.host else gpu.short


def tool_section(tool: Tool, section: Section, drawn: Drawn | None = None) -> str:
    """Tool ``tool``'s section: its heading, its GPUs' contents and note, then per GPU its sentence, table and figures
    (drawn by ``drawn``; default: here and now). The tool's own words are escaped as text; its rows' values, as every
    value of a results file, by :mod:`bench.report.markup`."""
    if drawn is None:
        drawn = lambda picture: tool_figure(tool.figure, picture.rows, picture.title)  # noqa: E731
    parts = [f"<h2 id='{tool.name}'>{_words(tool.title)} (bench {tool.name})</h2>",
             contents([(anchor(tool.name, part.gpu.host, part.gpu.uuid), _label(part.gpu)) for part in section.parts],
                      "GPUs:")]
    if section.note:
        parts.append(f"<p class='meta'>{_words(section.note)}</p>")
    for part in section.parts:
        parts.append(f"<h3 id='{anchor(tool.name, part.gpu.host, part.gpu.uuid)}'>{text(_label(part.gpu))}</h3>")
        if part.sentence:
            parts.append(f"<p>{_words(part.sentence)}</p>")
        if part.rows is not None and len(part.rows):
            parts.append(table(shown(part.rows, section.columns)))
        parts += [figure(picture.caption, drawn(picture)) for picture in part.figures]
    return "".join(parts)


def _words(said: str) -> str:
    """A tool's own words as an element's text (quotes need no escaping there), any control character of a name
    in them (a target's, a file's) written as its Python escape (:func:`bench.report.markup.words`)."""
    return html.escape(words(said), quote=False)
