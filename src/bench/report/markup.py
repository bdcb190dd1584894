"""The report's HTML pieces. Every value in it comes from a results file, which is untrusted input (a fleet merges
files from many hosts): each is escaped for where it lands. Text and attribute values are HTML-escaped (quotes too),
their control characters written as Python escapes (``\\x1b``: :func:`words`), a link is made only of an http(s)
URL, ids and anchors are derived (a hash of what they name, never the data), and no value of a results file lands in
CSS or in a tag or attribute name."""

from __future__ import annotations

import base64
import hashlib
import html
import struct
from collections.abc import Iterable
from urllib.parse import urlsplit

import pandas as pd

from bench.analysis.numbers import cell, plain_numbers  # noqa: F401  (the report's cells and sentences)
from bench.analysis.escape import visible

LAYOUT = "\t\n"  # the control characters the report keeps as they are: HTML whitespace
POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
# the report's Content-Security-Policy: it runs no script, loads nothing but its own embedded images
DPI = 100  # figure pixels per inch: sharp on a screen of 1.33 device pixels per CSS px
SCALE = 75 / DPI  # CSS px per figure pixel: every figure at one scale, 75 px per inch (matplotlib's 10 pt ≈ 10 px)
LONG_TABLE = 15  # rows; longer tables scroll inside a box with their header kept in view
STYLE = """
body { font-family: system-ui, sans-serif; margin: .8em auto; max-width: 1240px; padding: 0 1em; color: #222;
       line-height: 1.35 }
h1 { margin: 0 0 .1em; font-size: 1.6em } h2 { border-bottom: 2px solid #ccc; padding-bottom: .2em; margin-top: 2em }
h3 { margin: 1.4em 0 .3em } .meta, caption { color: #555 } caption { text-align: left; padding: .3em 0 }
p.meta { margin: .2em 0 } nav { margin: .3em 0; font-size: 92% } nav a { white-space: nowrap }
h2#answers { margin-top: .6em } .scroll { overflow: auto; max-width: 100% } .scroll.long { max-height: 32em }
table { border-collapse: separate; border-spacing: 0; margin: .6em 0; font-size: 88% }
th, td { border: solid #ccc; border-width: 0 1px 1px 0; padding: .2em .5em; text-align: left; vertical-align: top }
tr > :first-child { border-left-width: 1px } thead th { border-top-width: 1px }
thead th { background: #f0f0f0; position: sticky; top: 0; z-index: 2 } td.gpu { white-space: nowrap }
td.number { text-align: right; font-variant-numeric: tabular-nums }
.scroll.truth { max-height: calc(100vh - 3em) } table.truth thead { position: sticky; top: 0; z-index: 2 }
table.truth thead th { position: static; text-align: center } table.truth th.corner { text-align: left }
table.truth td { text-align: center; min-width: 4.2em; white-space: nowrap; font-variant-numeric: tabular-nums }
table.truth tbody th { position: sticky; left: 0; background: #fafafa; z-index: 1; white-space: nowrap }
table.truth .group { border-left: 3px solid #555 } table.truth tr.library > * { border-top: 3px solid #555 }
table.truth td.absent { background: repeating-linear-gradient(45deg, #fff, #fff 4px, #f2f2f2 4px, #f2f2f2 8px) }
td.contradicts { outline: 2px solid #000; outline-offset: -3px; font-weight: bold }
.good { background: #c7e9c0 } .fair { background: #fff1a8 } .poor { background: #fdd0a2 } .bad { background: #f5b3b3 }
.none { background: #e4e4e4 } .legend span { display: inline-block; padding: 0 .5em; margin: 0 .4em .3em 0;
       border: 1px solid #ccc } td.verdict { font-weight: bold; white-space: nowrap }
figure { margin: 1em 0 } figure img { max-width: 100%; height: auto; border: 1px solid #eee; display: block }
table.answers { margin: .3em 0 } table.answers td:first-child { white-space: nowrap }
figcaption { color: #555; font-size: 88% } details { margin: .5em 0 }
"""


