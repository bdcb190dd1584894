"""What the commands share: the argument types, the options several commands take (each written once), where
results and figures go by default, and the warnings on stderr."""

from __future__ import annotations

import argparse
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.platform import lazy
from bench.platform.arguments import ordinal
from bench.platform.errors import UsageError
from bench.analysis.escape import terminal
from bench.timing.phases import IMPORTS, phase

RESULTS_DIR = Path("results")
PLOTS_DIR = Path("plots/local")  # plot and report write here: git ignores it (docs cite scripts/doc_figures.py's)
FORMATS = ("text", "json", "markdown")  # compare's and claims' outputs


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print usage and a second line; we want one line
        raise UsageError(message)


@dataclass(frozen=True)
class Handler:
    """A command's function: its module is imported only when the command runs, in the phase of imports."""

    function: lazy.Name

    def __call__(self, args: argparse.Namespace, console):
        with phase(IMPORTS):
            function = self.function.load()
        return function(args, console)


NAME_MAX, PATH_MAX = 255, 4095  # bytes a file name and a path may have (Linux's)


def path(text: str) -> Path:
    """A path to read or write: not empty, each name at most :data:`NAME_MAX` bytes and the whole at most
    :data:`PATH_MAX` (the system would refuse them later, with a traceback of its own)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path names no file")
    encoded = os.fsencode(text)
    longest = max(encoded.split(b"/"), key=len)
    if len(longest) > NAME_MAX:
        raise argparse.ArgumentTypeError(f"file name too long: {len(longest)} bytes, at most {NAME_MAX} a name "
                                         f"({os.fsdecode(longest[:40])}...)")
    if len(encoded) > PATH_MAX:
        raise argparse.ArgumentTypeError(f"path too long: {len(encoded)} bytes, at most {PATH_MAX}")
    return Path(text)


def positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive finite number")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


def devices(text: str) -> str | tuple[int, ...]:
    if text.strip() == "all":
        return "all"
    try:
        chosen = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not 'all' or GPU ordinals like 0,1") from None
    if any(device < 0 for device in chosen):
        raise argparse.ArgumentTypeError(f"{text!r}: GPU ordinals are 0 or more")
    return chosen


def gpu_choice(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty name chooses no GPU: give a UUID or its start, a name or a hostname")
    return text


def add_gpu(command: argparse.ArgumentParser) -> None:
    command.add_argument("--gpu", type=gpu_choice,
                         help="only one GPU (a UUID or its start, or a name) or one host's GPUs (a hostname)")


def add_device(command: argparse.ArgumentParser, help: str = "CUDA device ordinal (default 0)") -> None:
    command.add_argument("--device", type=ordinal, default=0, help=help)


def add_format(command: argparse.ArgumentParser) -> None:
    command.add_argument("--format", choices=FORMATS, default="text",
                         help="text for a terminal (default), json for CI, markdown for a pull request; "
                              "warnings go to stderr")


def add_summary(command: argparse.ArgumentParser) -> None:
    command.add_argument("--summary", type=path, metavar="FILE.md",
                         help="with --baseline: also append the gate's Markdown summary to FILE (a GitHub job's "
                              "$GITHUB_STEP_SUMMARY), from the same run as the output")


def add_force(command: argparse.ArgumentParser) -> None:
    command.add_argument("--force", action="store_true",
                         help="replace an existing file that bench did not write (default: only bench's own files; "
                              "never a results file)")


def add_strict(command: argparse.ArgumentParser) -> None:
    command.add_argument("--strict", action="store_true",
                         help="stop at a results file in a directory that bench cannot read (default: skip it "
                              "with a warning)")


def add_verbose(command: argparse.ArgumentParser) -> None:
    command.add_argument("-v", "--verbose", action="store_true",
                         help="also say on stderr where the seconds went, phase by phase")


def add_target(command: argparse.ArgumentParser) -> None:
    """The target of syncs and trace: a function, or a script and the arguments that follow it."""
    command.add_argument("target", nargs="?", metavar="MODULE:FUNCTION|FILE.py:FUNCTION|SCRIPT.py",
                         help="a function taking no arguments (mypkg.train:step, train.py:step), or a script, run "
                              "as __main__ with the ARGS that follow it")
    script_args = command.add_argument("script_args", nargs=argparse.REMAINDER, metavar="ARGS",
                                       help="the script's arguments")
    script_args.required = False  # none is fine; a missing target is the command's one line (no_target)


def add_outputs(command: argparse.ArgumentParser, shown_as: str) -> None:
    """--json and --save of syncs and trace."""
    command.add_argument("--json", action="store_true", help=f"print JSON instead of {shown_as}")
    command.add_argument("--save", type=path, metavar="FILE.parquet", help="also write the rows to a results file")


def unreadable(args: argparse.Namespace):
    """``on_unreadable`` for :mod:`bench.results.store`'s readers: a warning on stderr that names the file passed over and
    why; with --strict, None (the file's error ends the command)."""
    if args.strict:
        return None
    return lambda error: warn([f"skipped a file: {error} (--strict stops instead)"])


def warn(warnings: list[str]) -> None:
    """Warnings on stderr, one line each (what a results file put in them escaped): stdout is the command's output
    (a JSON or Markdown document too)."""
    for warning in warnings:
        print(terminal(f"bench: warning: {warning}"), file=sys.stderr)
