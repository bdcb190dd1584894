"""Letting pyarrow's thread pools finish before the interpreter exits.

pyarrow runs work on its CPU and I/O thread pools: reading a parquet file, and the operations pandas runs on
pyarrow-backed columns (a groupby's ``max`` of Arrow strings is an Acero plan whose group ids are a NumPy array
wrapped in an Arrow buffer). A worker can drop its last reference to such a buffer a moment after the call returned,
and dropping it takes the GIL. Once the interpreter has begun to finalize, CPython ends a thread that asks for the
GIL with ``pthread_exit``, whose unwinding through the buffer's destructor calls ``std::terminate``: the process aborts
("terminate called without an active exception", SIGABRT) after it did all its work (apache/arrow#34314). Waiting
until the pools are idle before exiting closes that window. pyarrow has no Python call for it, so this calls
``arrow::internal::ThreadPool::WaitForIdle`` in libarrow through ctypes, which releases the GIL while it waits.
"""

from __future__ import annotations

import ctypes
import re
import sys
from collections.abc import Callable
from pathlib import Path

_POOLS = ("_ZN5arrow8internal16GetCpuThreadPoolEv", "_ZN5arrow2io8internal15GetIOThreadPoolEv")
_WAIT_FOR_IDLE = "_ZN5arrow8internal10ThreadPool11WaitForIdleEv"


def waiter() -> tuple[Callable[[int], None], list[int]] | None:
    """libarrow's ``WaitForIdle`` and its CPU and I/O thread pools; None where pyarrow is not imported or its
    library is not a Linux build with these (Itanium-mangled) names."""
    path = _loaded_libarrow() if "pyarrow" in sys.modules else None
    if path is None:
        return None
    try:
        library = ctypes.CDLL(path)  # loaded already: the copy pyarrow uses, wherever it came from (wheel, conda)
        wait = library[_WAIT_FOR_IDLE]
        getters = [library[name] for name in _POOLS]
    except (OSError, AttributeError):
        return None
    wait.argtypes, wait.restype = [ctypes.c_void_p], None
    for getter in getters:
        getter.argtypes, getter.restype = [], ctypes.c_void_p
    return wait, [getter() for getter in getters]


def _loaded_libarrow() -> str | None:
    """The file of the libarrow this process has loaded (Linux's /proc/self/maps), or None."""
    try:
        with open("/proc/self/maps") as maps:
            # a mapping's last field is its file, if any; a process maps thousands
            paths = [line.split(maxsplit=5)[-1].strip() for line in maps if "libarrow.so" in line]
    except OSError:
        return None
    return next((path for path in paths if re.fullmatch(r"libarrow\.so(\.\d+)*", Path(path).name)), None)


def wait_until_idle() -> None:
    """Return once no task is queued or running in pyarrow's thread pools (at once where :func:`waiter` finds
    none). Call it last, before the interpreter exits."""
    found = waiter()
    if found is None:
        return
    wait, pools = found
    for pool in pools:
        wait(pool)
