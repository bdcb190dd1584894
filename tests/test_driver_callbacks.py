"""bench's way into CUPTI's driver callbacks (:mod:`bench.measure.driver_callbacks`), without a GPU: what the C
callback hands bench's function, read out of a ``CUpti_CallbackData`` laid out as cupti-python declares it."""

import types

import numpy as np

from bench.measure.driver_callbacks import _CALLBACK, reader

# CUpti_CallbackData's fields bench reads, at the offsets cupti-python 13.0.1's callback_data_dtype gives
CALLBACK_DATA = np.dtype({"names": ["callback_site", "function_name", "correlation_id"],
                          "formats": ["<i4", "<i8", "<u4"], "offsets": [0, 8, 64], "itemsize": 72})
CUPTI = types.SimpleNamespace(callback_data_dtype=CALLBACK_DATA,
                              ApiCallbackSite=types.SimpleNamespace(API_ENTER=0, API_EXIT=1))


def test_the_callback_hands_on_the_call_its_site_and_correlation():
    seen = []
    callback = _CALLBACK(reader(CUPTI, lambda *call: seen.append(call)))  # called through C, as CUPTI calls it
    data = np.zeros(1, CALLBACK_DATA)
    data["function_name"] = -1  # a neighbour's bytes must not leak into the fields read
    data["correlation_id"] = 4_000_000_001
    callback(None, 1, 17, data.ctypes.data)
    data["callback_site"] = 1
    callback(None, 1, 17, data.ctypes.data)
    assert seen == [(17, True, 4_000_000_001), (17, False, 4_000_000_001)]
