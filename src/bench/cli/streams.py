"""Where the command line's words go: a terminal gets rich's layout; anything else (a pipe, a file) plain lines,
never wrapped, padded or coloured. A stream that cannot encode a character gets its plain spelling ('->' for '→')
instead of an error. A signal that ends bench (SIGTERM, SIGHUP) ends it as Ctrl-C does, so that what it holds (a
progress bar that hid the cursor, worker processes) is let go."""

from __future__ import annotations

import codecs
import io
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console

WIDE = 1_000_000  # a table's width where nothing wraps: rich lays a table out at its natural width up to this
ENDING = (signal.SIGTERM, signal.SIGHUP)  # with SIGINT (Ctrl-C): KeyboardInterrupt, its number as its argument
PLAIN = {"→": "->", "←": "<-", "×": "x", "±": "+/-", "µ": "u", "–": "-", "—": "--", "…": "...", "≤": "<=", "≥": ">=",
         "≈": "~", "·": ".", "‘": "'", "’": "'", "“": '"', "”": '"', "•": "*", "\u00a0": " "}
ERRORS = "bench-plain"  # the codecs error handler that writes PLAIN's spellings, else a backslash escape


def _plain(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    text = error.object[error.start:error.end]
    return "".join(PLAIN.get(ch) or ch.encode("ascii", "backslashreplace").decode() for ch in text), error.end


codecs.register_error(ERRORS, _plain)


def encode_plainly() -> None:
    """stdout and stderr write what their encoding lacks plainly (:data:`PLAIN`) instead of raising."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors=ERRORS)


def open_streams() -> None:
    """A standard stream the process was started without (its descriptor closed) becomes the null device."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w"))


def flushed() -> OSError | None:
    """stdout flushed; where it cannot take what is left (a closed pipe, a full disk), the error, and stdout pointed
    at the null device, so that the interpreter's own last flush fails no more."""
    try:
        sys.stdout.flush()
        return None
    except OSError as error:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
        return error


class PlainLines(io.TextIOBase):
    """A text stream over ``stream`` that drops the spaces at the end of each line (rich pads a table's cells)."""

    def __init__(self, stream) -> None:
        super().__init__()
        self.stream = stream
        self.pending = ""

    @property
    def encoding(self) -> str:
        return getattr(self.stream, "encoding", None) or "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        *lines, self.pending = (self.pending + text).split("\n")
        for line in lines:
            self.stream.write(line.rstrip(" ") + "\n")
        return len(text)

    def flush(self) -> None:
        if self.pending:
            self.stream.write(self.pending)
            self.pending = ""
        self.stream.flush()


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """The reader went away (``| head``): as any command whose pipe closed, end with SIGPIPE's status."""
        flushed()
        raise SystemExit(128 + signal.SIGPIPE)


def console(stderr: bool = False) -> Console:
    """A rich console on stdout (or stderr): as rich has it on a terminal, else plain lines (no wrapping, padding,
    colour or escape codes)."""
    rich = _Console(stderr=stderr)  # a terminal as rich tells one (FORCE_COLOR too)
    if rich.is_terminal:
        return rich
    return _Console(file=PlainLines(sys.stderr if stderr else sys.stdout), width=WIDE, color_system=None,
                   force_terminal=False, soft_wrap=True, emoji=False, highlight=False)


def _end(number: int, frame) -> None:
    raise KeyboardInterrupt(number)


@contextmanager
def ending_as_interrupts() -> Iterator[None]:
    """SIGTERM and SIGHUP raise KeyboardInterrupt (their number its argument) while inside, as Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread handles signals
        yield
        return
    previous = {number: signal.signal(number, _end) for number in ENDING}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
