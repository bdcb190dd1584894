"""A fourth tool that looks at user code, for tests: its own module and one record (:data:`TOOL`), which a test
registers by adding it to :data:`bench.usercode.tools.TOOLS`. Module-level throughout: the report's figure workers
import this module to draw its figure (tests/ is on their path)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import pandas as pd

from bench.analysis import selection, plots
from bench.results import store
from bench.results.schema import INT, TEXT, column, environment_columns, schema_of
from bench.platform.lazy import Name
from bench.usercode.tools import Figure, GpuPart, Section, Tool

TOOL = Tool("fake", "What the fake tool saw", Name(__name__, "Found"), table="fake", columns=Name(__name__, "columns"),
            save=Name(__name__, "save"), section=Name(__name__, "section"), figure=Name(__name__, "figure"))


@dataclass(frozen=True)
class Found:
    seen: int

    def __str__(self) -> str:
        return f"saw {self.seen}"

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def columns() -> tuple:
    return (column("target", TEXT, "what ran"), column("seen", INT, "how many it saw"), *environment_columns())


def save(found: Sequence[tuple[str, Found]], environment, path):
    rows = [{"target": target, "seen": result.seen, **environment.as_dict()} for target, result in found]
    return store.write(path, rows, schema_of(columns()), {"table": TOOL.table}, new=True)


def section(rows: pd.DataFrame) -> Section:
    parts = tuple(GpuPart(gpu, f"{int(mine['seen'].sum())} seen.", mine, (Figure(f"fake {gpu.name}", mine, "fake"),))
                  for gpu, mine in selection.by_gpu(rows))
    return Section(parts, {"target": ("what ran", ""), "seen": ("seen", "")}, "The fake tool's note.")


def figure(rows: pd.DataFrame, title: str):
    figure, ax = plots.pyplot().subplots(figsize=(2, 1))
    ax.bar(range(len(rows)), rows["seen"])
    ax.set_title(title)
    return figure
