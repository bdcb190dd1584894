"""The trace tool (``bench trace``, :func:`bench.trace`, :func:`bench.tracing`, the pytest plugin's ``assert_overlap``),
one concern a module: recording a region under CUPTI (``run``), the overlap arithmetic, the result, its text, files,
merge and Perfetto timeline, the gate against a baseline; and the analysis side: its report section, its figure, two
traces compared and what got worse.

May import the records' types, :mod:`bench.timing`'s interval arithmetic, :mod:`bench.results` and
:mod:`bench.platform`'s units, vocabulary and errors; never CUDA but in ``run`` (CUDA and CUPTI on first use). The
analysis side reads results files with pandas and imports nothing that measures. Module by module:
docs/reference/packages.md.
"""
