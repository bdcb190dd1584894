"""Which suite a pytest run selects: plain ``pytest`` the unit tests in tests/, ``pytest --benchmark-only`` the
pytest-benchmark benchmarks in benchmarks/ (the other suite is deselected).

Plain ``pytest`` spreads the tests over the machine's CPUs (pytest-xdist's ``-n auto`` in pyproject.toml; ``-n 0``
runs them in this process). Each test is a unit of work of its own, but for the modules run by one worker each, test
after test: every GPU test (each lives in tests/test_gpu*.py), one worker running them all, so that no two share the GPU
(run at once, one module's copies slowed another's bandwidth below its own ordering checks), and each
module of GROUPED, whose module-scoped fixtures are expensive (a report rendered once for the module, the README's
commands run once in a fresh clone). ``--benchmark-only`` runs in this process: pytest-benchmark measures nothing
under xdist."""

from pathlib import Path

import pytest

ROOT = Path(__file__).parent
BENCHMARKS = ROOT / "benchmarks"
GROUPED = ("tests/test_fresh_clone.py", "tests/test_report.py", "tests/test_report_safety.py")


def is_benchmark(item) -> bool:
    return BENCHMARKS in Path(item.path).parents


def group(nodeid: str) -> str:
    """The unit of work of a test, by its node id: all GPU tests together, a module of GROUPED, else the test
    itself."""
    module = nodeid.split("::")[0]
    if module.startswith("tests/test_gpu"):
        return "tests/test_gpu"
    return module if module in GROUPED else nodeid


@pytest.hookimpl(tryfirst=True)  # before xdist turns -n auto into workers
def pytest_cmdline_main(config):
    if config.getoption("benchmark_only", default=False) and config.getoption("numprocesses", default=None):
        config.option.numprocesses = 0


@pytest.hookimpl(tryfirst=True)  # before xdist's own scheduler for the default --dist load
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "load":
        return None  # a --dist named on the command line
    from xdist.scheduler import LoadScopeScheduling

    class Groups(LoadScopeScheduling):
        """Load scheduling by units of work (:func:`group`)."""

        def _split_scope(self, nodeid: str) -> str:
            return group(nodeid)

    return Groups(config, log)


def pytest_collection_modifyitems(config, items):
    benchmarks_only = bool(config.getoption("benchmark_only", default=False))
    keep = [item for item in items if is_benchmark(item) == benchmarks_only]
    if len(keep) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if is_benchmark(item) != benchmarks_only])
        items[:] = keep
    strays = [item.nodeid for item in items
              if item.get_closest_marker("gpu") and not item.nodeid.startswith("tests/test_gpu")]
    if strays:
        raise pytest.UsageError(f"GPU tests belong in tests/test_gpu*.py (conftest.py runs each module's in order): "
                                f"{', '.join(strays)}")
