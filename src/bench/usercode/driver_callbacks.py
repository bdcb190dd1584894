"""CUPTI's callbacks on driver calls, taken through ctypes: bench's function is called with the call's callback id,
whether it enters or leaves, and its correlation id, the last two read straight out of CUPTI's
``CUpti_CallbackData`` at the offsets ``cupti-python`` itself declares (``callback_data_dtype``). ``cupti-python``'s
own ``subscribe`` builds a Python object of the whole record on every call, several microseconds that a call which
blocks the host adds to the GPU's idle time (``scripts/trace_callback_cost.py`` measures both ways).
"""

from __future__ import annotations

import ctypes
import functools
import sys
import weakref
from collections.abc import Callable, Iterable

_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)
_OLD_NAME_BYTES = 256


class CuptiFailed(RuntimeError):
    """CUPTI refused a call (or its library was not found); ``holder`` is not None where subscribing failed because
    another subscriber (a profiler) holds CUPTI: its name, as CUPTI gives it ("" where it gives none)."""

    def __init__(self, message: str, holder: str | None = None) -> None:
        super().__init__(message)
        self.holder = holder


def reader(cupti, on_call: Callable[[int, bool, int], None],
           on_error: Callable[[BaseException], None]) -> Callable[[int | None, int, int, int], None]:
    """The function CUPTI's callback runs: it reads the site and the correlation id out of the
    ``CUpti_CallbackData`` at address ``data`` and hands them to ``on_call``; whatever ``on_call`` raises (an
    interrupt that lands there) goes to ``on_error``, never back into CUPTI."""
    fields = cupti.callback_data_dtype.fields
    site_at, correlation_at = fields["callback_site"][1], fields["correlation_id"][1]
    enter = int(cupti.ApiCallbackSite.API_ENTER)
    read_site, read_correlation = ctypes.c_int32.from_address, ctypes.c_uint32.from_address

    def trampoline(userdata, domain, callback_id, data) -> None:
        try:
            on_call(callback_id, read_site(data + site_at).value == enter,
                    read_correlation(data + correlation_at).value)
        except BaseException as error:
            on_error(error)

    return trampoline


def mapped_library(maps: Iterable[str], major: str) -> str:
    """The path of the libcupti mapped into this process (lines of /proc/self/maps), of CUPTI ``major`` where
    several are."""
    paths = set()
    for line in maps:
        fields = line.rstrip("\n").split(maxsplit=5)
        if len(fields) == 6 and "/libcupti.so" in fields[5]:
            paths.add(fields[5].removesuffix(" (deleted)"))
    if len(paths) > 1:
        paths = {path for path in paths if path.rsplit("/libcupti.so", 1)[1].lstrip(".").split(".")[0] == major}
    if len(paths) != 1:
        raise CuptiFailed(f"cannot tell which libcupti cupti-python loaded ({len(paths)} of CUPTI {major} mapped)")
    return paths.pop()


@functools.cache
def library(cupti) -> ctypes.CDLL:
    """The libcupti ``cupti-python`` loaded (the same library: one CUPTI per process)."""
    from importlib.metadata import version  # here, not at import: it costs every ``import bench`` ~10 ms

    cupti.get_timestamp()  # makes cupti-python load it
    with open("/proc/self/maps") as maps:
        library = ctypes.CDLL(mapped_library(maps, version("cupti-python").split(".")[0]))
    library.cuptiSubscribe_v2.argtypes = (ctypes.POINTER(ctypes.c_void_p), _CALLBACK, ctypes.c_void_p,
                                          ctypes.c_void_p)
    library.cuptiUnsubscribe.argtypes = (ctypes.c_void_p,)
    library.cuptiEnableCallback.argtypes = (ctypes.c_uint32, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32)
    library.cuptiGetResultString.argtypes = (ctypes.c_int, ctypes.POINTER(ctypes.c_char_p))
    return library


def message(library: ctypes.CDLL, status: int) -> str:
    """CUPTI's words for a status it returned."""
    text = ctypes.c_char_p()
    library.cuptiGetResultString(status, ctypes.byref(text))
    return (text.value or b"").decode(errors="replace") or f"CUPTI error {status}"


def check(library: ctypes.CDLL, status: int) -> None:
    """:class:`CuptiFailed` in CUPTI's words where ``status`` is an error."""
    if status:
        raise CuptiFailed(message(library, status))


def _unsubscribe(library: ctypes.CDLL, handle: ctypes.c_void_p, trampoline) -> None:
    """Unsubscribe (``trampoline`` is held until then: CUPTI calls it until this returns)."""
    library.cuptiUnsubscribe(handle)


class DriverCallbacks:
    """Subscribed to CUPTI's driver API callbacks, named ``name``, until :meth:`close` (or until it is collected);
    ``on_call(callback_id, entering, correlation)`` runs for the ``callback_ids`` while :meth:`watch` has them on (off
    at first), and ``on_error`` gets what ``on_call`` raises."""

    def __init__(self, cupti, name: str, callback_ids: Iterable[int], on_call: Callable[[int, bool, int], None],
                 on_error: Callable[[BaseException], None]) -> None:
        self._library = library(cupti)
        self._ids = list(callback_ids)
        self._domain = int(cupti.CallbackDomain.DRIVER_API)
        trampoline = _CALLBACK(reader(cupti, on_call, on_error))
        self._handle = ctypes.c_void_p()
        self._subscribe(cupti, name, trampoline)
        self._close = weakref.finalize(self, _unsubscribe, self._library, self._handle, trampoline)

    def _subscribe(self, cupti, name: str, trampoline) -> None:
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
        status = self._library.cuptiSubscribe_v2(ctypes.byref(self._handle), trampoline, None,
                                                 ctypes.addressof(params))
        if status == int(cupti.Result.ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED):
            raise CuptiFailed(self._message(status), old_name.value.decode(errors="replace"))
        self._check(status)

    def _message(self, status: int) -> str:
        return message(self._library, status)

    def _check(self, status: int) -> None:
        check(self._library, status)

    def watch(self, on: bool) -> None:
        """The callbacks on or off (off: the calls cost nothing extra)."""
        for callback_id in self._ids:
            self._check(self._library.cuptiEnableCallback(int(on), self._handle, self._domain, callback_id))

    def close(self) -> None:
        self._close()


def caller_frame():
    """The Python frame that made the driver call, asked from inside ``on_call``; None for a thread with no Python
    code under the call (a library's own thread, PyTorch's autograd engine's)."""
    try:
        return sys._getframe(3)  # this function, on_call, the trampoline, then the caller
    except ValueError:
        return None
