"""The platform bench stands on: lazy.py (the one way to import on first use), cuda.py (CuPy and numba-cuda on first
use), driver.py (driver calls CuPy does not wrap), environment.py (the record of the environment every row records)
and env.py (which reads it), libraries.py (one record per GPU library), cache.py (what bench keeps between
commands), distribution.py (bench's name and version), errors.py (the one-line errors), vocabulary.py (the closed
sets of words and numbers both sides name), units.py (byte sizes as people write them), arguments.py (what the
command line declares once).

May import the standard library, the GPU libraries (each on first use) and each other; nothing else of bench.
"""
