"""The PYTHONPATH a test's child process gets: the test's own entries first, then the parent's (a machine whose
packages come from PYTHONPATH, such as a GPU machine's carried wheels, gives its children the same packages)."""

import os


def with_path(first: str) -> str:
    return os.pathsep.join(filter(None, [first, os.environ.get("PYTHONPATH")]))
