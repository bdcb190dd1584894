"""The analysis side: results.py (one object a report, compare and claims ask a method per question), numbers.py
(every output's numbers), selection.py (which rows to analyse), noise.py (how far results move by themselves),
compare.py (what changed between two results), claims.py (CUDA folklore against measurement), documents.py (what
claims and compare print), plots.py (figures per GPU), escape.py (text escaped for a terminal and for Markdown).

pandas and matplotlib only, never CUDA: may import :mod:`bench.results`, :mod:`bench.platform` (its records and
words), the statistics of :mod:`bench.timing`, the catalogs' documentation pages (claims) and each other;
the views are handed in.
"""
