"""Measuring tools the experiments share: what an experiment's ``measure`` is built from.

- :mod:`~bench.measure.memory`: host memory kinds, device allocators, streams and buffer sets;
- :mod:`~bench.measure.kernels`: the numba-cuda kernels (``from bench.measure import kernels``: a stand-in,
  imported on first use);
- :mod:`~bench.measure.capture`: work over several streams, forked, joined and captured into a CUDA graph;
- :mod:`~bench.measure.copies`: copy buffers, copies, their verification (poison, copy once, compare) and timing;
- :mod:`~bench.measure.chase`: the pointer chain a one-thread kernel chases, and its verified, timed chase;
- :mod:`~bench.measure.launches`: the kernel launch paths and their host time per launch;
- :mod:`~bench.measure.pipeline`: the chunked H2D → kernel → D2H pipeline, its stage times, bound and check;
- :mod:`~bench.measure.verdicts`: a call made while spin kernels run, its verdicts, repeated until they settle;
- :mod:`~bench.measure.columns`: result columns several experiments declare alike.

The instruments that look at the user's code (the hold, the watcher, CUPTI's callbacks and records) are not here:
they are :mod:`bench.usercode`'s.

What a module here may import: :mod:`bench.platform.cuda` (CuPy and numba-cuda, on first use), :mod:`bench.timing`,
:mod:`bench.results.schema`, :mod:`bench.platform.units`, :mod:`bench.platform.vocabulary`, and each other. Never :mod:`bench.experiments` or
the sweep (:mod:`bench.sweep`): experiments are built from these tools, not the other way round, and no experiment
imports another; nor the call catalogs (:mod:`bench.catalogs`), which stand on these tools (their calls allocate with
:mod:`bench.measure.memory`; :mod:`bench.catalogs.measured` measures the runtime's call by call); nor
:mod:`bench.usercode`, which stands on them too (``tests/test_layout.py`` checks). Importing this package imports
none of its modules (``kernels`` is a stand-in), and none of them imports a CUDA library before it is used, so an experiment's description can
import them.
"""

from bench.platform import lazy

kernels = lazy.module("bench.measure.kernels")  # the numba-cuda kernels, on first use: compiling them needs numba
