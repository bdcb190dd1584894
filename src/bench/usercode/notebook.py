"""bench in a Jupyter notebook or IPython: ``%load_ext bench`` registers ``%syncs EXPR`` and ``%probe EXPR`` (the
expression evaluated in the notebook's namespace is the region) and the cell magics ``%%syncs`` and ``%%trace`` (the
cell is the region). Lines are named as the notebook shows them, ``In [5]:3``: a cell run by the magic, and a function
an earlier cell defined. The result is the magic's value, shown as HTML (its ``_repr_html_``). Where the magic cannot
run (no GPU, no CUPTI, a busy or unfit GPU) it prints one line and returns nothing.
"""

from __future__ import annotations

import dataclasses
import linecache
import re
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

from bench.platform.errors import UsageError

LINE = re.compile(r"(.*):(\d+)( in .*)?", re.DOTALL)  # 'file:line in function', a file holding ':' too
USAGE = {"syncs": "%syncs EXPR, or %%syncs over a cell", "probe": "%probe EXPR",
         "trace": "%%trace [--runs N] [--perfetto FILE.json] over a cell"}


def load(shell) -> None:
    """Register bench's magics with IPython's ``shell``."""
    shell.register_magic_function(lambda line, cell=None: _syncs(shell, line, cell), "line_cell", "syncs")
    shell.register_magic_function(lambda line: _probe(shell, line), "line", "probe")
    shell.register_magic_function(lambda line, cell=None: _trace(shell, line, cell), "cell", "trace")


def _answered(magic: str, work: Callable[[], object]):
    """``work()``, or one line (no traceback) where bench cannot answer: no GPU, no CUPTI, an unfit GPU, a file it
    may not write, a magic misused. What the user's own code raises is raised as it is."""
    from bench.platform.env import no_gpu_reason
    from bench.platform.errors import WriteError
    from bench.timing import MeasurementFailed
    from bench.usercode.activity import TraceUnavailable

    reason = no_gpu_reason()
    if reason:
        print(f"{magic} needs a GPU: {reason}", file=sys.stderr)
        return None
    try:
        return work()
    except (UsageError, WriteError, MeasurementFailed, TraceUnavailable) as error:
        print(f"{magic}: {str(error).splitlines()[0] if str(error) else type(error).__name__}", file=sys.stderr)
        return None


def _compiled(shell) -> dict[str, int]:
    """IPython's record of the files it compiled cells into: file -> the cell's number."""
    return getattr(getattr(shell, "compile", None), "_filename_map", {})


def cell_label(shell, file: str) -> str:
    """'In [5]' for a file IPython compiled a cell into (``file`` itself otherwise)."""
    number = _compiled(shell).get(file)
    return f"In [{number}]" if number is not None else file


def _running_cell(shell):
    """The innermost frame of a cell IPython compiled (None outside one)."""
    compiled = _compiled(shell)
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename not in compiled:
        frame = frame.f_back
    return frame


def cell_number(shell) -> int:
    """The number of the cell running now, as the notebook shows it (``In [5]``): that of the innermost frame of a
    cell IPython compiled (its own ``execution_count`` is the next cell's by then), else its count."""
    frame = _running_cell(shell)
    return _compiled(shell)[frame.f_code.co_filename] if frame is not None else shell.execution_count


def _region(shell, line: str, cell: str | None, magic: str) -> Callable[[], object]:
    """The region: the cell, compiled under its label, its lines numbered as the notebook shows them (the magic's
    line first) and kept for their source; else the line's expression, at the line of the cell it stands on. Each
    runs in the notebook's namespace."""
    label = f"In [{cell_number(shell)}]"
    if cell is None:
        if not line.strip():
            raise UsageError(f"give the region: {USAGE[magic]}")
        frame = _running_cell(shell)
        if frame is not None:  # the cell's own lines, as IPython keeps them, under its label
            lines = linecache.getlines(frame.f_code.co_filename)
            linecache.cache[label] = (sum(map(len, lines)), None, lines, label)
        code = compile("\n" * ((frame.f_lineno or 1) - 1 if frame is not None else 0) + line.strip(), label, "eval")
        return lambda: eval(code, shell.user_ns)  # noqa: S307 (the user's own expression)
    source = f"%%{magic} {line}\n{cell}"  # the magic's line is the cell's first: the body's lines follow it
    linecache.cache[label] = (len(source), None, source.splitlines(True), label)
    code = compile("\n" + cell, label, "exec")
    return lambda: exec(code, shell.user_ns)  # noqa: S102 (the user's own cell)


