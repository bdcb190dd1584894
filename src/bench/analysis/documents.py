"""What ``bench claims`` and ``bench compare`` of results files print, in each ``--format``: text for a terminal,
JSON for CI, Markdown for a pull request (two traces compared: :mod:`bench.usercode.trace.compare_text`). Results files
are untrusted: their text is escaped for where it lands (:mod:`bench.analysis.escape`; rich markup). The analysis
side."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from rich import box
from rich.console import Console
from rich.markup import escape as rich_escape
from rich.table import Table
from rich.text import Text

from bench.analysis.claims import LABELS
from bench.analysis.compare import Comparison
from bench.analysis.numbers import change_percent, number
from bench.analysis.escape import json_text, markdown, terminal


@dataclass(frozen=True)
class Asked:
    """What a comparison's document was asked for: the two sides, whether every configuration is listed, the
    failing threshold (percent slower; None: none) and how many configurations exceed it."""

    old: Path
    new: Path
    listed_all: bool
    fail_above: float | None
    failing: int


def _claims_heading(gpu: str | None) -> str:
    return f"CUDA claims against measurement on {gpu}" if gpu else "CUDA claims (nothing in the results judges them)"


def _claims_text(groups: list, missing: list[str], console: Console) -> None:
    for gpu, judged in groups:
        console.print(Text(terminal(_claims_heading(gpu)), style="bold"))
        for _, line in judged.iterrows():  # one block per claim: readable at any terminal width
            console.print(f"\n[bold]{rich_escape(line['claim'])}[/bold]: {LABELS[line['verdict']].upper()}",
                          highlight=False)
            console.print(f"  docs say: {line['docs say']} ({line['source']})", highlight=False, soft_wrap=True,
                          markup=False)
            console.print(f"  measured: {terminal(line['measured'])}", highlight=False, soft_wrap=True, markup=False)
        console.print()


def _claims_json(groups: list, missing: list[str], console: Console) -> None:
    document = {"gpus": [{"gpu": gpu, "claims": [
        {"claim": line["claim"], "verdict": LABELS[line["verdict"]], "docs": line["docs say"], "source": line["source"],
         "measured": None if line["verdict"] == "not measured" else line["measured"]}
        for _, line in judged.iterrows()]} for gpu, judged in groups], "not_measured": missing}
    print(json_text(document, indent=2))


def _claims_markdown(groups: list, missing: list[str], console: Console) -> None:
    for gpu, judged in groups:
        rows = [[markdown(line["claim"]), f"**{markdown(LABELS[line['verdict']])}**",
                 f"{markdown(line['docs say'])} ([docs]({line['source']}))", markdown(line["measured"])]
                for _, line in judged.iterrows()]  # the source: bench's own catalog's link
        print(f"## {markdown(_claims_heading(gpu))}\n")
        print(_markdown_table(["claim", "verdict", "the documentation", "measured"], rows) + "\n")


def _compare_text(result: Comparison, shown: pd.DataFrame, asked: Asked, console: Console) -> None:
    console.print(Text("What changed", style="bold"))
    headlines = Table.grid(padding=(0, 1, 0, 0))  # a bullet column: wrapped lines keep their indent
    for line in result.headlines:
        headlines.add_row("  -", Text(terminal(line)))
    console.print(headlines if result.headlines else "  nothing beyond noise")
    for name, group in shown.groupby("experiment", sort=False):
        unit = _one_unit(group)
        title = Text(terminal(_listing_title(result, name, group)), style="table.title")  # as a str title is
        listing = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, highlight=False)
        for column in _listing_head(result, unit):
            listing.add_column(Text(terminal(column)), justify="right" if column.startswith(("old", "new")) else "left",
                               ratio=1 if column == "configuration" else None)
        for _, line in group.iterrows():
            listing.add_row(*(Text(terminal(cell)) for cell in _listing_row(result, line, unit)))
        console.print(listing)
    console.print(_counts_line(result, asked.listed_all), highlight=False)
    if asked.failing:
        console.print(f"{asked.failing} configurations slower by more than {asked.fail_above:g}%: failing",
                      highlight=False)


def _compare_markdown(result: Comparison, shown: pd.DataFrame, asked: Asked, console: Console) -> None:
    print("## What changed\n")
    print("\n".join(f"- {markdown(line)}" for line in result.headlines) or "nothing beyond noise")
    for name, group in shown.groupby("experiment", sort=False):
        unit = _one_unit(group)
        print(f"\n### {markdown(_listing_title(result, name, group))}\n")
        print(_markdown_table([markdown(column) for column in _listing_head(result, unit)],
                              [[markdown(cell) for cell in _listing_row(result, line, unit)]
                               for _, line in group.iterrows()]))
    print(f"\n{_counts_line(result, asked.listed_all)}")
    if asked.failing:
        print(f"\n**{asked.failing} configurations slower by more than {asked.fail_above:g}%: failing**")


def _compare_json(result: Comparison, shown: pd.DataFrame, asked: Asked, console: Console) -> None:
    document = {"old": str(asked.old), "new": str(asked.new), "warnings": result.warnings,
                "headlines": result.headlines, "counts": result.counts(),
                "configurations": [{key: _json_value(value) for key, value in line.items()}
                                   for line in shown.to_dict("records")]}
    if asked.fail_above is not None:
        document["fail_above"] = {"percent": asked.fail_above, "failing": asked.failing}
    print(json_text(document, indent=2, allow_nan=False))


def _one_unit(group) -> str:
    """The unit of every configuration of ``group``, or "" when they differ (each value then carries its own)."""
    units = set(group["unit"])
    return units.pop() if len(units) == 1 else ""


def _listing_title(result, name: str, group) -> str:
    return f"{name}: {len(group)} of {(result.table['experiment'] == name).sum()} configurations"


def _listing_head(result, unit: str) -> list[str]:
    suffix = f" {unit}" if unit else ""
    return [*(["GPU"] if result.several_gpus else []), "configuration", f"old{suffix}", f"new{suffix}", "verdict"]


def _listing_row(result, line, unit: str) -> list[str]:
    """One configuration's cells: GPU (several GPUs), configuration, old, new (with their unit where the column has
    none), and the verdict with the change and its note (why it is unclear; how it stands against the
    machine-to-machine spread)."""
    if line["verdict"] == "changed":
        judged = line["change"]
    elif line["verdict"] == "same" or not math.isfinite(line["ratio"]):
        judged = line["verdict"]
    else:
        judged = f"{line['verdict']} {change_percent(line)}"  # as the note's spread reads it
    if line["note"]:
        judged += f" ({line['note']})"
    values = [number(line["old"]), number(line["new"])]
    if not unit:
        values = [f"{value} {line['unit']}" if value else "" for value in values]
    return [*([line["gpu"]] if result.several_gpus else []), line["configuration"], *values, judged]


def _counts_line(result, listed_all: bool) -> str:
    counts = result.counts()
    same = counts.pop("same", 0)
    listed = "" if listed_all else " (not listed; --all lists every configuration)"
    return ", ".join([*(f"{count} {verdict}" for verdict, count in counts.items()), f"{same} same{listed}"])


def _json_value(value):
    """A table cell as JSON has it: numbers and text as they are, null for every kind of missing."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or value is pd.NA or (isinstance(value, float) and not math.isfinite(value)):
        return None
    return value


def _markdown_table(head: list[str], rows: list[list[str]]) -> str:
    """A GitHub Markdown table of cells already Markdown; the old and new columns align right."""
    align = ["---:" if column.startswith(("old", "new")) else "---" for column in head]
    return "\n".join("| " + " | ".join(line) + " |" for line in [head, align, *rows])


CLAIMS = {"text": _claims_text, "json": _claims_json, "markdown": _claims_markdown}  # by --format
COMPARISONS = {"text": _compare_text, "json": _compare_json, "markdown": _compare_markdown}
