import pytest

from bench.env import gpu_skip_reason, missing_libraries, no_gpu_reason

_NO_GPU = no_gpu_reason()
_NO_LIBRARIES = missing_libraries()


def _gpu_count() -> int:
    from cupy.cuda import runtime  # counting creates no CUDA context

    return runtime.getDeviceCount()


def pytest_collection_modifyitems(config, items):
    if _NO_LIBRARIES:
        skip = pytest.mark.skip(reason=f"needs the measuring libraries: {_NO_LIBRARIES}")
        for item in items:
            if "cuda_libs" in item.keywords:
                item.add_marker(skip)
    if _NO_GPU:
        skip = pytest.mark.skip(reason=gpu_skip_reason())
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)
        return
    pairs = [item for item in items if "two_gpus" in item.keywords]
    if pairs and _gpu_count() < 2:
        skip = pytest.mark.skip(reason=f"needs two GPUs (GPU pairs): {_gpu_count()} visible")
        for item in pairs:
            item.add_marker(skip)


@pytest.fixture
def no_gpu():
    """For tests of what happens without a GPU; skipped where there is one."""
    if not _NO_GPU:
        pytest.skip("a GPU is visible here, so the no-GPU path cannot be exercised")
    return _NO_GPU