def _syncs(shell, line: str, cell: str | None):
    def work():
        from bench.usercode.syncs.run import syncs

        found = syncs(_region(shell, line, cell, "syncs"))
        return named_syncs(found, lambda file: cell_label(shell, file))

    return _answered("%syncs" if cell is None else "%%syncs", work)


def _probe(shell, line: str):
    def work():
        from bench.usercode.probe import probe

        return probe(_region(shell, line, None, "probe"))

    return _answered("%probe", work)


def _trace(shell, line: str, cell: str):
    def work():
        from bench.results import writes
        from bench.usercode.trace.perfetto import encoded
        from bench.usercode.trace.run import trace

        number = cell_number(shell)
        options = _trace_options(line, number)
        writes.claim(options["perfetto"], writes.writer("trace", "--perfetto"))
        found = trace(_region(shell, line, cell, "trace"), runs=options["runs"], target=f"In [{number}]")
        found = named_trace(found, lambda file: cell_label(shell, file))
        writes.write_bytes(options["perfetto"], encoded(found))
        print(f"Perfetto timeline: {options['perfetto']}")
        return found

    return _answered("%%trace", work)


def _trace_options(line: str, number: int) -> dict:
    """``--runs N`` and ``--perfetto FILE.json`` (default ``trace-In<number>.json`` beside the notebook)."""
    from bench.usercode.defaults import DEFAULT_RUNS

    try:
        words = shlex.split(line)
    except ValueError as error:  # an unclosed quote
        raise UsageError(f"{line!r}: {error}; {USAGE['trace']}") from None
    options = {"runs": DEFAULT_RUNS, "perfetto": Path(f"trace-In{number}.json")}
    while words:
        option = words.pop(0)
        if option not in ("--runs", "--perfetto") or not words:
            raise UsageError(f"{option!r}: {USAGE['trace']}")
        value = words.pop(0)
        if option == "--runs":
            if not re.fullmatch(r"[0-9]{1,6}", value) or int(value) < 1:
                raise UsageError(f"--runs {value!r} is not a whole number of 1 or more")
            options["runs"] = int(value)
        else:
            options["perfetto"] = Path(value)
    return options


def _renamed(text: str, name: Callable[[str], str]) -> str:
    """'file:line in fn' or 'file:line' with its file named by ``name`` ('' stays '')."""
    found = LINE.fullmatch(text)
    return f"{name(found[1])}:{found[2]}{found[3] or ''}" if found else text


def named_syncs(found, name: Callable[[str], str]):
    """``found`` (a SyncsResult) with every file named by ``name`` (its lines as the notebook shows them)."""
    def place(item):
        return dataclasses.replace(item, file=name(item.file), calls=tuple(_renamed(c, name) for c in item.calls))

    return dataclasses.replace(found, places=[place(p) for p in found.places],
                               own_work=[place(p) for p in found.own_work],
                               allowed=[place(p) for p in found.allowed])


def named_trace(found, name: Callable[[str], str]):
    """``found`` (a TraceResult) with every file of its calls' frames, waits and pageable copies named by
    ``name``."""
    def call(item):
        if item is None:
            return None
        return dataclasses.replace(item, frames=tuple(dataclasses.replace(frame, file=name(frame.file))
                                                      for frame in item.frames))

    return dataclasses.replace(
        found, records=dataclasses.replace(found.records, calls=[call(item) for item in found.records.calls]),
        whole=dataclasses.replace(found.whole,
                                  gaps=[dataclasses.replace(gap, wait=call(gap.wait)) for gap in found.gaps]),
        waits=[dataclasses.replace(wait, line=_renamed(wait.line, name)) for wait in found.waits],
        pageable=[dataclasses.replace(group, line=_renamed(group.line, name)) for group in found.pageable])
