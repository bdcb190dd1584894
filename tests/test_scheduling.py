"""How the suite is spread over pytest-xdist's workers (conftest.py): every GPU test in one unit of work, so that no
two GPU tests share the GPU (their orderings and ratios of timings mean something only on a GPU of their own)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def suite_conftest():
    spec = importlib.util.spec_from_file_location("suite_conftest", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_gpu_test_is_one_unit_of_work_and_other_tests_each_their_own():
    group = suite_conftest().group
    gpu = {group(f"tests/{path.name}::test_x") for path in ROOT.glob("tests/test_gpu*.py")}
    assert len(gpu) == 1 and len(list(ROOT.glob("tests/test_gpu*.py"))) > 1
    assert group("tests/test_gpu.py::test_a") == group("tests/test_gpu_trace.py::test_b")
    assert group("tests/test_trace.py::test_a") != group("tests/test_trace.py::test_b")
    assert group("tests/test_report.py::test_a") == group("tests/test_report.py::test_b") == "tests/test_report.py"
