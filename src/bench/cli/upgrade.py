"""``python -m bench.cli.upgrade [DIRECTORY ...]``: older version 2 results files brought up to today's columns, on
disk (:mod:`bench.results.upgrade`), with the schema of the registry's experiments."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from bench.experiments import registry
from bench.platform.errors import UsageError
from bench.results import store, upgrade


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.cli.upgrade [DIRECTORY ...]`` (default: results): every main table of this schema version under
    each directory (:func:`~bench.results.upgrade.main_tables`) given today's columns
    (:func:`~bench.results.upgrade.to_suite_schema`)."""
    directories = [Path(name) for name in (sys.argv[1:] if argv is None else argv)] or [Path("results")]
    schema = store.suite_schema(registry())
    try:
        for directory in directories:
            if not directory.is_dir():
                raise UsageError(f"{directory} is not a directory (usage: python -m bench.cli.upgrade [DIRECTORY ...])")
            tables = upgrade.main_tables(directory)
            upgraded = [path for path in tables if upgrade.to_suite_schema(path, schema)]
            for path in upgraded:
                print(f"upgraded {path}")
            print(f"{directory}: {len(upgraded)} of {len(tables)} main tables upgraded; all have the suite's "
                  f"{len(schema)} columns")
    except UsageError as error:
        print(f"bench: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
