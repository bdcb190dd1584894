"""Loaded by every interpreter of a test's child process with this directory first on its PYTHONPATH
(``tests/paths.py``'s ``WITHOUT_CUDA``: the fresh clone's commands, the measuring commands' refusals), and by their
children (PYTHONPATH carries it; the report's figure workers among them). It makes the CUDA libraries look
uninstalled, as after ``pip install -e .`` alone, and writes a line to ``$BENCH_TEST_LOOKUPS`` when the interpreter
starts and whenever it looks for one of them. The figures are built by their views as ever, then painted blank (a
one-colour PNG of the figure's size, an empty SVG): the commands, not the pixels, are what the tests look at;
tests/test_report.py and tests/test_plots.py draw figures for real. What bench keeps (its cache) lies in a directory
of its own, below the one given: a report or figure painted blank is never found where real ones are kept."""

import importlib.abc
import os
import sys

from blank_painting import blank_compact, blank_render  # beside this file, on the same path

# The measuring stack (the cu12 and cu13 extras: CuPy, numba-cuda, cuda-python, nvidia-ml-py) and the optional
# libraries: what a core-only install lacks.
HIDDEN = ("cupy", "cupyx", "cupy_backends", "numba", "numba_cuda", "cuda", "pynvml", "torch", "jax", "jaxlib")


def log(line: str) -> None:
    with open(os.environ["BENCH_TEST_LOOKUPS"], "a") as handle:
        handle.write(f"{os.getpid()} {line}\n")


BLANKED = {"bench.analysis.plots": ("render", blank_render), "bench.report.figures": ("compact", blank_compact)}


class Blanking(importlib.abc.Loader):
    """A module's own loader, then its painting function replaced by the blank one."""

    def __init__(self, loader, name: str):
        self.loader, self.name = loader, name

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        attribute, blank = BLANKED[self.name]
        setattr(module, attribute, blank)

    def __getattr__(self, name):  # get_source and the rest, for tracebacks
        return getattr(self.loader, name)


class Hide:
    """Wraps a finder: hidden modules are not found (and the look is logged), painting modules load blanking."""

    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            log(f"looked for {name}")
            return None
        spec = self.finder.find_spec(name, path, target)
        if spec is not None and name in BLANKED and spec.loader is not None:
            spec.loader = Blanking(spec.loader, name)
        return spec

    def __getattr__(self, name):  # the rest (installed distributions' metadata, caches) as the finder has it
        return getattr(self.finder, name)


BLANK_CACHE = "blank-painted"  # what is kept of figures painted blank lies apart: never found by a real painting
if os.environ.get("BENCH_CACHE_DIR", "off") != "off":
    os.environ["BENCH_CACHE_DIR"] = os.path.join(os.environ["BENCH_CACHE_DIR"], BLANK_CACHE)
for loaded in [name for name in sys.modules if name.split(".")[0] in HIDDEN]:
    del sys.modules[loaded]  # a .pth file may have imported a namespace package already
sys.meta_path[:] = [Hide(finder) if hasattr(finder, "find_spec") else finder for finder in sys.meta_path]
log("started " + " ".join(sys.argv[:2]))
