"""bench: CUDA host-blocking, serialization and copy/compute overlap, measured."""

__version__ = "0.1.0"
