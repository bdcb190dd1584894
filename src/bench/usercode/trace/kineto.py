"""A trace the PyTorch profiler wrote (Kineto's Chrome JSON, gzipped or not) read as bench's records: its kernels,
copies and memsets, its CUDA runtime and driver calls that may wait (:data:`bench.usercode.cuda_calls.WAITING`) or
that made a copy, and, where it has Python stacks (``with_stack=True``), the line each call was made at. What the
file lacks is said in :attr:`Kineto.missing`, one line each, and the figures it would need are left out.
A trace file is untrusted input: anything that is not what Kineto writes is a :class:`ResultsError` of one line.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import stat
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from bench.platform.errors import ResultsError
from bench.analysis.escape import visible
from bench.platform.libraries import BY_PREFIX
from bench.usercode.activity import Activity, HostCall, Op, Recording
from bench.usercode.cuda_calls import WAITING
from bench.usercode.stacks import KNOWN, Frame

READ_LIMIT = 512 << 20  # bytes of JSON, unpacked: more is not a profiler's trace of a few steps
NS_LIMIT_US = 9.2e15  # a time in µs whose ns reach 2^63 is out of range
SNIFF_BYTES = 1 << 16  # what :func:`is_profiler_trace` reads of a file
TARGET = "profiler trace"  # the target a profiler's trace is shown, saved and compared as
COPY_NAME = re.compile(r"Memcpy (\S+) \((.+?) -> (.+?)\)")
FRAME_NAME = re.compile(r"(.+)\((\d+)\): (.+)")  # the profiler's python_function events: 'train.py(42): step'
OPS = {"HtoD": Op.H2D, "HtoA": Op.H2D, "DtoH": Op.D2H, "AtoH": Op.D2H, "DtoD": Op.D2D, "DtoA": Op.D2D,
       "AtoD": Op.D2D, "AtoA": Op.D2D, "HtoH": Op.H2H, "PtoP": Op.P2P}
MEMORY = {"pageable": "pageable", "pagable": "pageable", "pinned": "pinned", "managed": "managed", "managed static": "managed",
          "device": "device", "device static": "device", "array": "array"}
KERNEL, COPY, MEMSET = ("kernel",), ("gpu_memcpy", "memcpy"), ("gpu_memset", "memset")
CALLS, PYTHON = ("cuda_runtime", "runtime", "cuda_driver", "driver"), ("python_function",)


@dataclass
class Kineto:
    """What a profiler's trace holds, as bench's records."""

    recording: Recording
    gpu_names: dict[int, str] = field(default_factory=dict)  # device id -> name (the trace's deviceProperties)
    rank: int | None = None  # distributedInfo's rank, where the trace has one
    missing: list[str] = field(default_factory=list)  # what the file lacks, and the figures left out for it
    bytes_known: bool = True  # every copy says how many bytes it moved (the bound needs them)
    unknown_copies: int = 0  # copies of a kind Kineto did not know ('Memcpy <unknown> ...'): left out


def read(path: Path) -> Kineto:
    """The records of the profiler's trace at ``path``; ResultsError (one line) for a file that is not one."""
    path = Path(path)
    if not path.is_file():
        raise ResultsError(f"{path} is not a file" if path.exists() else f"{path}: no such file")
    try:
        document = json.loads(_text(path))
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ResultsError(f"{path} is not a profiler trace (Chrome JSON, gzipped or not): "
                           f"{type(error).__name__}: {_text_of(str(error)[:120])}") from None
    try:
        return _parsed(document)
    except (TypeError, ValueError, KeyError, OverflowError, AttributeError) as error:
        raise ResultsError(f"{path}: a trace event cannot be read: {type(error).__name__}: "
                           f"{str(error)[:200]}") from None


