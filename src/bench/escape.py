"""Text a results file carries, escaped for where it lands outside the report (whose HTML is
:mod:`bench.report.markup`'s): a terminal, and Markdown. A results file is untrusted input (fleets merge files from
many hosts); bench's own words come through as they are, or render as they are. Imports nothing."""

from __future__ import annotations

import re
import string

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
