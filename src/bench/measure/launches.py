"""Launching a kernel from Python, path by path: each path's call makes ``LAUNCHES`` launches of an empty one-block
kernel on a stream, and :func:`launch_samples` gives the host's time per launch (the ``launch`` experiment's rows;
the ``overlap`` experiment's cost of a launch on its own paths)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from bench.platform.cuda import cupy, numba_cuda, runtime
from bench.measure import kernels
from bench.timing import Context, Samples
from bench.timing.kernels import nvrtc_cubin
from bench.platform.vocabulary import Unit

EMPTY = 'extern "C" __global__ void empty(unsigned int *data, long long count, int rounds) {}'
LAUNCHES = 100
LAUNCH_METRIC = "host time per kernel launch"


def launchers(kernel, stream, paths: Sequence[str] = ("dispatcher", "precompiled", "graph")) -> dict:
    """One call per path that makes ``LAUNCHES`` launches of an empty one-block kernel on ``stream``; a path that
    cannot be set up here maps to the reason (a string)."""
    from bench.measure.capture import capture

    data = cupy.zeros(1, dtype=cupy.uint32)
    array = numba_cuda.as_cuda_array(data)
    handle = kernels.numba_stream(stream.ptr)

    from numba.cuda.core.errors import NumbaPerformanceWarning

    def dispatcher():
        with warnings.catch_warnings():  # one block on purpose: numba's low-occupancy warning does not apply
            warnings.simplefilter("ignore", NumbaPerformanceWarning)
            for _ in range(LAUNCHES):
                kernels.mix_array_kernel[1, 1, handle](array, 0)

    def precompiled():
        for _ in range(LAUNCHES):
            kernel.launch(stream, data.data.ptr, 1, 0)

    made = {"dispatcher": dispatcher, "precompiled": precompiled}
    makers = {"cupy-raw": _cupy_raw, "cuda-core": _cuda_core, "cuda-bindings": _cuda_bindings}
    for path in paths:
        if path in makers:
            try:
                made[path] = makers[path](stream, data)
                made[path]()  # once: a path that fails, fails here
                runtime.deviceSynchronize()
            except Exception as error:  # a missing or different library: reported, not fatal
                made[path] = f"{type(error).__name__}: {error}"
    if "graph" in paths:
        graph = capture(stream, [], precompiled)
        made["graph"] = lambda: graph.launch(stream)
    return made


def _cupy_raw(stream, data):
    function = cupy.RawKernel(EMPTY, "empty")
    count, rounds = np.int64(1), np.int32(0)

    def launch():
        for _ in range(LAUNCHES):
            function((1,), (1,), (data, count, rounds), stream=stream)

    return launch


def _cuda_core(stream, data):
    try:
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
    except ImportError:
        from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch
    device = Device(runtime.getDevice())
    device.set_current()
    program = Program(EMPTY, code_type="c++", options=ProgramOptions(arch=f"sm_{device.arch}"))
    function = program.compile("cubin").get_kernel("empty")
    own = device.create_stream()  # cuda.core launches on its own stream object
    config = LaunchConfig(grid=1, block=1)
    pointer, count, rounds = data.data.ptr, np.int64(1), np.int32(0)

    def launch_all():
        for _ in range(LAUNCHES):
            launch(own, config, function, pointer, count, rounds)
        own.sync()

    return launch_all


def _cuda_bindings(stream, data):
    import ctypes

    from cuda.bindings import driver

    def check(result):
        error, *values = result if isinstance(result, tuple) else (result,)
        if error != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuda.bindings: {error}")
        return values[0] if values else None

    module = check(driver.cuModuleLoadData(nvrtc_cubin(EMPTY)))
    function = check(driver.cuModuleGetFunction(module, b"empty"))
    values = (ctypes.c_void_p(data.data.ptr), ctypes.c_longlong(1), ctypes.c_int(0))
    packed = (ctypes.c_void_p * 3)(*(ctypes.addressof(value) for value in values))  # packed once
    handle = driver.CUstream(stream.ptr)
    address = ctypes.addressof(packed)

    def launch():
        for _ in range(LAUNCHES):
            driver.cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, handle, address, 0)

    launch.keep = (values, packed, module)  # alive as long as the launcher
    return launch


def launch_samples(context: Context, call, stream) -> Samples:
    """Host µs per launch of ``call`` (one of :func:`launchers`), waiting for the stream untimed after each."""
    return context.host(call, metric=LAUNCH_METRIC, unit=Unit.US, per_sample=LAUNCHES, after=stream.synchronize)
