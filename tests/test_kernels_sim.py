"""The numba kernels' logic (mix, the SMs' copy, the chase) under Numba's CUDA simulator (no GPU needed; a fresh
process, since the simulator must be chosen before numba.cuda is first imported)."""

import os
import subprocess
import sys
from pathlib import Path

from paths import with_path

import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")

SCRIPT = """
import numpy as np
from numba import cuda
from bench.measure.kernels import mix_array_kernel, mix_reference
values = np.random.default_rng(3).integers(0, 2**32, 1000, dtype=np.uint32)
data = cuda.to_device(values.copy())
mix_array_kernel[4, 64](data, 9)
assert np.array_equal(data.copy_to_host(), mix_reference(values, 9))
assert not np.array_equal(mix_reference(values, 9), values)

from bench.measure.kernels import _chase, _sm_copy
source = np.random.default_rng(5).integers(0, 2**63, 1003, dtype=np.uint64)
for blocks, threads in ((1, 1), (3, 32), (64, 64)):  # a tail, fewer threads than words, more threads than words
    destination = np.zeros_like(source)
    cuda.jit(_sm_copy)[blocks, threads](destination, source, source.size)
    assert np.array_equal(destination, source), (blocks, threads)
destination = np.zeros_like(source)
cuda.jit(_sm_copy)[2, 32](destination, source, 500)
assert np.array_equal(destination[:500], source[:500]) and not destination[500:].any()

from bench.measure.chase import chain_end, pointer_chain
words = pointer_chain(64 * 256, seed=1)
out = np.zeros(1, np.uint64)
chase = cuda.jit(_chase)
chase[1, 1](words, 10, out)
assert int(out[0]) == chain_end(words, 10) != 0
chase[1, 1](words, 54, out)  # walks on from where it stopped: 64 links in all, the whole cycle
assert int(out[0]) == 0
print("ok")
"""


@pytest.mark.cuda_libs  # numba-cuda's simulator
def test_mix_copy_and_chase_kernels_in_simulator():
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONPATH": with_path(SRC)}
    result = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
