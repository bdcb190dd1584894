"""The CUDA driver call each thread is in, from CUPTI's callbacks (``cupti-python``, the ``cupti`` extra).

Optional: where CUPTI is missing, unsupported or already taken by another profiler (CUPTI allows one subscriber),
:func:`open_cuda_calls` says why in one line and bench goes on without naming CUDA calls.
"""

from __future__ import annotations

import re
import threading

from bench.usercode.watcher import Gate


WAITING = re.compile(r"Synchronize|Memcpy|Memset|Free|Unregister|Destroy|cuMemAlloc|cuMemHostAlloc|HostRegister")
# the driver calls a thread may wait in; launches and queries are left out: a Python callback on each of the
# thousands of launches of a training step (some from PyTorch's autograd threads) slowed it enough to look like a wait


def waiting_callback_ids(cupti) -> dict[int, str]:
    """The driver API callback ids of the calls that may wait (``WAITING``), each with its call's name."""
    return {member.value: member.name for member in cupti.driver_api_trace_cbid if WAITING.search(member.name)}


class CudaCalls:
    """Subscribed to the driver API's callbacks of the calls that may wait (``WAITING``) until :meth:`close`: each
    runs a short Python callback on entry and exit (:mod:`bench.usercode.driver_callbacks`); on exit, the
    :class:`~bench.usercode.watcher.Gate` may keep the thread there."""

    def __init__(self) -> None:
        from cupti import cupti

        from bench.usercode.driver_callbacks import DriverCallbacks

        self._names = waiting_callback_ids(cupti)
        self.gate = Gate()  # the watcher's: keeps a thread at a call's return until the GPU is held again
        self._inside: dict[int, list[str]] = {}
        self._error: BaseException | None = None  # raised in a callback (an interrupt), raised again by close()
        self._subscriber = DriverCallbacks(cupti, "bench syncs", self._names, self._on_call, self._on_error)
        try:
            self._subscriber.watch(True)
        except BaseException:
            self._subscriber.close()
            raise

    def _on_call(self, callback_id: int, entering: bool, correlation: int) -> None:
        thread = threading.get_ident()
        calls = self._inside.setdefault(thread, [])
        if entering:
            calls.append(self._names[callback_id])
            return
        if calls:
            calls.pop()
        self.gate.leaving(thread)  # the watcher may keep it here until the GPU is held again

    def _on_error(self, error: BaseException) -> None:
        self._error = self._error or error

    def threads_inside(self) -> list[int]:
        """The threads in a driver call now."""
        return [thread for thread, calls in list(self._inside.items()) if calls]

    def current(self, thread_id: int) -> str:
        """The innermost driver call ``thread_id`` is in now ('' for none)."""
        calls = self._inside.get(thread_id) or []
        return (calls[-1:] or [""])[0]  # its own thread may pop the list meanwhile

    def close(self) -> None:
        self._subscriber.close()
        if self._error is not None:
            error, self._error = self._error, None
            raise error


def open_cuda_calls() -> tuple[CudaCalls | None, str]:
    """CUPTI's driver callbacks, or None and the reason in one line."""
    try:
        import cupti.cupti  # noqa: F401
    except ImportError:
        return None, "CUPTI callbacks unavailable: cupti-python is not installed (pip install \"cuda-sync-bench[cupti]\")"
    try:
        return CudaCalls(), ""
    except Exception as error:  # another subscriber (a profiler), an old driver, no libcupti
        return None, f"CUPTI callbacks unavailable: {type(error).__name__}: {error}"