def is_profiler_trace(path: Path) -> bool:
    """Whether ``path`` looks like a profiler's Chrome JSON (gzipped or not): a JSON object that starts its
    ``traceEvents`` or names Kineto's fields in its first bytes. :func:`read` tells whether it is one."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a pipe or a device is never opened: opening one may block
            return False
        with _opened(Path(path)) as stream:
            start = stream.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error):  # gzip.BadGzipFile is an OSError
        return False
    return start.lstrip()[:1] in (b"{", b"[") and (b'"traceEvents"' in start or b'"schemaVersion"' in start)


def _opened(path: Path):
    """``path`` opened for reading its JSON's bytes: through gzip where it starts with gzip's magic."""
    with path.open("rb") as raw:
        packed = raw.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if packed else path.open("rb")


def _text(path: Path) -> str:
    with _opened(path) as stream:
        data = stream.read(READ_LIMIT + 1)
    if len(data) > READ_LIMIT:
        raise OSError(f"over {READ_LIMIT >> 20} MiB of JSON")
    return data.decode("utf-8")


def _parsed(document) -> Kineto:
    if isinstance(document, list):
        document = {"traceEvents": document}
    if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
        raise ValueError("no traceEvents list")
    found = Kineto(Recording([], []), _gpu_names(document.get("deviceProperties")),
                   _rank(document.get("distributedInfo")))
    calls, stacks = [], {}
    for event in document["traceEvents"]:
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        category = str(event.get("cat", "")).lower()
        if category in KERNEL + COPY + MEMSET:
            activity = _activity(event, category, found)
            if activity is not None:
                found.recording.activities.append(activity)
        elif category in CALLS:
            calls.append(event)
        elif category in PYTHON:
            frame = _frame(str(event.get("name", "")))
            if frame is not None:
                stacks.setdefault(_thread(event), []).append((_ns(event["ts"]), _end_ns(event), frame))
    made_copies = {a.correlation for a in found.recording.activities if a.op != Op.KERNEL and a.correlation >= 0}
    found.recording.calls = _host_calls(calls, made_copies, stacks)
    _say_what_is_missing(found, calls, stacks)
    return found


def _gpu_names(properties) -> dict[int, str]:
    if not isinstance(properties, list):
        return {}
    return {device["id"]: _text_of(device["name"]) for device in properties
            if isinstance(device, dict) and _is_whole(device.get("id")) and "name" in device}


def _text_of(value) -> str:
    """A name from the file, safe wherever it lands: control characters written as escapes, and a lone surrogate
    (JSON allows one) as its escape too."""
    return visible(str(value).encode("utf-8", "backslashreplace").decode("utf-8"))


def _is_whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 63


def _rank(info) -> int | None:
    rank = info.get("rank") if isinstance(info, dict) else None
    return int(rank) if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0 else None


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what} {value!r} is not a number")
    return float(value)


def _ns(ts) -> int:
    """A time of the trace (µs, as Chrome's format has it) in ns."""
    value = _number(ts, "ts")
    if abs(value) >= NS_LIMIT_US:  # past 2^63 ns (older Kineto writes µs since 1970, about 1.7e15: within)
        raise ValueError(f"ts {value!r} is out of range")
    whole = math.floor(value)  # µs since 1970 times 1000 is past a float's exact integers: whole µs kept apart
    return int(whole) * 1000 + round((value - whole) * 1000)


def _end_ns(event: dict) -> int:
    duration = _number(event.get("dur", 0), "dur")
    if not 0 <= duration < NS_LIMIT_US:
        raise ValueError(f"dur {duration!r} is negative or out of range")
    return _ns(event["ts"]) + round(duration * 1000)


def _whole(value, what: str, default: int | None = None) -> int:
    """A whole number of 0 or more from the file (``default`` where it is missing)."""
    if value is None and default is not None:
        return default
    if not _is_whole(value):
        raise ValueError(f"{what} {str(value)[:40]!r} is not a whole number of 0 or more")
    return value


def _thread(event: dict) -> tuple[str, str]:
    return str(event.get("pid")), str(event.get("tid"))


def _activity(event: dict, category: str, found: Kineto) -> Activity | None:
    """A kernel, copy or memset of the trace; its GPU from its ``device`` (a peer copy's ``inDevice``)."""
    args = event.get("args") or {}
    if not isinstance(args, dict):
        raise ValueError("args is not an object")
    device = _whole(args.get("device", args.get("inDevice")), "device")
    common = {"stream": _whole(args.get("stream"), "stream"), "start_ns": _ns(event["ts"]), "end_ns": _end_ns(event),
              "correlation": _whole(args.get("correlation"), "correlation", -1), "device": device}
    if category in KERNEL:
        return Activity(Op.KERNEL, name=_text_of(event.get("name", "")), **common)
    match = None
    if category not in MEMSET:
        match = COPY_NAME.fullmatch(str(event.get("name", "")))
        if match is None:
            raise ValueError(f"a copy named {str(event.get('name'))[:80]!r}: not 'Memcpy HtoD (Pinned -> Device)'")
        if match[1] not in OPS:  # Kineto's own name for a kind it does not know: 'Memcpy <unknown> (...)'
            found.unknown_copies += 1
            return None
    if "bytes" not in args:
        found.bytes_known = False
    nbytes = _whole(args.get("bytes"), "bytes", 0)
    if match is None:
        return Activity(Op.MEMSET, bytes=nbytes, **common)
    op = OPS[match[1]]
    host = {Op.H2D: match[2], Op.D2H: match[3]}.get(op, match[2] if op == Op.H2H else "device")
    return Activity(op, bytes=nbytes, host_memory=MEMORY.get(host.lower(), ""), **common)


def _frame(name: str) -> Frame | None:
    """The frame a python_function event names ('dir/train.py(42): step'); None for a C function's or a module's."""
    match = FRAME_NAME.fullmatch(name)
    if match is None or not match[1].endswith(".py") or len(match[2]) > 9:
        return None
    return Frame(_text_of(match[1]), int(match[2]), _text_of(match[3]), _library(match[1]))


def _library(file: str) -> str:
    """Whose file it is, from its name alone (the trace may come from another machine; the profiler writes a file
    below a ``sys.path`` entry from there on): a GPU library's name, 'python' for the standard library, another
    installed package's top-level name, or '' for the user's code."""
    parts = PurePosixPath(file).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts[:-1]:
            top = parts[parts.index(marker) + 1].removesuffix(".py")
            return BY_PREFIX.get(top, top)
    top = next((part for part in parts if part != "/"), "").removesuffix(".py")
    if top in BY_PREFIX or top in KNOWN:
        return BY_PREFIX.get(top, top)
    if top in sys.stdlib_module_names or re.search(r"/lib/python3\.\d+/", file):
        return "python"
    return ""


def _host_calls(events: list[dict], made_copies: set[int], stacks: dict) -> list[HostCall]:
    """The runtime and driver calls that may wait or made a copy, each with the Python frames open around it on its
    thread (outermost first)."""
    chosen: dict[tuple[str, str], list[tuple[int, int, str, int]]] = {}
    for event in events:
        name = str(event.get("name", ""))
        args = event.get("args") or {}
        correlation = _whole(args.get("correlation") if isinstance(args, dict) else None, "correlation", -2)
        if WAITING.search(name) or correlation in made_copies:  # -2 (none) matches no copy's -1 (none)
            chosen.setdefault(_thread(event), []).append((_ns(event["ts"]), _end_ns(event), _text_of(name),
                                                          correlation))
    calls = []
    for thread, mine in chosen.items():
        frames = sorted(stacks.get(thread, []), key=lambda item: (item[0], -item[1]))
        open_frames: list[tuple[int, int, Frame]] = []  # outermost first
        index = 0
        for start, end, name, correlation in sorted(mine):
            while index < len(frames) and frames[index][0] <= start:
                while open_frames and open_frames[-1][1] < frames[index][0]:
                    open_frames.pop()
                open_frames.append(frames[index])
                index += 1
            while open_frames and open_frames[-1][1] < start:
                open_frames.pop()
            calls.append(HostCall(name, start, end, correlation,
                                  tuple(frame for _, ended, frame in open_frames if ended >= end)))
    return sorted(calls, key=lambda call: call.start_ns)


def _say_what_is_missing(found: Kineto, calls: list[dict], stacks: dict) -> None:
    activities = found.recording.activities
    if not activities:
        found.missing.append("the trace has no kernels, copies or memsets (a profiler trace with activities="
                             "[ProfilerActivity.CUDA] records them): nothing ran on the GPU to describe")
    if not calls:
        found.missing.append("the trace has no CUDA runtime calls: host waits, the idle gaps' waits and the lines "
                             "of copies are left out")
    elif not stacks:
        found.missing.append("the trace has no Python stacks (torch.profiler.profile(with_stack=True) records them): "
                             "waits and copies are shown without their lines")
    if not found.bytes_known:
        found.missing.append("a copy or memset of the trace does not say its bytes: the bound, the efficiency and the "
                             "pageable copies' cost are left out")
    if found.unknown_copies:
        found.missing.append(f"{found.unknown_copies} cop{'ies' if found.unknown_copies != 1 else 'y'} of a kind the "
                             "profiler did not know ('Memcpy <unknown>') left out")
    if stacks:
        found.missing.append("the profiler records which function made a call, not the line in it: a wait or a copy "
                             "is named at its function's first line (file:line of its def)")
