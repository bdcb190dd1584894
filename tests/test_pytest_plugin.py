"""bench's pytest plugin in another project's test suite: without a GPU, a test using ``assert_async`` (the fixture
or the function) is skipped with the reason bench's own GPU tests give, not failed with a traceback."""

import os
import subprocess
import sys
from pathlib import Path

from paths import with_path

SRC = str(Path(__file__).resolve().parents[1] / "src")
SUITE = '''
from bench.pytest_plugin import assert_async


def test_the_fixture(assert_async):
    with assert_async():
        pass


def test_the_function():
    with assert_async():
        pass
'''


def test_assert_async_skips_without_a_gpu(tmp_path, no_gpu):
    (tmp_path / "test_theirs.py").write_text(SUITE)
    env = {**os.environ, "PYTHONPATH": with_path(SRC), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # only the plugin under test
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "bench.pytest_plugin", "-p", "no:cacheprovider",
                             "-rs", "test_theirs.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "2 skipped" in result.stdout and "Traceback" not in result.stdout + result.stderr
    skips = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skips) == 2 and all(line.endswith(f"needs a GPU: {no_gpu}") for line in skips), skips
