"""The platform bench stands on: cuda.py (CuPy and numba-cuda on first use), driver.py (driver calls CuPy does not
wrap), env.py (the environment every row records), libraries.py (one record per GPU library), cache.py (what bench
keeps between commands), distribution.py (bench's name and version), errors.py (the one-line errors),
vocabulary.py (the closed sets of words and numbers both sides name), arguments.py (what the command line declares
once).

May import the standard library, the GPU libraries (each on first use) and each other; nothing else of bench.
"""
