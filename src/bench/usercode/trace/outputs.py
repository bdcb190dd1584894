"""What a trace's outputs share (its text, its JSON, its Perfetto timeline, its results file): the user's line of a
driver call, that line as the text shows it, which calls are host waits, and numbers as JSON holds them."""

from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path

from bench.usercode.stacks import Frame, user_index

WAIT_NS = 50_000  # a watched driver call this long is a host wait in the listing


def line_of_frames(frames: tuple[Frame, ...]) -> str:
    """'/u/train.py:12': the user's line of a call's frames ('' without frames)."""
    if not frames:
        return ""
    frame = frames[user_index(frames)]
    return f"{frame.file}:{frame.line}"


def source_of_frames(frames: tuple[Frame, ...]) -> str:
    return frames[user_index(frames)].source if frames else ""


def shown(line: str) -> str:
    """'docs/examples/step.py:22': a ``file:line`` as the text output shows it, the file relative to the current
    directory where it is below it (as ``bench syncs`` shows its lines); the JSON and the results file keep it whole."""
    file, colon, number = line.rpartition(":")
    if not colon or not os.path.isabs(file):
        return line
    with contextlib.suppress(ValueError):
        file = str(Path(file).relative_to(Path.cwd()))
    return f"{file}:{number}"


def finite(value):
    """``value`` with every NaN and infinity, at any depth of its dicts and lists, None (JSON has neither)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [finite(item) for item in value]
    return value
