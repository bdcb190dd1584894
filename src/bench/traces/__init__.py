"""The parts of :mod:`bench.trace`, one concern each: which kernels are communication (``collectives``), the overlap
arithmetic over one run's records, GPU by GPU and whole (``overlap``), the result and its numbers (``result``), its
text (``text``), the result assembled from the traced runs (``assemble``), results files of table ``trace``
(``files``), a trace read back from one (``load``), the ranks' traces merged into one (``merge``), the Perfetto
timeline (``perfetto``), and two traces compared (``compare``) and printed (``compare_text``).

May import: the records' types (:mod:`bench.usercode.activity`, :mod:`bench.usercode.stacks`), :mod:`bench.timing`'s
interval arithmetic, :mod:`bench.schema`, :mod:`bench.store`, :mod:`bench.units`, :mod:`bench.vocabulary`,
:mod:`bench.errors`; never CUDA and never the code that records (CUPTI runs only in :mod:`bench.trace`). ``compare``
and ``compare_text`` are the analysis side: they read results files with pandas (and :mod:`bench.store`,
:mod:`bench.analysis`, :mod:`bench.compare`'s environment columns) and import nothing that measures, not even the
records' types. ``collectives`` imports nothing, so the analysis side's timeline (:mod:`bench.plots`) uses its rule.
"""
