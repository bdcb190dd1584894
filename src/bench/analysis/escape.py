"""Text a results file carries, escaped for where it lands outside the report (whose HTML is
:mod:`bench.report.markup`'s, which writes control characters as :func:`visible` does): a terminal, Markdown, a figure
(:func:`visible`), JSON (:func:`json_text`). A results file is untrusted input (fleets merge files from many hosts);
bench's own words come through as they are, or render as they are. Imports nothing of bench.

A control character (:data:`CONTROL`) is one that moves a terminal's cursor, starts an escape sequence, reorders the
text around it or breaks a line where none shows: C0 (U+0000-U+001F), DEL, C1 (U+0080-U+009F, U+009B a CSI of its
own), the bidirectional marks, embeddings, overrides and isolates, the line and paragraph separators, and lone
surrogates (undecodable bytes of a path: no UTF-8 writes them). Shown, each is its Python escape (``\\x1b``,
``\\u202e``): plain ASCII that every font draws (matplotlib's DejaVu Sans has no control pictures, U+2400-U+2421) and
that :func:`terminal` writes too, so a name reads the same on the terminal, in a figure and in the report."""

from __future__ import annotations

import json
import re
import string
import sys
import warnings

_INERT = "!\"%'(,/;=?"  # ASCII punctuation that makes no Markdown on one line once the rest is escaped
_STARTS = "+-"  # ... or only where the line starts (a list, a rule)
_MARKUP = re.compile(rf"^[{re.escape(_STARTS)}]|(?!(?<=\d)\.(?=\d))"
                     rf"[{re.escape(''.join(c for c in string.punctuation if c not in _INERT + _STARTS))}]")


def terminal(text: object) -> str:
    """For a terminal: every character that is not printable (an escape sequence, a line break) written as its
    Python escape, so that no text of a file moves the cursor, colours the terminal or makes a link."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in str(text))


def terminal_lines(text: object) -> str:
    """For a terminal, line by line: the line breaks stay, each line as :func:`terminal` writes it."""
    return "\n".join(terminal(line) for line in str(text).split("\n"))


def markdown(text: object) -> str:
    """For a Markdown line, heading or table cell (GitHub's): on one line, its spaces collapsed, as :func:`terminal`
    writes it, with a backslash before every ASCII punctuation character that could make Markdown (all but
    :data:`_INERT`, a decimal point, and + and - past the start), so that it makes no HTML, link, image, code,
    emphasis, heading, list, rule, math or cell break of its own; and no mention or e-mail link (a zero-width space
    after @). It renders as it was (``tests/test_documents.py`` renders it with cmark-gfm, GitHub's renderer)."""
    escaped = _MARKUP.sub(r"\\\g<0>", terminal(" ".join(str(text).split())))
    return escaped.replace("@", "@\u200b")


_FORMATS = r"\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff"  # bidi, separators, surrogates
CONTROL = re.compile(rf"[\x00-\x1f\x7f-\x9f{_FORMATS}]")  # a control character: see the module's docstring
_JSON_RAW = re.compile(rf"[\x7f-\x9f{_FORMATS}]")  # those json.dumps writes raw (it escapes every C0 control)


def visible(text: object, keep: str = "") -> str:
    """``text`` with every control character (:data:`CONTROL`) but those in ``keep`` (``"\\t\\n"``: where layout
    needs them) written as its Python escape (``\\x1b``, ``\\r``, ``\\x9b``, ``\\u202e``): shown, never obeyed,
    in a figure (a font draws them all), a report or a warning."""
    text = str(text)
    if CONTROL.search(text) is None:
        return text
    return CONTROL.sub(lambda found: found[0] if found[0] in keep else _escaped(found[0]), text)


def log_line(text: object) -> str:
    """For a line of a CI job's log: :func:`visible`, and no workflow command a runner would obey in it (the old
    form ``##[...`` anywhere, ``::`` at its start after spaces), each broken by a zero-width space."""
    shown = visible(text).replace("##[", "##\u200b[")
    return "\u200b" + shown if shown.lstrip().startswith("::") else shown


def workflow_data(text: object) -> str:
    """For a GitHub Actions workflow command's message: control characters shown (:func:`visible`), then GitHub's
    own escapes of ``%``, carriage return and line feed, so that no text ends the command or starts another."""
    return visible(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A").replace("##[", "##\u200b[")


def workflow_property(text: object) -> str:
    """For a workflow command's property (``file=``, ``title=``): :func:`workflow_data`, and ``:`` and ``,``."""
    return workflow_data(text).replace(":", "%3A").replace(",", "%2C")


def _escaped(character: str) -> str:
    return character.encode("unicode_escape").decode("ascii")


def json_text(value: object, **options) -> str:
    """``value`` as JSON (:func:`json.dumps` with ``options``), its non-ASCII text readable (``ensure_ascii=False``)
    but every control character as a ``\\uXXXX`` escape: C0 as ``json.dumps`` writes it, and DEL, C1, the
    bidirectional controls, the line and paragraph separators and lone surrogates too, which it would write raw. The
    same value to a JSON reader; nothing a terminal obeys in ``cat`` of it, and always encodable as UTF-8."""
    written = json.dumps(value, ensure_ascii=False, **options)
    return _JSON_RAW.sub(lambda found: f"\\u{ord(found[0]):04x}", written)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    text = f"bench: warning: {message} ({category.__name__}, {filename}:{lineno})"  # the text may quote a file's
    (file or sys.stderr).write(terminal(text) + "\n")


def warnings_as_lines() -> None:
    """Python's warnings (matplotlib's, numpy's) print as bench's, on one escaped line: no control byte a text
    carried, no second line of source."""
    warnings.showwarning = _show_warning
