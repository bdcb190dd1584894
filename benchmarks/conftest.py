"""The pytest-benchmark suite (``pytest --benchmark-only``); without a GPU every benchmark is skipped with one
reason."""

import pytest

from bench.platform.env import gpu_skip_reason


def pytest_collection_modifyitems(config, items):
    reason = gpu_skip_reason()
    if reason:
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if "benchmark" in getattr(item, "fixturenames", ()):
                item.add_marker(skip)
