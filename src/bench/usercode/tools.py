"""The tools that look at the user's code, one record each (:class:`Tool`, in :data:`TOOLS`): its name (its command,
its report section), what it shows, its result type, and the parts that keep and show what it found: its results
table, that table's columns and writer, its report section (:class:`Section`) and its figure. The report loops over
the records for its sections, their figures and its contents, and ``bench report`` for the tables it reads and says it
reads; ``--save`` and ``--plot`` go through a tool's record. A new tool is its own files and one record here.

Imports no library and nothing of bench but :mod:`bench.platform.lazy`: a record names its parts (each a
:class:`~bench.platform.lazy.Name`, imported when it is used), so the command line starts without them and the
analysis side reads the records without measuring code. A tool's section and figure are the analysis side (never
CUDA: ``tests/test_layout.py`` checks); its result type and writer are not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from bench.platform.lazy import Name


@dataclass(frozen=True, eq=False)
class Figure:
    """One figure of a report section: what its tool's figure draws (``rows``, ``title``) and its caption; each
    figure is itself alone (hashed by identity: the report asks for each once)."""

    caption: str
    rows: object  # a pandas DataFrame
    title: str


@dataclass(frozen=True)
class GpuPart:
    """What a report section shows of one GPU: a sentence, a table (its rows, shown by the section's columns) and
    figures, each where there is one."""

    gpu: object  # bench.analysis.selection.Gpu
    sentence: str = ""
    rows: object = None  # a pandas DataFrame, or None
    figures: tuple[Figure, ...] = ()


@dataclass(frozen=True)
class Section:
    """What a tool's report section shows of its rows: a part per GPU, the table columns as its command prints them
    (column -> (header, format spec)) and a line under the GPUs' contents."""

    parts: tuple[GpuPart, ...]
    columns: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    note: str = ""


@dataclass(frozen=True)
class Tool:
    """One tool that looks at the user's code."""

    name: str  # its command (python -m bench <name>) and its report section's id
    title: str  # what it shows, as the report's heading and contents name it: "Where code waited"
    result: Name  # its result type: str() of a result is its text, to_json() its JSON (what its command prints)
    table: str = ""  # the results table its --save writes, under results/_<table>/ ("": it saves none)
    columns: Name | None = None  # () -> that table's typed columns
    save: Name | None = None  # ([(target, result)], environment, path) -> the new results file of those rows
    section: Name | None = None  # (rows of its table) -> Section: what the report shows of them
    figure: Name | None = None  # (rows of one target, title) -> a matplotlib figure (the report's and --plot's)


TOOLS = (
    Tool("probe", "Whether code blocked", Name("bench.usercode.probe", "ProbeResult")),
    Tool("syncs", "Where code waited", Name("bench.usercode.syncs.result", "SyncsResult"), table="syncs",
         columns=Name("bench.usercode.syncs.files", "columns"), save=Name("bench.usercode.syncs.files", "save"),
         section=Name("bench.usercode.syncs.section", "section")),
    Tool("trace", "How much code overlapped", Name("bench.usercode.trace.result", "TraceResult"), table="trace",
         columns=Name("bench.usercode.trace.files", "columns"), save=Name("bench.usercode.trace.files", "save"),
         section=Name("bench.usercode.trace.section", "section"),
         figure=Name("bench.usercode.trace.timeline", "timeline")),
)


def tool(name: str) -> Tool:
    """The tool of that name."""
    return next(found for found in TOOLS if found.name == name)


def saved() -> tuple[Tool, ...]:
    """The tools that save a results table (what ``bench report`` reads, each from ``_<table>/``), in their order."""
    return tuple(found for found in TOOLS if found.table)
