"""bench: CUDA host-blocking, serialization and copy/compute overlap, measured.

The public API (does my code block? where does it wait? how much does it overlap?) is imported on first use, so that
``import bench``, and with it every command line start and every pytest run that loads the plugin, pays only for
what it uses. ``bench.probe``, ``bench.syncs`` and ``bench.trace`` are the functions, also after their modules (the
faces :mod:`bench.probe`, :mod:`bench.syncs`, :mod:`bench.trace`) are imported.
"""

import importlib
import sys
import types
from typing import TYPE_CHECKING

from bench.platform.distribution import DISTRIBUTION, __version__  # noqa: F401  (bench.__version__, bench.DISTRIBUTION)

_FACES = {"probe": ("ProbeResult", "probe"),  # does my code block?
          "syncs": ("SyncsResult", "syncs", "allow_waits"),  # and where does it wait (and where may it)?
          "trace": ("TraceResult", "trace", "tracing")}  # and how much does it overlap?
_FACE_OF = {name: face for face, names in _FACES.items() for name in names}

__all__ = ["ProbeResult", "SyncsResult", "TraceResult", "allow_waits", "probe", "syncs", "trace", "tracing",
           "__version__"]

if TYPE_CHECKING:
    from bench.probe import ProbeResult, probe
    from bench.syncs import SyncsResult, allow_waits, syncs
    from bench.trace import TraceResult, trace, tracing


def _bind(face: str, module: types.ModuleType) -> None:
    """The public names of ``face`` (its module loaded) bound here, over the module's own name."""
    for public in _FACES[face]:
        globals()[public] = getattr(module, public)


class _Package(types.ModuleType):
    """bench itself: importing a face binds its public names here, where the import system would bind the module
    (``import bench.trace`` leaves ``bench.trace`` the function)."""

    def __setattr__(self, name: str, value: object) -> None:
        super().__setattr__(name, value)
        if name in _FACES and isinstance(value, types.ModuleType):
            _bind(name, value)


def __getattr__(name: str) -> object:
    """A public name, its face imported on first use; all of that face's names are bound."""
    if name not in _FACE_OF:
        raise AttributeError(f"module 'bench' has no attribute {name!r}")
    face = _FACE_OF[name]
    _bind(face, importlib.import_module(f"bench.{face}"))  # here too: the import system binds no face already loaded
    return globals()[name]


def load_ipython_extension(ipython) -> None:
    """``%load_ext bench``: the magics %syncs, %probe, %%syncs and %%trace (:mod:`bench.usercode.notebook`)."""
    from bench.usercode.notebook import load

    load(ipython)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


sys.modules[__name__].__class__ = _Package
