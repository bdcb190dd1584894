"""The tools that look at the user's code (probe, syncs, trace, the pytest fixtures, the notebook's magics), each
declared by one record in :mod:`~bench.usercode.tools`, and the instruments they share: the device-wide hold, the
watcher, stack attribution, CUPTI's driver callbacks and activity records.

May import the measuring tools (:mod:`bench.measure`, :mod:`bench.timing`), :mod:`bench.platform.cuda`, CUPTI (each
on first use), :mod:`bench.platform.libraries`, :mod:`bench.results.schema`, :mod:`bench.results.store` and the bottom
floor; never an experiment, the sweep or the catalogs. Users import the faces :mod:`bench.probe`, :mod:`bench.syncs`,
:mod:`bench.trace` and :mod:`bench.pytest_plugin`. A tool's report section and figure import no measuring code
(``tests/test_layout.py``). Module by module: docs/reference/packages.md.
"""
