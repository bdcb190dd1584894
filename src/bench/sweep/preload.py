"""What the sweep's fork server does once, so that no experiment's process does it again: import what experiments
import, and build numba-cuda's CUDA target (its typing and lowering registries, which import SciPy: about 0.5 s that
every process paid before its first kernel, measured by ``scripts/profile_children.py``), and read which
distributions are installed (the library experiment's rows record their libraries' versions). Nothing here touches
the CUDA driver: each forked process still creates its own context.
"""

import cupy  # noqa: F401
from numba import cuda  # noqa: F401
from numba.cuda.descriptor import cuda_target

import bench.catalogs.runtime  # noqa: F401
import bench.platform.libraries
import bench.measure.kernels  # noqa: F401
import bench.measure.memory  # noqa: F401
import bench.sweep.processes  # noqa: F401
import bench.timing.clock  # noqa: F401
import bench.timing.gpu  # noqa: F401
import bench.timing.spin  # noqa: F401
import bench.timing.timeline  # noqa: F401

cuda_target.typing_context.refresh()
cuda_target.target_context.refresh()
bench.platform.libraries.distributions()  # the installed distributions, read once: every library row records versions