def text(value) -> str:
    """A value as escaped text, fit for an element's content and a quoted attribute's value: its control characters
    but tab and line break (a hover text's lines) as their Python escapes (:func:`words`)."""
    return html.escape(words(cell(value)), quote=True)


def words(value: str) -> str:
    """Text with its control characters (:data:`bench.analysis.escape.CONTROL`) but tab and line break written as their
    Python escapes (``\\x1b``, ``\\r``): shown as text in the report, never run by a terminal that prints the file."""
    return visible(value, keep=LAYOUT)


def anchor(kind: str, *names) -> str:
    """The id of a section: its kind and a hash of what names it ('gpu-1a2b3c4d5e'); never the names themselves,
    which may come from a results file."""
    digest = hashlib.sha256("\0".join(map(str, names)).encode("utf-8", "surrogatepass")).hexdigest()
    return f"{kind}-{digest[:10]}"


def link(target: str, label) -> str:
    """A link to a section of the report (``target``: an id of :func:`anchor` or a fixed one)."""
    return f"<a href='#{html.escape(target, quote=True)}'>{text(label)}</a>"


def web_link(url, label) -> str:
    """A link to an http(s) URL; any other URL (javascript:, data:, a relative path) leaves the label unlinked."""
    address = cell(url).strip()
    parts = urlsplit(address) if address.isprintable() else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        return text(label)
    return f"<a href='{html.escape(address, quote=True)}'>{text(label)}</a>"


def is_number(value) -> bool:
    words = cell(value).replace("%", "").replace("×", "").strip()
    try:
        float(words)
    except ValueError:
        return False
    return True


def table(frame: pd.DataFrame, gpu: str = "", plain: bool = False) -> str:
    """``frame`` as an HTML table, with a GPU column first when ``gpu`` names one; long ones scroll in a box with
    their header in view. ``plain``: text cells' numbers without exponents (a view's formatted cells)."""
    head = "".join(f"<th>{text(column)}</th>" for column in (["GPU"] if gpu else []) + list(frame.columns))
    first = f"<td class='gpu'>{text(gpu)}</td>" if gpu else ""
    body = []
    for values in frame.itertuples(index=False):
        cells = [_td(plain_numbers(value) if plain and isinstance(value, str) else value) for value in values]
        body.append(f"<tr>{first}{''.join(cells)}</tr>")
    long = " long" if len(frame) > LONG_TABLE else ""
    return (f"<div class='scroll{long}'><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>")


def _td(value) -> str:
    return f"<td class='number'>{text(value)}</td>" if is_number(value) else f"<td>{text(value)}</td>"


def figure(stem: str, png: bytes) -> str:
    """A figure embedded at the report's one scale, its stem as caption and alternative text."""
    width, height = struct.unpack(">II", png[16:24])  # the PNG header's IHDR chunk
    encoded = base64.b64encode(png).decode()
    return (f"<figure><img alt='{text(stem)}' width='{round(width * SCALE)}' height='{round(height * SCALE)}' "
            f"src='data:image/png;base64,{encoded}'><figcaption>{text(stem)}</figcaption></figure>")


def legend(entries: Iterable[tuple[str, str, str]]) -> str:
    """(CSS class, label, meaning) of each colour."""
    spans = "".join(f"<span class='{css}'><b>{text(label)}</b>: {text(meaning)}</span>"
                    for css, label, meaning in entries)
    return f"<p class='legend'>{spans}</p>"


def contents(entries: Iterable[tuple[str, str]], lead: str = "") -> str:
    """A line of links (id, label): a section's contents."""
    links = " · ".join(link(target, label) for target, label in entries)
    return f"<nav>{text(lead)}{' ' if lead else ''}{links}</nav>" if links else ""
