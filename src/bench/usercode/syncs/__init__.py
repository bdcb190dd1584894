"""The syncs tool (``bench syncs``, :func:`bench.syncs`, the pytest plugin's ``assert_async``): where a region of the
user's code waited for the GPU, one concern a module: running the region held and watched (``run``), what it found,
its text and JSON (``result``), its results files (``files``) and its report section (``section``).

May import the instruments of :mod:`bench.usercode` (the hold, the watcher, CUPTI's driver callbacks: ``run`` only,
each when used), :mod:`bench.results.schema`, :mod:`bench.results.store` and :mod:`bench.platform.libraries`. ``result``
and ``files`` import nothing that measures; ``section`` is the analysis side (pandas, :mod:`bench.analysis.selection`).
"""
