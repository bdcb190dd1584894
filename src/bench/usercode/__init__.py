"""The tools that look at the user's code, and the instruments they share. Each tool is declared by one record in
:mod:`~bench.usercode.tools` (its result type, its table and columns, its writer, its report section and figure),
which the report and the command line loop over (with the tools' defaults, :mod:`~bench.usercode.defaults`); its
code is its own module or package:

- :mod:`~bench.usercode.probe`: does my code block? (``bench probe``, :func:`bench.probe`);
- :mod:`~bench.usercode.syncs`: where does my code wait? (``bench syncs``, :func:`bench.syncs`);
- :mod:`~bench.usercode.trace`: how much does my code overlap? (``bench trace``, :func:`bench.trace`,
  :func:`bench.tracing`);
- :mod:`~bench.usercode.pytest_plugin`: the ``assert_async`` and ``assert_overlap`` fixtures, syncs' and trace's
  ``with`` forms in a test.

The instruments:

- :mod:`~bench.usercode.hold`: the device-wide hold, on one GPU or on every GPU a region uses (the ``library``
  experiment holds with it too);
- :mod:`~bench.usercode.watcher`: the watcher of every thread under the hold, and the gate at a driver call's return;
  :mod:`~bench.usercode.waits`: its records, a wait under the hold and the dwell without one;
- :mod:`~bench.usercode.stacks`: stack attribution, a stack's frames named by library and the user's line in it;
- :mod:`~bench.usercode.driver_callbacks`, :mod:`~bench.usercode.cuda_calls`: CUPTI's driver callbacks, what call a
  thread is in;
- :mod:`~bench.usercode.activity`: CUPTI's records of what ran, each with its GPU, read from the buffers of
  :mod:`~bench.usercode.activity_buffers`; :mod:`~bench.usercode.pinned`: the pinned copies a trace compares with.

May import the measuring tools (:mod:`bench.measure`, :mod:`bench.timing`), :mod:`bench.platform.cuda`, CUPTI (each on first
use), :mod:`bench.platform.libraries`, :mod:`bench.results.schema`, :mod:`bench.results.store` and the bottom floor; never an experiment, the
sweep or the catalogs. The public names users import are the faces :mod:`bench.probe`, :mod:`bench.syncs`,
:mod:`bench.trace` and :mod:`bench.pytest_plugin`. A tool's report section and figure are the analysis side: they
import no measuring code (``tests/test_layout.py`` checks).
"""
