"""The probe and the pytest plugin without a GPU: stream handles, what a result says, the one-line refusal, and
that installing bench's plugin imports nothing CUDA into other test suites."""

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.platform.env import gpu_skip_reason
from bench.probe import ProbeResult, stream_handle

SRC = str(Path(__file__).resolve().parents[1] / "src")


def test_stream_handles_of_every_library():
    assert stream_handle(None) is None and stream_handle(7) == 7
    assert stream_handle(SimpleNamespace(ptr=11)) == 11  # CuPy
    assert stream_handle(SimpleNamespace(cuda_stream=12)) == 12  # PyTorch
    assert stream_handle(SimpleNamespace(handle=SimpleNamespace(value=13))) == 13  # numba-cuda
    with pytest.raises(TypeError, match="cannot tell the CUDA stream"):
        stream_handle("the default one")


def test_a_result_says_what_was_measured():
    waited = ProbeResult("waits-for-device", 19.8, False, 0.02, True, ["waits-for-device"] * 3, "serializes")
    assert waited.waited and str(waited) == (
        "waits-for-device: waited for the GPU; held the host 19.800 ms with a 20 ms kernel running on every stream "
        "(0.020 ms with nothing running); kernels on two other streams around it: serializes")
    flaky = ProbeResult("returns", 0.01, True, 0.01, False, ["returns", "waits-for-device", "returns"])
    assert not flaky.waited and str(flaky).endswith("repeats disagreed: returns, waits-for-device, returns")
    assert str(flaky).startswith("returns: returned while the GPU was busy")


def _bench(*args, cwd):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("target, fragment", [
    ("nocolon", "is not MODULE:FUNCTION"),
    ("bench_no_such_module:step", "cannot load bench_no_such_module:step"),
    ("os:no_such_function", "probe: os has no function 'no_such_function'"),
    ("os:sep", "is not callable"),
    ("mine.py:nothing", "probe: mine.py has no function 'nothing'"),
])
def test_probe_refuses_what_it_cannot_call(tmp_path, monkeypatch, capsys, target, fragment):
    from bench import cli
    from bench.platform import env

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.py").write_text("")
    monkeypatch.setattr(env, "no_gpu_reason", lambda: None)  # as on a GPU machine: the target is what is wrong
    status = cli.main(["probe", target])
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and fragment in lines[0] and "__bench_target__" not in lines[0], lines
    # nothing written: Python's own bytecode cache of mine.py, where it keeps one, is not bench's
    assert [path.name for path in tmp_path.iterdir() if path.name != "__pycache__"] == ["mine.py"]


def test_probe_without_a_gpu_is_one_line_and_runs_nothing(tmp_path, no_gpu):
    (tmp_path / "mine.py").write_text("open('ran', 'w').close()\n\ndef step():\n    pass\n")
    for target in ("os:getcwd", "mine.py:step"):
        result = _bench("probe", target, cwd=tmp_path)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith(
            f"bench: error: probe needs a GPU: {no_gpu}"), lines
    assert [path.name for path in tmp_path.iterdir()] == ["mine.py"]  # the module never ran


def _pytest_with_the_plugin(tmp_path, name: str, source: str):
    """Run a test file with bench's plugin loaded by name (and the installed entry point, if any, left out)."""
    (tmp_path / name).write_text(source)
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                           "bench.pytest_plugin", "-p", "no:bench", str(tmp_path / name)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_plugin_imports_no_cuda_until_used(tmp_path):
    """A test suite that never uses assert_async gets no CuPy or numba from bench's plugin."""
    result = _pytest_with_the_plugin(tmp_path, "test_plain.py",
                                     "import sys\n\ndef test_plain():\n    assert not [m for m in sys.modules if "
                                     "m.split('.')[0] in ('cupy', 'numba', 'torch')]\n")
    assert "1 passed" in result.stdout, result.stdout + result.stderr


def test_the_fixture_hands_out_the_context_manager(tmp_path):
    """Where a GPU is usable the fixture is the context manager; elsewhere it skips, saying why."""
    result = _pytest_with_the_plugin(tmp_path, "test_fixture.py",
                                     "from bench.pytest_plugin import assert_async as manager\n\n\n"
                                     "def test_fixture(assert_async):\n    assert assert_async is manager\n")
    expected = "1 skipped" if gpu_skip_reason() else "1 passed"
    assert expected in result.stdout, result.stdout + result.stderr


def test_a_probed_call_is_not_held_inside_allow_waits_whose_time_is_set_aside():
    import time

    import bench
    from bench.timing.spin import CallDuringSpin
    from bench.usercode.probe import _Unheld

    steps = []
    unheld = _Unheld(lambda: steps.append("let go"), lambda: steps.append("held again"), lambda: False)

    def call():
        with bench.allow_waits("log"):
            with bench.allow_waits("eval"):
                time.sleep(0.002)  # an allowed wait
                steps.append("waited")
        steps.append("after")

    def during(listened):  # a hold that times the call: holding again takes its time from the host's
        listened()
        return CallDuringSpin(host_ms=5.0, spin_left_ms=20.0, spin_running=True)

    seen = unheld.timed(during, call)
    assert steps == ["let go", "waited", "held again", "after"]
    assert list(unheld.reasons) == ["log", "eval"] and seen.spin_running
    assert unheld.aside_s >= 0.002 and seen.host_ms == 5.0 - unheld.aside_s * 1e3
    result = ProbeResult("returns", 0.01, True, 0.01, True, ["returns"] * 3, allowed=("log", "eval"))
    assert str(result).endswith("; not held inside allow_waits (log; eval)")


def test_a_wait_before_an_allowed_scope_is_not_hidden_by_the_hold_after_it():
    import bench
    from bench.timing.spin import CallDuringSpin
    from bench.usercode.probe import _Unheld

    unheld = _Unheld(lambda: None, lambda: None, lambda: True)  # the hold had ended: the call waited before

    def call():
        with bench.allow_waits("log"):
            pass

    seen = unheld.timed(lambda listened: (listened(), CallDuringSpin(5.0, 20.0, True))[1], call)
    assert not seen.spin_running  # a new hold ran to the end, but the call had waited before the scope


def test_a_scope_left_open_is_held_again_at_the_return_and_a_later_leaving_tells_nobody():
    import bench
    from bench.timing.spin import CallDuringSpin
    from bench.usercode.probe import _Unheld

    steps = []
    unheld = _Unheld(lambda: steps.append("let go"), lambda: steps.append("held again"), lambda: False)
    scope = bench.allow_waits("a generator's")

    def call():
        scope.__enter__()  # left open when the call returns

    seen = unheld.timed(lambda listened: (listened(), CallDuringSpin(5.0, 20.0, True))[1], call)
    assert steps == ["let go", "held again"] and seen.spin_running and unheld.depth == 0
    scope.__exit__(None, None, None)  # after the probe: its listener is not told
    assert steps == ["let go", "held again"] and unheld.depth == 0


def test_the_commands_keep_what_jax_compiles_in_benchs_cache_unless_told_otherwise(tmp_path, monkeypatch):
    import sys

    from bench.cli.usercode import keep_compiled

    for name in ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
                 "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    keep_compiled()
    assert os.environ["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path / "cache" / "xla")
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", "/mine")  # the user's choice stands
    keep_compiled()
    assert os.environ["JAX_COMPILATION_CACHE_DIR"] == "/mine"
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR")
    monkeypatch.setenv("BENCH_CACHE_DIR", "off")  # bench's cache off: nothing kept
    keep_compiled()
    assert "JAX_COMPILATION_CACHE_DIR" not in os.environ
