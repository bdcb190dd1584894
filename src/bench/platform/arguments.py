"""What the command line declares once and checks before anything runs: the commands that need a GPU, the name of a
sweep's results file, argument types (a GPU ordinal), the code a command runs named as the user named it, and an
option's value that starts with ``-`` (``--sizes -1K``) read as its value. Imports nothing of CUDA."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from bench.platform.errors import UsageError

GPU_COMMANDS = ("sweep", "probe", "syncs", "trace")  # measure on a GPU; so does `claims --measure`
RESULTS_NAME = "<run_id>-<gpu>.parquet"  # a sweep's results file: its run id (UTC start second, process id), its GPU
MEASURING_EXTRAS = ("cu12", "cu13")  # every measuring command needs one of them (bench.platform.env names the missing)
EXTRAS = {"trace": ("cu13", "cupti")}  # what a command needs besides: the extras that install it
BESIDE = {"cupti": "cu13"}  # an extra that installs only beside another: CUPTI 13's bindings need CUDA 13's


def needs_gpu_words() -> str:
    """'sweep, probe, syncs and trace': the commands that measure, as prose."""
    return f"{', '.join(GPU_COMMANDS[:-1])} and {GPU_COMMANDS[-1]}"


def ordinal(text: str) -> int:
    """A GPU ordinal: a whole number, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a GPU ordinal (0, 1, ...)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a GPU ordinal: ordinals are 0 or more")
    return value


def values_kept(argv: Sequence[str], options: Sequence[str]) -> list[str]:
    """``argv`` with each of ``options`` followed by a value that starts with ``-`` joined to it (``--sizes -1K`` as
    ``--sizes=-1K``), so that the value is read, and judged, as the option's value rather than as an option."""
    joined: list[str] = []
    index = 0
    while index < len(argv):
        word = argv[index]
        if word in options and index + 1 < len(argv) and argv[index + 1].startswith("-") \
                and not argv[index + 1].startswith("--"):
            joined.append(f"{word}={argv[index + 1]}")
            index += 2
            continue
        joined.append(word)
        index += 1
    return joined


def no_target(command: str) -> UsageError:
    """The error of ``syncs`` or ``trace`` named without the code to run."""
    return UsageError(f"{command}: name the code to run, TARGET: MODULE:FUNCTION, FILE.py:FUNCTION or SCRIPT.py "
                      "[ARGS], after the options")


def split_target(command: str, target: str) -> tuple[str, str]:
    """MODULE:FUNCTION (or FILE.py:FUNCTION) as its two parts; UsageError for anything else."""
    module_name, colon, function_name = target.rpartition(":")
    if not colon or not module_name or not function_name:
        raise UsageError(f"{command}: {target!r} is not MODULE:FUNCTION (e.g. mypkg.train:step)")
    return module_name, function_name


def require_gpu(command: str) -> None:
    """UsageError where there is no GPU to measure on: checked before the user's code is imported, which runs it."""
    from bench.platform.env import WITHOUT_GPU, no_gpu_reason

    reason = no_gpu_reason()
    if reason:
        raise UsageError(f"{command} needs a GPU: {reason}; {WITHOUT_GPU}")


def missing_function(command: str, module: str, function: str) -> UsageError:
    """The error of a target whose module (or file, as the user named it) has no such function."""
    return UsageError(f"{command}: {module} has no function {function!r}")
