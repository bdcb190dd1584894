"""The pytest-benchmark suite (``pytest --benchmark-only``); without a GPU every benchmark is skipped with one
reason."""

import pytest

from bench.env import no_gpu_reason


def pytest_collection_modifyitems(config, items):
    reason = no_gpu_reason()
    if reason:
        skip = pytest.mark.skip(reason=f"needs a GPU: {reason}")
        for item in items:
            if "benchmark" in getattr(item, "fixturenames", ()):
                item.add_marker(skip)
