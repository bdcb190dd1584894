"""Text a results file carries, escaped for where it lands outside the report (whose HTML is
:mod:`bench.report.markup`'s): a terminal, and Markdown. A results file is untrusted input (fleets merge files from
many hosts); bench's own words come through as they are, or render as they are. Imports nothing."""

from __future__ import annotations

_MARKDOWN = str.maketrans({"\\": "\\\\", "&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|", "`": "\\`", "*": "\\*",
                           "_": "\\_", "~": "\\~", "[": "\\[", "]": "\\]"})


def terminal(text: object) -> str:
    """For a terminal: every character that is not printable (an escape sequence, a line break) written as its
    Python escape, so that no text of a file moves the cursor, colours the terminal or makes a link."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in str(text))


def terminal_lines(text: object) -> str:
    """For a terminal, line by line: the line breaks stay, each line as :func:`terminal` writes it."""
    return "\n".join(terminal(line) for line in str(text).split("\n"))


def markdown(text: object) -> str:
    """For a Markdown line or table cell (GitHub's): on one line, as :func:`terminal` writes it, with no HTML, link,
    code, emphasis or cell break of its own."""
    return terminal(str(text).replace("\r\n", " ").replace("\n", " ")).translate(_MARKDOWN)
