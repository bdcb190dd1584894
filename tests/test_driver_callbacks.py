"""bench's way into CUPTI's driver callbacks (:mod:`bench.usercode.driver_callbacks`), without a GPU: what the C
callback hands bench's function, read out of a ``CUpti_CallbackData`` laid out as cupti-python declares it; the
frame of the call, from Python and from a thread with no Python under it; which libcupti is the one loaded."""

import ctypes
import sys
import types

import numpy as np
import pytest

from bench.usercode.driver_callbacks import _CALLBACK, CuptiFailed, caller_frame, mapped_library, reader

# CUpti_CallbackData's fields bench reads, at the offsets cupti-python 13.0.1's callback_data_dtype gives
CALLBACK_DATA = np.dtype({"names": ["callback_site", "function_name", "correlation_id"],
                          "formats": ["<i4", "<i8", "<u4"], "offsets": [0, 8, 64], "itemsize": 72})
CUPTI = types.SimpleNamespace(callback_data_dtype=CALLBACK_DATA,
                              ApiCallbackSite=types.SimpleNamespace(API_ENTER=0, API_EXIT=1))


def test_the_callback_hands_on_the_call_its_site_and_correlation():
    seen, errors = [], []
    callback = _CALLBACK(reader(CUPTI, lambda *call: seen.append(call), errors.append))  # called through C
    data = np.zeros(1, CALLBACK_DATA)
    data["function_name"] = -1  # a neighbour's bytes must not leak into the fields read
    data["correlation_id"] = 4_000_000_001
    callback(None, 1, 17, data.ctypes.data)
    data["callback_site"] = 1
    callback(None, 1, 17, data.ctypes.data)
    assert seen == [(17, True, 4_000_000_001), (17, False, 4_000_000_001)] and errors == []


def test_what_the_function_raises_goes_to_on_error_not_into_c():
    errors = []

    def on_call(*call):
        raise KeyboardInterrupt

    callback = _CALLBACK(reader(CUPTI, on_call, errors.append))
    callback(None, 1, 17, np.zeros(1, CALLBACK_DATA).ctypes.data)
    assert [type(error) for error in errors] == [KeyboardInterrupt]


def _on_call():
    return caller_frame()


def _trampoline():
    """caller_frame as bench's callback asks it: from on_call, under the trampoline, under the caller."""
    return _on_call()


def test_the_caller_is_the_frame_that_made_the_call():
    def user_code():
        return _trampoline(), sys._getframe()

    found, expected = user_code()
    assert found is expected


def test_a_thread_with_no_python_under_the_call_has_no_caller():
    libc = ctypes.CDLL(None)
    start = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
    found = []

    def thread(argument):  # the first Python frame of a native thread, as a trampoline is in a library's thread
        def on_call():
            found.append(caller_frame())

        on_call()
        return None

    routine, handle = start(thread), ctypes.c_ulong()
    assert libc.pthread_create(ctypes.byref(handle), None, routine, None) == 0
    libc.pthread_join(handle, None)
    assert found == [None]


def test_the_libcupti_mapped_is_found_among_other_mappings():
    maps = ["7f00-7f10 r-xp 00000000 08:01 12 /usr/lib/libc.so.6\n",
            "7f20-7f30 r-xp 00000000 08:01 13 /opt/my env/nvidia/cu13/lib/libcupti.so.13 (deleted)\n",
            "7f30-7f40 r--p 00010000 08:01 13 /opt/my env/nvidia/cu13/lib/libcupti.so.13 (deleted)\n",
            "7f50-7f60 r-xp 00000000 08:01 14 /site/nvidia/cuda_cupti/lib/libcupti.so.12\n",
            "7f70-7f80 rw-p 00000000 00:00 0\n"]
    assert mapped_library(maps, "13") == "/opt/my env/nvidia/cu13/lib/libcupti.so.13"
    assert mapped_library(maps[3:], "13") == "/site/nvidia/cuda_cupti/lib/libcupti.so.12"  # the only one loaded
    with pytest.raises(CuptiFailed, match="cannot tell which libcupti"):
        mapped_library(maps[:1], "13")
