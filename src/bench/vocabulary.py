"""The closed sets of values that rows, catalogs and reports share: each one a ``str`` enum whose values are the
strings the results files hold, so a member is equal to (and hashes as) its string, ``str()`` and f-strings give
the bare value, and files written before these enums read the same. The schema takes a column's allowed values
from here (:func:`values`). Imports nothing of CUDA.
"""

from __future__ import annotations

from enum import Enum


class Word(str, Enum):
    """A value of a closed set: a ``str`` whose ``str()`` and ``format()`` are the value (as Python 3.11's
    ``StrEnum``; the project supports 3.10)."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class Status(Word):
    """Whether a row measured: ``failed`` (its error says why), ``skipped`` (out of memory, a missing library) or
    ``unsupported`` (the runtime refused)."""

    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"
    UNSUPPORTED = "unsupported"


class Unit(Word):
    """The unit of a row's samples."""

    MS = "ms"
    US = "us"


class Clock(Word):
    """The clock that read the samples: CUDA events or the GPU's global timer, or the host's wall clock."""

    GPU = "gpu"
    HOST = "host"


class StopReason(Word):
    """Why sampling stopped."""

    CONVERGED = "converged"
    TIME_CAP = "time_cap"
    MAX_SAMPLES = "max_samples"
    FIXED = "fixed"


class HostVerdict(Word):
    """What a call did to the host while a kernel ran (the ``blocking`` family of experiments)."""

    RETURNS = "returns"
    OWN_WORK = "own-work"
    WAITS_FOR_DEVICE = "waits-for-device"
    UNCLEAR = "unclear"


class DeviceVerdict(Word):
    """What a call between two kernels on different streams did to them (the ``serialization`` family)."""

    OVERLAPS = "overlaps"
    PARTIAL = "partial"
    SERIALIZES = "serializes"


class DocsHost(Word):
    """What a call's documentation says it waits for on the host: ``never`` returns without waiting for device
    work, ``stream`` waits for earlier work in its stream, ``device`` for all device work, ``maybe`` the docs say
    it may or might wait, ``silent`` the docs say nothing about it. The library catalogs never say ``maybe``: a
    library's "may" counts as silent there."""

    NEVER = "never"
    STREAM = "stream"
    DEVICE = "device"
    MAYBE = "maybe"
    SILENT = "silent"


def values(kind: type[Enum]) -> tuple[str, ...]:
    """The members' values as plain strings, in definition order: a schema column's allowed values."""
    return tuple(member.value for member in kind)
