"""bench: CUDA host-blocking, serialization and copy/compute overlap, measured."""

__version__ = "0.1.0"
DISTRIBUTION = "cuda-sync-bench"  # the name pip installs bench by (PyPI's "bench" is another project)

from bench.probe import ProbeResult, probe  # noqa: E402  (the public API: does my code block?)
from bench.syncs import SyncsResult, syncs  # noqa: E402  (and where does it wait?)
from bench.trace import TraceResult, trace, tracing  # noqa: E402  (and how much does it overlap?)

__all__ = ["ProbeResult", "SyncsResult", "TraceResult", "probe", "syncs", "trace", "tracing", "__version__"]
