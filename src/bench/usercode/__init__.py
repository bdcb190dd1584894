"""The tools that look at the user's code, and the instruments they share.

May import the measuring tools (:mod:`bench.measure`), :mod:`bench.timing`, :mod:`bench.cuda` (on first use) and the
bottom floor; never an experiment or the sweep.
"""
