"""The closed sets of values that rows, catalogs, views and reports share: each one a ``str`` enum whose values are
the strings the results files hold, so a member is equal to (and hashes as) its string, ``str()`` and f-strings give
the bare value, and files written before these enums read the same. The schema takes a column's allowed values
from here (:func:`values`). At the end, the few numbers and names of the method that both the measuring code and
the views (:mod:`bench.views`) name, defined once. Imports nothing of bench, nothing of CUDA: the bottom floor both
sides stand on.
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


class SpinStream(Word):
    """How the stream a spin kernel runs on was created (:mod:`bench.measure.verdicts`): a ``blocking`` stream
    synchronizes with the legacy default stream, a ``non-blocking`` one does not."""

    BLOCKING = "blocking"
    NON_BLOCKING = "non-blocking"


class Placement(Word):
    """The stream a call of the runtime catalog (:mod:`bench.catalogs.runtime`) goes to: ``same`` (the spinning
    stream), ``other`` (a second non-blocking stream), ``legacy`` (the legacy default NULL stream), ``per-thread``
    (the per-thread default stream), or ``none`` (the call takes no stream)."""

    SAME = "same"
    OTHER = "other"
    LEGACY = "legacy"
    PER_THREAD = "per-thread"
    NONE = "none"


class LibraryPlacement(Word):
    """Where the ``library`` experiment's spin runs: on the call's stream, on another, or two spins around the call
    (do they still overlap?)."""

    SAME = "same"
    OTHER = "other"
    BETWEEN = "between"


class Direction(Word):
    """A copy's direction: host to device, device to host, device to device, or both ways at once."""

    H2D = "H2D"
    D2H = "D2H"
    D2D = "D2D"
    BIDIR = "BIDIR"


class HostMemory(Word):
    """A kind of host memory a copy reads or writes."""

    PINNED = "pinned"
    PAGEABLE = "pageable"
    REGISTERED = "registered"
    WRITE_COMBINED = "write-combined"


class HostOperation(Word):
    """What the ``hostmemory`` experiment does with a host buffer: copy it to or from the device, or read or write it
    on the CPU."""

    H2D = "H2D"
    D2H = "D2H"
    CPU_READ = "cpu-read"
    CPU_WRITE = "cpu-write"


class AccessOrder(Word):
    """When a batched copy may read its source (``cudaMemcpyBatchAsync``'s source access order)."""

    STREAM = "stream"
    DURING_CALL = "during-call"
    ANY = "any"


class Connections(Word):
    """``CUDA_DEVICE_MAX_CONNECTIONS`` of a ``connections`` process: a number, unset, or 1 set after the context was
    created (too late)."""

    ONE = "1"
    TWO = "2"
    FOUR = "4"
    EIGHT = "8"
    THIRTY_TWO = "32"
    UNSET = "unset"
    ONE_AFTER_INIT = "1 after init"


class FirstCall(Word):
    """The steps the ``firstcall`` experiment times, in the order a program takes them."""

    MODULE_LOAD = "module-load"
    GET_FUNCTION = "get-function"
    FIRST_LAUNCH = "first-launch"
    SECOND_LAUNCH = "second-launch"
    NUMBA_FIRST_CALL = "numba-first-call"
    CUPY_FIRST_COMPILE = "cupy-first-compile"


class ModuleLoading(Word):
    """``CUDA_MODULE_LOADING``, in lower case."""

    LAZY = "lazy"
    EAGER = "eager"


class ManagedCase(Word):
    """Where a ``managed`` kernel finds its pages: on the host (faulted over), prefetched first, or resident."""

    FIRST_TOUCH = "first-touch"
    PREFETCH_THEN_KERNEL = "prefetch-then-kernel"
    RESIDENT = "resident"


class CrossGpuCall(Word):
    """The calls of the ``crossgpu`` experiment, made on one GPU while a kernel runs on another."""

    NOTHING = "(nothing)"
    FREE = "cudaFree"
    FREE_HOST = "cudaFreeHost"
    MALLOC = "cudaMalloc"
    DEVICE_SYNCHRONIZE = "cudaDeviceSynchronize"
    LEGACY_STREAM_SYNCHRONIZE = "cudaStreamSynchronize (legacy stream)"
    MEMCPY_PEER = "cudaMemcpyPeer 4 KiB"


class Change(Word):
    """What ``compare`` found for a configuration measured in two results (:mod:`bench.analysis.compare`)."""

    CHANGED = "changed"
    SLOWER = "slower"
    FASTER = "faster"
    UNCLEAR = "unclear"
    SAME = "same"


class ClaimVerdict(Word):
    """Whether the measurement bears a claim of CUDA folklore out (:mod:`bench.analysis.claims`)."""

    TRUE = "true"
    FALSE = "false"
    PARTLY = "partly"
    NOT_MEASURED = "not measured"


def values(kind: type[Enum]) -> tuple[str, ...]:
    """The members' values as plain strings, in definition order: a schema column's allowed values."""
    return tuple(member.value for member in kind)


# --- the method's numbers and names that the measuring code and the figures both name -----------------------------

SPIN_STREAMS = values(SpinStream)
PLACEMENTS = values(Placement)
SPIN_MS = 10.0  # the shortest spin a catalog call is made during (bench.measure.verdicts); slow calls get longer ones
WAIT_SPIN_MS = 2.0  # the kernel whose end the waitmodes experiment waits for
ALLOC_LOOP = 50  # iterations of the alloc experiment's (allocate, kernel, free) loop
CHASE_STEPS = 4096  # dependent loads of a pointer chase (bench.measure.chase)
CONNECTIONS_VARIABLE = "CUDA_DEVICE_MAX_CONNECTIONS"
CONNECTIONS_STREAMS = (2, 4, 8, 16, 32)  # the connections experiment's stream counts
