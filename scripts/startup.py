"""Where an experiment's process spends its first seconds: imports, the CUDA context, kernel compilation (numba's
on-disk cache), the first buffers. Run it twice: the second run shows what the caches save.

    python scripts/startup.py
"""

import time

started = time.perf_counter()
marks = []


def mark(what: str) -> None:
    marks.append((what, time.perf_counter()))


import bench.sweep.processes  # noqa: E402,F401  (what the child imports to receive its plan)

mark("import bench.sweep.processes (the experiments, the timing core)")
import cupy  # noqa: E402

mark("import cupy")
from numba import cuda  # noqa: E402,F401  (its import time is what is measured)

mark("import numba.cuda")
from bench.platform.env import gpu_environment, use_device  # noqa: E402

environment = gpu_environment(0)
mark("read the environment (NVML, device properties): what the sweep's parent does")
use_device(0)
cupy.cuda.runtime.free(cupy.cuda.runtime.malloc(1))
mark("select the device and create its CUDA context: what each experiment's process does")
from bench.measure import kernels  # noqa: E402

mark("import bench.measure.kernels (numba decorators)")
from bench.timing import Gate, SpinWatch  # noqa: E402

gate = Gate(1.0)
stream = cupy.cuda.Stream(non_blocking=True)
gate.close(stream)
gate.open()
stream.synchronize()
mark("first gate kernel (compile or load from cache, launch)")
watch = SpinWatch()
watch.launch(stream, 0, 0.1)
stream.synchronize()
mark("first spin kernel")
mix = kernels.MixKernel()
data = cupy.zeros(1 << 20, dtype=cupy.uint32)
mix.launch(stream, data.data.ptr, data.size, 1)
stream.synchronize()
mark("first mix kernel")
from bench.measure.copies import fill_random  # noqa: E402

buffer = cupy.empty(64 << 20, dtype=cupy.uint8)
fill_random(buffer, 0)
mark("random fill of 64 MiB (CuPy kernels: compile or load from cache)")
from bench.measure.memory import HostBuffer  # noqa: E402

with HostBuffer("pinned", 64 << 20):
    pass
mark("64 MiB of pinned host memory")

previous = started
print(f"{'phase':<66} {'ms':>8}")
for what, moment in marks:
    print(f"{what:<66} {(moment - previous) * 1e3:8.1f}")
    previous = moment
print(f"{'total':<66} {(previous - started) * 1e3:8.1f}")
