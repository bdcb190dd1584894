"""bench's pytest plugin, as the ``pytest11`` entry point names it: the ``assert_async`` and ``assert_overlap``
fixtures and their functions, whose code is :mod:`bench.usercode.pytest_plugin`."""

from bench.usercode.pytest_plugin import (DidNotOverlap, assert_async, assert_async_fixture, assert_overlap,
                                          assert_overlap_fixture, baseline_path, check_overlap, gate_trace,
                                          skip_without_gpu)
from bench.usercode.syncs.checks import WaitedForGpu, check_waits, describe, gate_waits
from bench.usercode import pytest_plugin as _plugin

pytest_addoption, pytest_configure = _plugin.pytest_addoption, _plugin.pytest_configure  # pytest's hooks

# pytest's hooks (pytest_addoption, pytest_configure) are not star-imported: a conftest that does so while the plugin
# loads would add the options twice
__all__ = ["DidNotOverlap", "WaitedForGpu", "assert_async", "assert_async_fixture", "assert_overlap",
           "assert_overlap_fixture", "baseline_path", "check_overlap", "check_waits", "describe", "gate_trace",
           "gate_waits", "skip_without_gpu"]
