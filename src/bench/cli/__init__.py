"""``python -m bench {sweep,plot,claims,compare,report,probe,syncs,trace,env}``: parse the arguments, call the
library, print.

A user's mistake (bad argument, no GPU, unreadable results file, a place bench cannot write) is one line on stderr
and exit status 2, and nothing is written. A sweep interrupted with Ctrl-C (SIGINT) or SIGTERM keeps its finished
rows, says where it stopped and exits 130 (143 for SIGTERM); ``--resume FILE`` finishes it.

The package: :mod:`.parser` (every command and option; :mod:`.options`, what several share), and a module per
command family, each importing the bench modules it needs at its top and imported only when its command runs:
:mod:`.measuring` (sweep, env), :mod:`.results` (plot, claims, compare, and the report made anew; what claims and
compare print is :mod:`bench.analysis.documents`), :mod:`.reporting` (report: one kept in the cache, without pandas,
else :mod:`.results`'s), :mod:`.usercode` (probe, syncs, trace). It may import any bench module; none imports it.
"""

from __future__ import annotations

import errno
import signal
import sys
from pathlib import Path

import bench
from bench.results import arrow_threads
from bench.platform.arguments import values_kept
from bench.cli import streams
from bench.cli.parser import COMMANDS
from bench.cli.parser import parser as _parser
from bench.platform.errors import UsageError
from bench.analysis.escape import terminal, warnings_as_lines
from bench.timing import phases


def _version() -> str:
    """'cuda-sync-bench 0.1.0': the installed distribution that bench came from, and its version."""
    import importlib.metadata  # here, not at the top: it costs every command's start ~15 ms

    try:
        return f"{bench.DISTRIBUTION} {importlib.metadata.version(bench.DISTRIBUTION)}"
    except importlib.metadata.PackageNotFoundError:
        return f"bench {bench.__version__} (not installed: {Path(bench.__file__).parent})"


def main(argv: list[str] | None = None, began: float | None = None) -> int:
    """The command's exit status; ``began``: the ``perf_counter`` at bench's first line (``-v`` counts the
    interpreter's start and bench's imports from it)."""
    if began is not None:
        phases.started(began)
    else:
        phases.restarted()
    streams.open_streams()
    streams.encode_plainly()
    warnings_as_lines()
    status = _answered(sys.argv[1:] if argv is None else argv)
    unwritten = streams.flushed()  # stdout a closed pipe or a full disk: said once, never at the interpreter's exit
    if unwritten is None:
        return status
    if unwritten.errno == errno.EPIPE:  # the reader went away (| head): nothing to say to anyone
        return 128 + signal.SIGPIPE
    _say(f"bench: error: cannot write the output: {unwritten.strerror or unwritten}")
    return status or 2


def _answered(argv: list[str]) -> int:
    try:
        with streams.ending_as_interrupts():
            return _run(argv)
    except UsageError as error:
        _say(f"bench: error: {error}")  # one line, whatever a results file said
        return 2
    except OSError as error:  # the system refused a path (too long, a loop of links...) or the output
        if error.errno == errno.EPIPE:  # the reader of stdout went away: no one to tell
            return 128 + signal.SIGPIPE
        if error.filename is None:  # the output: what is left of it goes nowhere, and is said once
            streams.flushed()
        what = error.filename if error.filename is not None else "cannot write the output"
        _say(f"bench: error: {what}: {error.strerror or error}")
        return 2
    except KeyboardInterrupt as interrupt:
        number = interrupt.args[0] if interrupt.args and isinstance(interrupt.args[0], int) else signal.SIGINT
        _say("bench: interrupted" if number == signal.SIGINT else f"bench: ended by {signal.Signals(number).name}")
        return 128 + number
    finally:
        arrow_threads.wait_until_idle()  # else a pyarrow worker can abort the exiting interpreter


def _run(argv: list[str]) -> int:
    with phases.phase(phases.IMPORTS):
        args = _parser().parse_args(values_kept(argv, ("--sizes",)) if argv[:1] == ["sweep"] else argv)
    if args.version:
        print(_version())
        return 0
    if args.command is None:  # bare `python -m bench`: a mistake, with where to look
        raise UsageError(f"name a command: {COMMANDS} (python -m bench --help says what each does)")
    status = args.handler(args, streams.console())
    if getattr(args, "verbose", False):
        _say_phases()
    return status


def _say_phases() -> None:
    """Where the command's seconds went (``-v``), one phase a line on stderr, the longest first."""
    found = phases.command_phases()
    total = sum(each.seconds for each in found)
    _say(f"bench: {total:.2f} s in all, by phase:")
    for each in sorted(found, key=lambda each: -each.seconds):
        _say(f"bench: {each.seconds:7.3f} s {each.seconds / total if total else 0:4.0%} {each.name}")


def _say(line: str) -> None:
    try:
        print(terminal(line), file=sys.stderr)
    except OSError:  # stderr closed or full: there is no one to tell
        pass
