"""A findings page's measured part, as Markdown: the run's environment, then each experiment's headline table, from
one results file (every number comes from the file through the experiments' own headline functions, in their views).

    python scripts/findings_tables.py results/<run>.parquet >> docs/findings/<date>-<gpu>.md
"""

from __future__ import annotations

import sys

import pandas as pd

from bench.results import store
from bench.experiments import registry
from bench.platform.libraries import LIBRARIES
from bench.views import views

ENVIRONMENT = ("gpu_name", "gpu_uuid", "driver_version", "cuda_runtime",
               *(library.version_column for library in LIBRARIES),  # an optional library's: on its rows only
               "pcie_gen", "pcie_width", "git_commit", "run_id", "hostname")


def _cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown(table: pd.DataFrame) -> str:
    """A DataFrame as a GitHub Markdown table."""
    lines = ["| " + " | ".join(map(_cell, table.columns)) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(map(_cell, values)) + " |" for values in table.itertuples(index=False)]
    return "\n".join(lines)


def page(path: str) -> str:
    rows = store.read(path, store.suite_schema(registry()))
    known = [name for name in ENVIRONMENT if name in rows and rows[name].notna().any()]
    parts = [f"Results file: `{path}` ({len(rows)} configurations, "
             f"{int((rows['status'] == 'ok').sum())} ok).", "",
             markdown(pd.DataFrame({"": known, "value": [rows[name].dropna().iloc[0] for name in known]}))]
    for name, experiment in registry().items():
        mine = rows[rows["experiment"] == name]
        if len(mine):
            parts += ["", f"### {name}", "", experiment.description, "", markdown(views()[name].headline(mine))]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/findings_tables.py RESULTS.parquet")
    sys.stdout.write(page(sys.argv[1]))
