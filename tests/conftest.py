import contextlib
import fcntl
import gc
import os
import shutil
import subprocess
import tempfile
import warnings

import pytest

from bench.platform.env import gpu_skip_reason, missing_libraries, no_gpu_reason

_NO_GPU = no_gpu_reason()
_NO_LIBRARIES = missing_libraries()
GC_THRESHOLDS = (10_000, 20, 20)  # Python's: (700, 10, 10)


def _gpu_count() -> int:
    from cupy.cuda import runtime  # counting creates no CUDA context

    return runtime.getDeviceCount()


_CACHE = pytest.StashKey[tuple]()  # (BENCH_CACHE_DIR as it was or None, the session's cache directory)


def pytest_configure(config):
    """bench's cache (:mod:`bench.platform.cache`) in a directory of this process's own for the session, never the user's
    ~/.cache: the commands tests run here and in child processes (which inherit the environment) keep their entries
    there; it is removed at the session's end."""
    config.stash[_CACHE] = (os.environ.get("BENCH_CACHE_DIR"), tempfile.mkdtemp(prefix="bench-cache-"))
    os.environ["BENCH_CACHE_DIR"] = config.stash[_CACHE][1]


def pytest_unconfigure(config):
    if _CACHE not in config.stash:
        return
    given, made = config.stash[_CACHE]
    shutil.rmtree(made, ignore_errors=True)
    if given is None:
        os.environ.pop("BENCH_CACHE_DIR", None)
    else:
        os.environ["BENCH_CACHE_DIR"] = given


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


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    """Where no GPU is visible, the collector of this process (a pytest worker) works less: what collection made (the
    test modules and the libraries they import) is frozen out of its passes, and it runs a fourteenth as often.
    Figures and frames make objects by the million, and its passes over everything imported took a tenth of the
    analysis tests' time. Where a GPU is visible, tests time host intervals in this process: Python's defaults stay."""
    if _NO_GPU:
        gc.collect()
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLDS)


@pytest.fixture
def no_gpu():
    """For tests of what happens without a GPU; skipped where there is one."""
    if not _NO_GPU:
        pytest.skip("a GPU is visible here, so the no-GPU path cannot be exercised")
    return _NO_GPU


@contextlib.contextmanager
def _whole_gpu(tmp_path_factory):
    """An inter-process lock that tests needing the GPU to themselves take turns on: those that hold every SM (the
    device-wide hold) and those whose numbers need it alone (overlap speedups). GPU test modules run at once in
    processes of their own, and a context that holds the GPU takes time slices from the others (an overlap test ran
    at 0.64 of its speed beside a held region); the other GPU tests run beside them as before."""
    lock = tmp_path_factory.getbasetemp().parent / "bench-whole-gpu.lock"  # shared by the session's workers
    with open(lock, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture
def whole_gpu(tmp_path_factory):
    """The GPU to this test alone, among the tests that ask (see :func:`_whole_gpu`)."""
    with _whole_gpu(tmp_path_factory):
        yield


@pytest.fixture(scope="module")
def whole_gpu_module(tmp_path_factory):
    """The GPU to this module's tests alone, among the tests that ask (see :func:`_whole_gpu`)."""
    with _whole_gpu(tmp_path_factory):
        yield


@pytest.fixture
def run(monkeypatch, capsys):
    """``bench ARGS`` in this process, as ``python -m bench ARGS`` shows it (exit status, stdout, and stderr with the
    Python warnings a process would print): a CompletedProcess. What only a process shows (an exit by a signal, the
    modules a fresh interpreter imports) runs ``bench`` as one."""
    from bench import cli

    monkeypatch.setenv("COLUMNS", "100")

    def call(*args, cwd) -> subprocess.CompletedProcess:
        with monkeypatch.context() as here, warnings.catch_warnings(record=True) as caught:
            here.chdir(cwd)
            warnings.resetwarnings()  # Python's default filters: warnings once per place, deprecations hidden
            warnings.simplefilter("default")
            for hidden in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
                warnings.simplefilter("ignore", hidden)
            status = cli.main(list(args))
        out, err = capsys.readouterr()
        err += "".join(f"{warning.filename}:{warning.lineno}: {warning.category.__name__}: {warning.message}\n"
                       for warning in caught)
        return subprocess.CompletedProcess(["bench", *args], status, out, err)

    return call
