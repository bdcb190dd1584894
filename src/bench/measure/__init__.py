"""Measuring tools the experiments share: what an experiment's ``measure`` is built from (memory, kernels, capture,
copies, chase, launches, pipeline, verdicts, columns). The instruments that look at the user's code are
:mod:`bench.usercode`'s.

What a module here may import: :mod:`bench.platform.cuda` (on first use), :mod:`bench.timing`,
:mod:`bench.results.schema`, :mod:`bench.platform.units`, :mod:`bench.platform.vocabulary`, and each other; never the
experiments, the sweep, the catalogs or :mod:`bench.usercode` (``tests/test_layout.py``). Importing this package
imports none of its modules (``kernels`` is a stand-in), and none imports a CUDA library before it is used. More:
docs/reference/packages.md.
"""

from bench.platform import lazy

kernels = lazy.module("bench.measure.kernels")  # the numba-cuda kernels, on first use: compiling them needs numba
