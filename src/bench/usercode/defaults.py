"""The user-code tools' defaults, shared by their functions and their commands: the command line reads them here,
without importing the tools' code. Imports nothing."""

DEFAULT_SPIN_MS = 20.0  # probe: how long the hold (a spin) runs while the call is timed
DEFAULT_SETTLE_MS = 100.0  # syncs: how long a thread stands still under the hold before it counts as waiting
DEFAULT_RUNS = 5  # trace: traced runs (and as many untraced, for the overhead); the median one is shown
