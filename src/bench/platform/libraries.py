"""The GPU libraries bench knows, one record each (:class:`Library`, in :data:`LIBRARIES`): what rows and catalogs
call it, how pip installs it (the distribution's extras and the packages they name), the module bench imports and the
top-level packages that are its code, how to tell that its calls cannot run here, how it is put on a stream, and how
its version is read. What else names libraries derives from these records: the catalogs (:mod:`bench.catalogs`), the
``library`` experiment and its view, the attribution of a wait to a library (:mod:`bench.usercode.stacks`), the
environment's and the rows' version columns (:mod:`bench.platform.env`, :mod:`bench.results.schema`); a test holds
``pyproject.toml``'s extras to them.

Imports nothing of bench but the distribution's name (and the cache, where versions are read), and no library: a
record reaches its library only when one of its functions runs, so that the analysis side reads the records without
CuPy, numba-cuda, PyTorch or JAX.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass

from bench.platform import lazy
from bench.platform.distribution import DISTRIBUTION


@dataclass(frozen=True)
class Streams:
    """How a library's calls are put on bench's streams."""

    stream: Callable[[object], object] | None = None  # bench's stream (a CuPy stream) -> the same CUDA stream as
    # this library names it, for calls that take one or make it current; None: its calls take no stream
    current: Callable[[object], AbstractContextManager] | None = None  # that stream -> a block in which it is the
    # library's current stream; None: the library has no current stream
    outlive: bool = False  # it may use a stream after its calls returned (PyTorch records an event on a tensor's
    # streams when the tensor is freed): the streams it was given must live until the process ends


@dataclass(frozen=True)
class Loading:
    """What loading a library and running its calls does in a process: what it reads as it loads, how it says it has
    no CUDA, the GPU it leaves current, and where what it compiles is kept."""

    settings: tuple[tuple[str, str], ...] = ()  # environment variables it reads as it loads: set (unless set) first
    cuda_missing: Callable[[object], str | None] | None = None  # the imported module -> why it has no CUDA, or None
    moves_device: bool = False  # it may leave another GPU current on the calling thread (XLA: starting its backend,
    # running work, allocating pinned staging memory with the first GPU's context)
    compiles_to_disk: bool = True  # what its first calls compile is kept on disk (CuPy's, numba-cuda's and Triton's
    # kernel caches; XLA's in the sweep's processes, see disk_cache), so a warm-up process's compiling serves the
    # sweep's; False: in memory only, so warming its calls in another process saves the sweep nothing
    disk_cache: tuple[tuple[str, str], ...] = ()  # environment variables that make it keep what it compiles on disk,
    # "{directory}" standing for the directory: the sweep's processes share one (bench.sweep.processes), and the
    # syncs, trace and probe commands keep the user's code's in bench's cache (bench.cli.usercode.keep_compiled)
    # unless the user chose a place; the Python API leaves the user's process as it is

    def disk_cache_settings(self, directory: str) -> dict[str, str]:
        """The environment variables that make it keep what it compiles in ``directory`` (none: it does anyway)."""
        return {key: value.format(directory=directory) for key, value in self.disk_cache}


@dataclass(frozen=True)
class Library:
    """One GPU library: its names, its installation, its code, its catalog and its version; how its calls are put on
    streams (:class:`Streams`) and what loading it does (:class:`Loading`)."""

    name: str  # as rows, catalogs and the library column name it: "numba-cuda"
    title: str  # as people write it: "PyTorch"
    module: str  # what bench imports to use it ("numba.cuda")
    extras: tuple[str, ...]  # the distribution's extras that install it: pip install "cuda-sync-bench[torch]"
    packages: tuple[str, ...]  # the pip packages those extras name for it (one of them installs it)
    versioned: tuple[str, ...]  # top-level modules whose installed distributions make its version; the first one
    # in sys.modules: the library is loaded (finding them imports nothing)
    prefixes: tuple[str, ...]  # top-level packages that are its code: a wait in their frames is a wait in it
    catalog: str = ""  # the module of its calls and the inputs they need (CALLS, Kit), whole; "" for none
    optional: bool = True  # measuring goes without it (its rows are skipped, saying why); False: the cu12/cu13 stack
    part_of: str = ""  # the library among whose calls its own are measured (Triton: PyTorch's); those rows record its
    # version too
    streams: Streams = Streams()
    loading: Loading = Loading()

    @property
    def version_column(self) -> str:
        """The column rows record its version in: 'numba_cuda_version'."""
        return f"{self.name.replace('-', '_')}_version"

    @property
    def version_doc(self) -> str:
        """What its version column holds, for an optional library's column."""
        calls = f"{BY_NAME[self.part_of].title}'s" if self.part_of else "its"
        return f"{self.title}'s version, on rows that measured {calls} calls or ran with it loaded (syncs, trace)"

    def version(self) -> str:
        """'cupy-cuda13x 14.2.0': which build is installed matters as much as its version ('not installed')."""
        return distribution_version(*self.versioned)

    def loaded(self) -> bool:
        return self.versioned[0] in sys.modules

    def load(self):
        """Its module, imported after its settings (ImportError where it is not installed); touches no GPU."""
        for key, value in self.loading.settings:
            os.environ.setdefault(key, value)
        return lazy.now(self.module)

    def missing(self) -> str | None:
        """Why its calls cannot run here (not installed, or installed without CUDA), or None; imports it."""
        try:
            module = self.load()
        except ImportError as error:
            how = f"pip install \"{DISTRIBUTION}[{self.extras[0]}]\"" if self.extras else \
                f"it comes with {BY_NAME[self.part_of].title}"
            return f"{self.title} is not installed ({how}): {error}"
        return self.loading.cuda_missing(module) if self.loading.cuda_missing else None


