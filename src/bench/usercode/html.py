"""The user-code tools' results as HTML, for a notebook (their ``_repr_html_``): the syncs table with each line's
source, the probe's verdict, a trace's headline figures with its timeline as inline SVG. Every value is escaped: a
source line, a kernel's or a file's name may hold anything (quotes, markup, control characters)."""

from __future__ import annotations

import base64
import html

from bench.analysis.escape import visible

STYLE = ("<style>.bench td, .bench th {text-align: left; padding: 2px 8px; vertical-align: top} "
         ".bench code {white-space: pre}</style>")


def text(value: object) -> str:
    """``value`` as HTML text: control characters written as escapes, markup and quotes escaped."""
    return html.escape(visible(value), quote=True)


def _table(header: tuple[str, ...], rows: list[tuple[object, ...]], code_column: int | None = None) -> str:
    head = "".join(f"<th>{text(name)}</th>" for name in header)
    body = "".join("<tr>" + "".join(f"<td><code>{text(cell)}</code></td>" if index == code_column
                                    else f"<td>{text(cell)}</td>" for index, cell in enumerate(row)) + "</tr>"
                   for row in rows)
    return f"<table class='bench'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _lines(said: list[str]) -> str:
    return "".join(f"<p>{text(line)}</p>" for line in said)


def syncs_html(found) -> str:
    """A SyncsResult: its headline, a row per waiting line (with its source), the allowed waits and host work."""
    headline = str(found).splitlines()[0]
    parts = [STYLE, f"<p><b>{text(headline)}</b></p>"]
    if found.places:
        parts.append(_table(("line", "thread", "library", "waits", "ms on its own", "CUDA call", "code"),
                            [(place.where, place.who or "-", place.library or "?", place.count,
                              f"{place.natural_ms:.1f}", ", ".join(place.cuda_calls) or "-", place.source)
                             for place in found.places], code_column=6))
    if found.allowed:
        parts.append("<p>allowed (inside <code>bench.allow_waits</code>):</p>")
        parts.append(_table(("line", "reason", "waits", "code"),
                            [(place.where, place.allowed, place.count, place.source) for place in found.allowed],
                            code_column=3))
    parts.append(_lines([f"not a wait: {place.where} stood still {place.held_ms:.0f} ms under the hold and "
                         f"{place.natural_ms:.0f} ms without it (host work): {place.source}"
                         for place in found.own_work] + ([found.cuda_calls] if found.cuda_calls else [])))
    return "".join(parts)


def probe_html(result) -> str:
    """A ProbeResult: its verdict, bold, and what it measured."""
    verdict, _, rest = str(result).partition(": ")
    return f"<p><b>{text(verdict)}</b>: {text(rest)}</p>"


def trace_html(result, svg: bytes = b"") -> str:
    """A TraceResult: its text's lines (the headline figures first) and ``svg``, its timeline, inline as an image
    (an image runs no script, whatever a name drawn in it holds)."""
    lines = str(result).splitlines()
    image = (f"<img alt='timeline' src='data:image/svg+xml;base64,{base64.b64encode(svg).decode()}'>"
             if svg else "")
    return (f"{STYLE}<div class='bench'><p><b>{text(lines[0])}</b></p>"
            + "".join(f"<p style='margin: 0'><code>{text(line)}</code></p>" for line in lines[1:])
            + image + "</div>")
