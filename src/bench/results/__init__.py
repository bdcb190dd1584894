"""Results on disk: schema.py (each column's Arrow type and meaning), store.py (typed parquet, validation, a
directory read as one dataset), upgrade.py and version1.py (older files brought up to today's schema), writes.py
(atomic writes every writer uses), arrow_threads.py (pyarrow's thread pools let finish at exit).

May import :mod:`bench.platform` and each other, never CUDA; the experiments' descriptions are handed in (only
``python -m bench.cli.upgrade`` reads the registry).
"""
