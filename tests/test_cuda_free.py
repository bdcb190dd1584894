"""Without CUDA: with every CUDA library hidden as if not installed, the analysis side imports and the measuring
commands name the extra to install (that the README's analysis commands work so, on every committed run, is
tests/test_fresh_clone.py's); and the CUDA stand-ins import only on first use."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench.platform import lazy
from paths import WITHOUT_CUDA, with_path

ROOT = Path(__file__).resolve().parents[1]


HIDDEN_RUN = textwrap.dedent("""
    import importlib.util
    import sys

    from sitecustomize import HIDDEN  # tests/clone_site's, loaded before this ran: those libraries look uninstalled

    assert importlib.util.find_spec("cupy") is None and importlib.util.find_spec("pynvml") is None

    import bench.analysis.selection, bench.analysis.claims, bench.analysis.compare, bench.analysis.plots, bench.report, bench.results.store
    import bench.experiments
    assert len(bench.experiments.registry()) >= 7
    from bench import cli

    for command in (["sweep", "--quick"], ["env"], ["probe", "json:dumps"]):
        status = cli.main(command)
        print("status", command[0], status, flush=True)
    print("loaded", sorted(name for name in sys.modules if name.split(".")[0] in HIDDEN))
""")


def test_the_measuring_commands_name_the_extra_to_install_without_the_cuda_libraries(tmp_path, tmp_path_factory):
    environment = {**os.environ, "PYTHONPATH": with_path(f"{WITHOUT_CUDA}{os.pathsep}{ROOT / 'src'}"),
                   "BENCH_TEST_LOOKUPS": str(tmp_path_factory.mktemp("lookups") / "log"),
                   "COLUMNS": "300"}  # env's table on one line
    result = subprocess.run([sys.executable, "-c", HIDDEN_RUN], cwd=tmp_path, env=environment, capture_output=True,
                            text=True, timeout=240)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    lines = result.stdout.splitlines()
    statuses = [line for line in lines if line.startswith("status ")]
    assert statuses == ["status sweep 2", "status env 0", "status probe 2"], (result.stdout[-2000:]
                                                                              + result.stderr[-2000:])
    assert "loaded []" in lines
    missing = 'measuring needs CuPy, numba-cuda, nvidia-ml-py (not installed): pip install "cuda-sync-bench[cu12]"'
    refusals = [line for line in result.stderr.splitlines() if line.startswith("bench: error: ") and missing in line]
    assert len(refusals) == 2, result.stderr[-2000:]  # sweep and probe ("probe needs a GPU: ..."): one line each
    assert missing in result.stdout  # env shows the host's readings, and why it cannot measure
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_lazy_module_imports_on_first_use(monkeypatch):
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    stand_in = lazy.module("colorsys")
    assert repr(stand_in) == "<lazy module 'colorsys'>" and "colorsys" not in sys.modules
    assert stand_in.rgb_to_hsv(1.0, 0.0, 0.0) == (0.0, 1.0, 1.0)
    assert "colorsys" in sys.modules and "rgb_to_hsv" in vars(stand_in)  # later lookups skip __getattr__
    with pytest.raises(AttributeError):
        stand_in.no_such_function
    missing = lazy.module("no_such_module_anywhere")
    with pytest.raises(ImportError):
        missing.anything


def test_the_cuda_stand_ins_are_lazy():
    script = ("import sys\nfrom bench import timing\nfrom bench.platform import cuda\nfrom bench.measure import memory\n"
              "from bench.catalogs import runtime\nfrom bench.measure import kernels\n"
              "print(sorted(m for m in sys.modules if m.split('.')[0] in ('cupy', 'numba')))\n"
              "print(repr(cuda.runtime), repr(kernels))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": with_path(str(ROOT / "src"))})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["[]", "<lazy module 'cupy_backends.cuda.api.runtime'> <lazy module 'bench.measure.kernels'>"]
