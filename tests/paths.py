"""The PYTHONPATH a test's child process gets: the test's own entries first, then the parent's (a machine whose
packages come from PYTHONPATH, such as a GPU machine's carried wheels, gives its children the same packages); and
the scripts of scripts/ imported as modules."""

import importlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Put first, a child's interpreters (and theirs) load its sitecustomize: the CUDA libraries hidden, every look for one
# logged to $BENCH_TEST_LOOKUPS, figures painted blank.
WITHOUT_CUDA = Path(__file__).resolve().parent / "clone_site"


def with_path(first: str) -> str:
    return os.pathsep.join(filter(None, [first, os.environ.get("PYTHONPATH")]))


SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


@contextmanager
def script_module(name: str) -> Iterator[object]:
    """The script ``scripts/<name>.py`` imported as a module, with scripts/ on ``sys.path`` meanwhile."""
    sys.path.insert(0, str(SCRIPTS))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(SCRIPTS))
