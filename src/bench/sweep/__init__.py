"""The sweep: plan, check, run each experiment in its own process, save as it goes, resume, summarise.

- :mod:`~bench.sweep.plan`: what runs (:class:`Request` → :class:`Planned`: experiments × axes → configurations,
  stop rules), the time model, budgets and :class:`~bench.sweep.plan.Pace`. Pure Python.
- :mod:`~bench.sweep.preflight`: the checks before anything is written (GPUs, output path, memory):
  :class:`Checked`, and the :class:`Gpu` a sweep runs on.
- :mod:`~bench.sweep.resume`: what an interrupted sweep's file holds, and what it still lacks.
- :mod:`~bench.sweep.processes`: the fork server, an experiment's process and the messages it sends.
- :mod:`~bench.sweep.warmup`: compiling a fresh machine's kernel caches first.
- :mod:`~bench.sweep.loop`: :class:`Runner` (``plan() -> Planned``, ``check(planned) -> Checked``,
  ``run(checked) -> Outcome``) and the running sweep: rows kept, checked, saved, reported.
- :mod:`~bench.sweep.preload`: what the fork server imports once (CuPy, numba-cuda's target); only it imports a CUDA
  library.

What it may import: :mod:`bench.experiments`, :mod:`bench.timing`, :mod:`bench.results.store`, :mod:`bench.results.schema`,
:mod:`bench.platform.env`, :mod:`bench.platform.errors`, :mod:`bench.platform.units`; never :mod:`bench.cli`. Nothing CUDA except
:mod:`~bench.sweep.preload` (the experiments' processes measure). The names of ``_WHERE`` are served here, each
module imported when one of its names is first read (:mod:`bench.platform.lazy`), so ``bench.sweep.plan`` stays light.
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
