"""CUDA driver calls CuPy does not wrap, through ctypes on ``libcuda``: settings a process makes before its CUDA
context exists. Only an experiment's own process calls these."""

from __future__ import annotations

import ctypes
import functools

# CUctx_flags: how a host thread waits for the GPU (cudaDeviceScheduleSpin, ...Yield, ...BlockingSync, ...Auto).
SCHEDULES = {"auto": 0, "spin": 1, "yield": 2, "blocking-sync": 4}
SCHEDULE_MASK = 0x7


class DriverError(RuntimeError):
    pass


@functools.cache
def _libcuda() -> ctypes.CDLL:
    return ctypes.CDLL("libcuda.so.1")


def _check(result: int, call: str) -> None:
    if result != 0:
        name = ctypes.c_char_p()
        _libcuda().cuGetErrorName(result, ctypes.byref(name))
        raise DriverError(f"{call} failed: {(name.value or b'?').decode()} ({result})")


def set_schedule(device: int, schedule: str) -> None:
    """Make ``device``'s primary context (created later, by the first runtime call) wait the ``schedule`` way."""
    library = _libcuda()
    _check(library.cuInit(0), "cuInit")
    handle = ctypes.c_int()
    _check(library.cuDeviceGet(ctypes.byref(handle), device), "cuDeviceGet")
    _check(library.cuDevicePrimaryCtxSetFlags_v2(handle, SCHEDULES[schedule]), "cuDevicePrimaryCtxSetFlags")


def schedule_in_effect(device: int) -> str:
    """How ``device``'s primary context waits, as the driver reports it."""
    library = _libcuda()
    handle, flags, active = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()
    _check(library.cuDeviceGet(ctypes.byref(handle), device), "cuDeviceGet")
    _check(library.cuDevicePrimaryCtxGetState(handle, ctypes.byref(flags), ctypes.byref(active)),
           "cuDevicePrimaryCtxGetState")
    names = {value: name for name, value in SCHEDULES.items()}
    return names.get(flags.value & SCHEDULE_MASK, f"flags {flags.value:#x}")