@functools.cache
def distributions() -> Mapping[str, list[str]]:
    """Top-level module -> the installed distributions providing it. Scanning every installed package takes most of
    a second where many are: done once per process, and kept (:mod:`bench.platform.cache`) under the import path's
    directories and the time each last changed (installing or removing a package changes its directory's)."""
    from bench.platform import cache

    places = []
    for entry in sys.path:
        try:
            places.append(f"{entry} {os.stat(entry or '.').st_mtime_ns}")
        except OSError:
            places.append(f"{entry} absent")
    return cache.kept_json(cache.key("distributions", places), importlib.metadata.packages_distributions)


def distribution_version(*modules: str) -> str:
    """'cupy-cuda13x 14.2.0' for module 'cupy'; the distributions of several modules, each once; 'not installed'."""
    names = dict.fromkeys(name for module in modules for name in sorted(set(distributions().get(module, []))))
    return ", ".join(f"{name} {importlib.metadata.version(name)}" for name in names) or "not installed"


# --- how each library is reached (run only when a library is measured) ----------------------------------------------

def _itself(stream):
    """A CuPy stream is CuPy's, and ``with stream:`` makes it CuPy's current stream."""
    return stream


def _numba_stream(stream):
    return lazy.now("numba.cuda").external_stream(stream.ptr)


def _torch_stream(stream):
    return lazy.now("torch").cuda.ExternalStream(stream.ptr)


def _torch_current(stream) -> AbstractContextManager:
    return lazy.now("torch").cuda.stream(stream)


def _torch_cuda(torch) -> str | None:
    return None if torch.cuda.is_available() else "PyTorch is installed without CUDA support"


def _jax_cuda(jax) -> str | None:
    """Starting JAX's backend can leave another GPU current: callers keep theirs (moves_device)."""
    gpus = any(device.platform == "gpu" for device in jax.devices())
    return None if gpus else "JAX is installed without CUDA support"


LIBRARIES = (
    Library("cupy", "CuPy", "cupy", ("cu12", "cu13"), ("cupy-cuda12x", "cupy-cuda13x"), ("cupy",),
            ("cupy", "cupyx", "cupy_backends"), catalog="bench.catalogs.cupy_calls", optional=False,
            streams=Streams(stream=_itself, current=_itself)),
    Library("numba-cuda", "numba-cuda", "numba.cuda", ("cu12", "cu13"), ("numba-cuda",), ("numba_cuda",),
            ("numba", "numba_cuda"), catalog="bench.catalogs.numba_calls", optional=False,
            streams=Streams(stream=_numba_stream)),
    Library("torch", "PyTorch", "torch", ("torch",), ("torch",), ("torch",), ("torch",),
            catalog="bench.catalogs.torch_calls",
            streams=Streams(stream=_torch_stream, current=_torch_current, outlive=True),
            loading=Loading(cuda_missing=_torch_cuda)),
    # JAX runs its work on streams of its own, and is told not to take most of the GPU's memory up front: it shares
    # the process with CuPy and PyTorch
    Library("jax", "JAX", "jax", ("jax",), ("jax",), ("jax", "jaxlib"), ("jax", "jaxlib", "flax", "optax"),
            catalog="bench.catalogs.jax_calls",
            loading=Loading(settings=(("XLA_PYTHON_CLIENT_PREALLOCATE", "false"),), cuda_missing=_jax_cuda,
                            moves_device=True,
                            # XLA's persistent compilation cache, every function kept: its 64 compiles took 5.2 s of
                            # the library experiment's process on an H100
                            disk_cache=(("JAX_COMPILATION_CACHE_DIR", "{directory}"),
                                        ("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0"),
                                        ("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "-1")))),
    # Triton launches on PyTorch's current stream; it comes with PyTorch's CUDA builds on Linux
    Library("triton", "Triton", "triton", (), (), ("triton",), ("triton",), part_of="torch"),
)
BY_NAME = {library.name: library for library in LIBRARIES}
CATALOGED = tuple(library for library in LIBRARIES if library.catalog)  # the library experiment's, in its order
REQUIRED = tuple(library for library in LIBRARIES if not library.optional)  # what measuring imports
BY_PREFIX = {prefix: library.name for library in LIBRARIES for prefix in library.prefixes}  # top-level package ->
# the library whose code it is


def measured_versions(name: str) -> dict[str, str]:
    """The version columns of a row that measured library ``name``'s calls: its own, and those of the libraries
    measured among its calls."""
    return {library.version_column: library.version() for library in LIBRARIES if name in (library.name,
                                                                                          library.part_of)}


def loaded_versions() -> dict[str, str]:
    """The version column of every library loaded in this process (a region ran with them)."""
    return {library.version_column: library.version() for library in LIBRARIES if library.loaded()}
