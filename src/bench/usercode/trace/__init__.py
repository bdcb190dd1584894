"""The trace tool (``bench trace``, :func:`bench.trace`, :func:`bench.tracing`, the pytest plugin's
``assert_overlap``), one concern a module: running a region under CUPTI (``run``), which kernels are communication
(``collectives``), the overlap arithmetic over one run's records, GPU by GPU and whole (``overlap``), the result and
its numbers (``result``), its text (``text``), the result assembled from the traced runs (``assemble``), results
files of table ``trace`` (``files``), a trace read back from one (``load``), the ranks' traces merged into one
(``merge``), the Perfetto timeline (``perfetto``), a trace gated against its baseline and printed (``gate``); and
the analysis side: its report section (``section``), its figure (``timeline``), two traces compared (``compare``),
what got worse by line and stream (``regressions``), and printed (``compare_text``).

May import: the records' types (:mod:`bench.usercode.activity`, :mod:`bench.usercode.stacks`), :mod:`bench.timing`'s
interval arithmetic, :mod:`bench.results.schema`, :mod:`bench.results.store`, :mod:`bench.platform.units`, :mod:`bench.platform.vocabulary`,
:mod:`bench.platform.errors`; never CUDA but in ``run``, the one that records (CUDA and CUPTI on first use). The analysis side
reads results files with pandas (and :mod:`bench.results.store`, :mod:`bench.analysis.selection`, :mod:`bench.analysis.plots`,
:mod:`bench.analysis.compare`'s environment columns) and imports nothing that measures, not even the records' types;
``collectives`` imports nothing, so the timeline uses its rule.
"""
