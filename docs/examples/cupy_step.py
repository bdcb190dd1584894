"""A CuPy step as users write it: matrix products on the current stream, the result's norm read back every step.

    python -m bench syncs docs/examples/cupy_step.py:step     # which line waits for the GPU?
"""

import cupy

weights = cupy.random.standard_normal((4096, 4096), dtype=cupy.float32) / 64
batch = cupy.random.standard_normal((8192, 4096), dtype=cupy.float32)
norms = []


def step():
    hidden = cupy.maximum(batch @ weights, 0)
    out = hidden @ weights
    norms.append(float(cupy.linalg.norm(out)))
