"""The analysis side of bench never needs CUDA: with every CUDA library hidden as if not installed, the store,
figures, report, compare and claims still work on committed results, the measuring commands name the extra to install;
and the CUDA stand-ins import only on first use."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench.cuda import LazyModule
from paths import with_path

ROOT = Path(__file__).resolve().parents[1]
CATALOG = "20261121T145029Z-NVIDIA-H200.parquet"  # alloc, blocking, graphs, serialization: what the claims need


def committed(name: str) -> Path:
    results = ROOT / "results"
    found = sorted(results.glob(name)) + sorted((results / "_superseded").glob(f"**/{name}"))
    if not found:
        pytest.skip(f"the committed results file {name} is neither in results/ nor under results/_superseded/")
    return found[0]


HIDDEN_RUN = textwrap.dedent("""
    import importlib.util
    import sys

    # The measuring stack (the cu12 and cu13 extras: CuPy, numba-cuda, cuda-python, nvidia-ml-py) and the optional
    # libraries, as a core-only install has them: not there.
    HIDDEN = ("cupy", "cupyx", "cupy_backends", "numba", "numba_cuda", "cuda", "pynvml", "torch", "jax", "jaxlib")


    class Hide:
        \"""Wraps a finder: hidden modules are not found, so they look uninstalled.\"""

        def __init__(self, finder):
            self.finder = finder

        def find_spec(self, name, path=None, target=None):
            return None if name.split(".")[0] in HIDDEN else self.finder.find_spec(name, path, target)

        def __getattr__(self, name):  # the rest (installed distributions' metadata, caches) as the finder has it
            return getattr(self.finder, name)


    for loaded in [name for name in sys.modules if name.split(".")[0] in HIDDEN]:
        del sys.modules[loaded]  # a .pth file may have imported a namespace package already
    sys.meta_path[:] = [Hide(finder) for finder in sys.meta_path]
    assert importlib.util.find_spec("cupy") is None and importlib.util.find_spec("pynvml") is None

    import bench.analysis, bench.claims, bench.compare, bench.plots, bench.report, bench.store
    import bench.experiments
    assert len(bench.experiments.registry()) >= 7
    from bench import cli

    results, out = sys.argv[1], sys.argv[2]
    for command in (["report", results, "--out", f"{out}/report.html"], ["plot", results, "--out", out],
                    ["compare", results, results], ["claims", results], ["sweep", "--quick"], ["env"],
                    ["probe", "json:dumps"]):
        status = cli.main(command)
        print("status", command[0], status, flush=True)
    print("loaded", sorted(name for name in sys.modules if name.split(".")[0] in HIDDEN))
""")


def test_analysis_commands_run_without_the_cuda_libraries(tmp_path):
    """A committed version 1 run (alloc, blocking, graphs, serialization) beside synthetic library rows (what the
    Python claims need): one directory, read as one dataset."""
    import shutil

    import synthetic
    from bench import store

    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(committed(CATALOG), results)
    machine = store.read(committed(CATALOG), synthetic.suite()).iloc[0]  # the same GPU, so claims judge both files together
    library = synthetic.tagged(synthetic.records("library"), gpu_uuid=machine["gpu_uuid"],
                               hostname=machine["hostname"], gpu_name=machine["gpu_name"])
    synthetic.write(results / "20261122T000000Z-library.parquet", library)
    environment = {**os.environ, "PYTHONPATH": with_path(str(ROOT / "src")), "COLUMNS": "300"}  # env's table on one line
    out = tmp_path / "plots"
    result = subprocess.run([sys.executable, "-c", HIDDEN_RUN, str(results), str(out)], cwd=tmp_path,
                            env=environment, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    lines = result.stdout.splitlines()
    statuses = [line for line in lines if line.startswith("status ")]
    assert statuses == ["status report 0", "status plot 0", "status compare 0", "status claims 0", "status sweep 2",
                        "status env 0", "status probe 2"], result.stdout[-2000:] + result.stderr[-2000:]
    assert "loaded []" in lines
    assert "CUDA claims against measurement" in result.stdout
    assert "measuring what the results lack" not in result.stdout
    names = sorted(path.name for path in out.iterdir())
    assert {"report.html", "blocking_truth_table.png", "alloc.png", "alloc.svg"} <= set(names)
    assert "cudaFree" in (out / "report.html").read_text()
    missing = 'measuring needs CuPy, numba-cuda, nvidia-ml-py (not installed): pip install "cuda-sync-bench[cu12]"'
    refusals = [line for line in result.stderr.splitlines() if line.startswith("bench: error: ") and missing in line]
    assert len(refusals) == 2, result.stderr[-2000:]  # sweep and probe ("probe needs a GPU: ..."): one line each
    assert missing in result.stdout  # env shows the host's readings, and why it cannot measure
    assert sorted(path.name for path in tmp_path.iterdir()) == ["plots", "results"]  # nothing else written


def test_lazy_module_imports_on_first_use(monkeypatch):
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    lazy = LazyModule("colorsys")
    assert repr(lazy) == "<lazy module 'colorsys'>" and "colorsys" not in sys.modules
    assert lazy.rgb_to_hsv(1.0, 0.0, 0.0) == (0.0, 1.0, 1.0)
    assert "colorsys" in sys.modules and "rgb_to_hsv" in vars(lazy)  # later lookups skip __getattr__
    with pytest.raises(AttributeError):
        lazy.no_such_function
    missing = LazyModule("no_such_module_anywhere")
    with pytest.raises(ImportError):
        missing.anything


def test_the_cuda_stand_ins_are_lazy():
    script = ("import sys\nfrom bench import cuda, timing\nfrom bench.measure import memory\nfrom bench.catalogs import runtime\n"
              "print(sorted(m for m in sys.modules if m.split('.')[0] in ('cupy', 'numba')))\n"
              "print(repr(cuda.runtime), repr(cuda.kernels))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": with_path(str(ROOT / "src"))})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["[]", "<lazy module 'cupy.cuda.runtime'> <lazy module 'bench.measure.kernels'>"]
