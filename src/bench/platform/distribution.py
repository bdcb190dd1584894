"""What pip installs bench as: the distribution's name and bench's version, for the modules that name them (the
environment rows record, the extras a message tells to install). Imports nothing."""

__version__ = "0.1.0"
DISTRIBUTION = "cuda-sync-bench"  # the name pip installs bench by (PyPI's "bench" is another project)
