"""The sweep: plan, check, run each experiment in its own process, save as it goes, resume, summarise: plan.py (what
runs, the time model, budgets), preflight.py (the checks before anything is written), resume.py, processes.py (the
fork server and an experiment's process), warmup.py, loop.py (:class:`Runner`: plan -> check -> run -> Outcome),
output.py (the results file a running sweep saves), preload.py (what the fork server imports once; only it imports
a CUDA library).

May import :mod:`bench.experiments`, :mod:`bench.timing`, :mod:`bench.results`, :mod:`bench.platform`; never
:mod:`bench.cli`. The names of ``_WHERE`` are served here, each module imported when one of its names is first read
(:mod:`bench.platform.lazy`). More: docs/reference/packages.md.
"""

from __future__ import annotations

from bench.platform import lazy

_WHERE = {
    "bench.sweep.plan": ("Request", "Planned", "Plan"),
    "bench.sweep.preflight": ("Checked", "Gpu"),
    "bench.sweep.loop": ("Runner", "Outcome", "Reporter"),
}

__all__ = [name for names in _WHERE.values() for name in names]

__getattr__, __dir__ = lazy.names(globals(), _WHERE)
