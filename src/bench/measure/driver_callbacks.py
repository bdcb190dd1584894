"""CUPTI's callbacks on driver calls, taken through ctypes: bench's function is called with the call's id, whether it
enters or leaves, and its correlation id, read straight out of CUPTI's ``CUpti_CallbackData`` at the offsets
``cupti-python`` itself declares (``callback_data_dtype``). ``cupti-python``'s own ``subscribe`` builds a Python
object of the whole record on every call, several microseconds that a call which blocks the host adds to the GPU's
idle time (``scripts/trace_callback_cost.py`` measures both ways).
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable, Iterable

_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)
_OLD_NAME_BYTES = 256


class SubscribeFailed(RuntimeError):
    """CUPTI refused the subscription; ``holder`` is not None where another subscriber (a profiler) holds CUPTI: its
    name, as CUPTI gives it ("" where it gives none)."""

    def __init__(self, message: str, holder: str | None = None) -> None:
        super().__init__(message)
        self.holder = holder


def reader(cupti, on_call: Callable[[int, bool, int], None]) -> Callable[[int | None, int, int, int], None]:
    """The function CUPTI's callback runs: it reads the site and the correlation id out of the
    ``CUpti_CallbackData`` at address ``data`` and hands them to ``on_call``."""
    fields = cupti.callback_data_dtype.fields
    site_at, correlation_at = fields["callback_site"][1], fields["correlation_id"][1]
    enter = int(cupti.ApiCallbackSite.API_ENTER)
    read_site, read_correlation = ctypes.c_int32.from_address, ctypes.c_uint32.from_address

    def trampoline(userdata, domain, callback_id, data) -> None:
        on_call(callback_id, read_site(data + site_at).value == enter, read_correlation(data + correlation_at).value)

    return trampoline


def _library(cupti) -> ctypes.CDLL:
    """The libcupti ``cupti-python`` loaded (the same library: one CUPTI per process)."""
    cupti.get_timestamp()  # makes cupti-python load it
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "/libcupti.so" in line}
    if len(paths) != 1:
        raise SubscribeFailed(f"cannot tell which libcupti cupti-python loaded ({len(paths)} found)")
    library = ctypes.CDLL(paths.pop())
    library.cuptiSubscribe_v2.argtypes = (ctypes.POINTER(ctypes.c_void_p), _CALLBACK, ctypes.c_void_p,
                                          ctypes.c_void_p)
    library.cuptiUnsubscribe.argtypes = (ctypes.c_void_p,)
    library.cuptiEnableCallback.argtypes = (ctypes.c_uint32, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32)
    library.cuptiGetResultString.argtypes = (ctypes.c_int, ctypes.POINTER(ctypes.c_char_p))
    return library


class DriverCallbacks:
    """Subscribed to CUPTI's driver API callbacks, named ``name``, until :meth:`close`; ``on_call(callback_id,
    entering, correlation)`` runs for the ``callback_ids`` while :meth:`watch` has them on (off at first)."""

    def __init__(self, cupti, name: str, callback_ids: Iterable[int],
                 on_call: Callable[[int, bool, int], None]) -> None:
        self._library = _library(cupti)
        self._ids = list(callback_ids)
        self._domain = int(cupti.CallbackDomain.DRIVER_API)
        self._trampoline = _CALLBACK(reader(cupti, on_call))  # kept: CUPTI calls it until unsubscribed
        self._handle = ctypes.c_void_p()
        self._subscribe(cupti, name)

    def _subscribe(self, cupti, name: str) -> None:
        fields = cupti.subscriber_params_dtype.fields
        size = max(int(cupti.SUBSCRIBER_PARAMS_SIZE), cupti.subscriber_params_dtype.itemsize)
        params = ctypes.create_string_buffer(size)
        own_name = ctypes.create_string_buffer(name.encode())
        old_name = ctypes.create_string_buffer(_OLD_NAME_BYTES)
        for field, value in (("struct_size", int(cupti.SUBSCRIBER_PARAMS_SIZE)),
                             ("subscriber_name", ctypes.addressof(own_name)),
                             ("old_subscriber_name", ctypes.addressof(old_name)),
                             ("old_subscriber_size", _OLD_NAME_BYTES)):
            ctypes.c_uint64.from_buffer(params, fields[field][1]).value = value
        status = self._library.cuptiSubscribe_v2(ctypes.byref(self._handle), self._trampoline, None,
                                                 ctypes.addressof(params))
        if status == int(cupti.Result.ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED):
            raise SubscribeFailed(self._message(status), old_name.value.decode(errors="replace"))
        self._check(status)

    def _message(self, status: int) -> str:
        text = ctypes.c_char_p()
        self._library.cuptiGetResultString(status, ctypes.byref(text))
        return (text.value or b"").decode(errors="replace") or f"CUPTI error {status}"

    def _check(self, status: int) -> None:
        if status:
            raise SubscribeFailed(self._message(status))

    def watch(self, on: bool) -> None:
        """The callbacks on or off (off: the calls cost nothing extra)."""
        for callback_id in self._ids:
            self._check(self._library.cuptiEnableCallback(int(on), self._handle, self._domain, callback_id))

    def close(self) -> None:
        if self._handle:
            self._library.cuptiUnsubscribe(self._handle)
            self._handle = ctypes.c_void_p()


def caller_frame():
    """The Python frame that made the driver call, asked from inside ``on_call``."""
    return sys._getframe(3)  # this function, on_call, the trampoline, then the caller
