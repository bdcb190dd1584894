"""Which suite a pytest run selects: plain ``pytest`` the unit tests in tests/, ``pytest --benchmark-only`` the
pytest-benchmark benchmarks in benchmarks/ (the other suite is deselected)."""

from pathlib import Path

BENCHMARKS = Path(__file__).parent / "benchmarks"


def is_benchmark(item) -> bool:
    return BENCHMARKS in Path(item.path).parents


def pytest_collection_modifyitems(config, items):
    benchmarks_only = bool(config.getoption("benchmark_only", default=False))
    keep = [item for item in items if is_benchmark(item) == benchmarks_only]
    if len(keep) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if is_benchmark(item) != benchmarks_only])
        items[:] = keep
