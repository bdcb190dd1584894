"""bench: CUDA host-blocking, serialization and copy/compute overlap, measured.

The public API (does my code block? where does it wait? how much does it overlap?) is imported on first use, so that
``import bench``, and with it every command line start and every pytest run that loads the plugin, pays only for
what it uses. ``bench.probe``, ``bench.syncs`` and ``bench.trace`` are the functions, also after their modules (the
faces :mod:`bench.probe`, :mod:`bench.syncs`, :mod:`bench.trace`) are imported.
"""

import sys
import types
from typing import TYPE_CHECKING

from bench.platform import lazy
from bench.platform.distribution import DISTRIBUTION, __version__  # noqa: F401  (bench.__version__, bench.DISTRIBUTION)

FACES = {"bench.probe": ("ProbeResult", "probe"),  # does my code block?
         "bench.syncs": ("SyncsResult", "syncs", "allow_waits"),  # and where does it wait (and where may it)?
         "bench.trace": ("TraceResult", "trace", "tracing")}  # and how much does it overlap?

__all__ = ["ProbeResult", "SyncsResult", "TraceResult", "allow_waits", "probe", "syncs", "trace", "tracing",
           "__version__"]

if TYPE_CHECKING:
    from bench.probe import ProbeResult, probe
    from bench.syncs import SyncsResult, allow_waits, syncs
    from bench.trace import TraceResult, trace, tracing

__getattr__, _dir = lazy.names(globals(), FACES)  # a public name, its face imported on first use


class _Package(types.ModuleType):
    """bench itself: importing a face binds its public names here, where the import system would bind the module
    (``import bench.trace`` leaves ``bench.trace`` the function)."""

    def __setattr__(self, name: str, value: object) -> None:
        super().__setattr__(name, value)
        if isinstance(value, types.ModuleType) and value.__name__ in FACES:
            lazy.bind(globals(), FACES, value)


def load_ipython_extension(ipython) -> None:
    """``%load_ext bench``: the magics %syncs, %probe, %%syncs and %%trace (:mod:`bench.usercode.notebook`)."""
    from bench.usercode.notebook import load

    load(ipython)


def __dir__() -> list[str]:
    return sorted({*_dir(), *__all__})


sys.modules[__name__].__class__ = _Package
