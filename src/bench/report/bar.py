"""The progress bar of report and plot on a terminal: shown once the command has run for :data:`AFTER_S` seconds (a
quick one prints none), it says what the command is doing (reading the results, then the figures drawn: of those
asked for, or so far) and is gone when the command ends. Nothing where stderr is not a terminal."""

from __future__ import annotations

import threading

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

AFTER_S = 2.0  # a command quicker than this shows no bar


class DelayedBar:
    """A context: the bar appears ``after_s`` seconds (default :data:`AFTER_S`) after it is entered, where
    ``console`` is a terminal, and goes when it is left."""

    def __init__(self, console: Console, after_s: float | None = None) -> None:
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            console=console, transient=True)
        self.task = self.bar.add_task("reading the results", total=None)
        self.timer = (threading.Timer(AFTER_S if after_s is None else after_s, self.bar.start)
                      if console.is_terminal else None)

    def __enter__(self) -> DelayedBar:
        if self.timer is not None:
            self.timer.daemon = True
            self.timer.start()
        return self

    def __exit__(self, *error) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer.join()  # a bar that was starting has started: stop takes it away
            self.bar.stop()

    def doing(self, description: str) -> None:
        """What the command does now, for the bar's text."""
        self.bar.update(self.task, description=description)

    def drawn(self, done: int) -> None:
        """``done`` figures drawn, of a number not known before (``bench plot``'s)."""
        self.bar.update(self.task, description="drawing the figures", completed=done)

    def figures(self, done: int, total: int) -> None:
        """A :data:`bench.report.figures.Progress`: ``done`` of ``total`` figures drawn."""
        self.bar.update(self.task, description="drawing the report's figures", completed=done, total=total)
