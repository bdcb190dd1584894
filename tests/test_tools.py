"""The tools that look at user code are declared by their records (:mod:`bench.usercode.tools`): every part a record
names is there and has the tools' shape, and what loops over the records (the report's sections, their figures and
contents; ``bench report``'s reading of the tools' tables and its help) picks up a fourth tool from its record
alone."""

from __future__ import annotations

import importlib

import pytest

import fake_tool
import synthetic
from bench import cli
from bench.cli.parser import parser
from bench.platform import lazy
from bench.usercode import tools


def parts(tool: tools.Tool) -> dict[str, lazy.Name]:
    return {name: part for name in ("result", "columns", "save", "section", "figure")
            if (part := getattr(tool, name)) is not None}


@pytest.mark.parametrize("tool", tools.TOOLS, ids=lambda tool: tool.name)
def test_every_part_a_record_names_is_there_and_results_have_text_and_json(tool):
    loaded = {name: part.load() for name, part in parts(tool).items()}
    assert loaded["result"].__str__ is not object.__str__, f"{tool.name}: its result type has no text"
    if tool.table:
        assert hasattr(loaded["result"], "to_json"), f"{tool.name}: its result type has no JSON"
        assert importlib.import_module(tool.save.module).TABLE == tool.table
        assert {"target", "gpu_uuid", "hostname"} <= {column.name for column in tool.columns()}
    assert tool.section is None or tool.table, f"{tool.name}: a report section of no table"


def test_the_registry_finds_the_tools_by_name_and_those_that_save():
    assert [tool.name for tool in tools.TOOLS] == ["probe", "syncs", "trace"]
    assert tools.tool("trace").figure is not None and [tool.name for tool in tools.saved()] == ["syncs", "trace"]


def results_with_fake_rows(directory):
    """Truth-table rows (no figures to draw) and the fake tool's saved rows under ``directory``."""
    blocking = [row for row in synthetic.blocking_records() if row["experiment"] == "blocking"]
    synthetic.write(directory / f"{synthetic.RUN_ID}.parquet", blocking)
    fake_tool.save([("mod:step", fake_tool.Found(3)), ("mod:other", fake_tool.Found(4))], synthetic.environment(),
                   directory / "_fake" / "a.parquet")


def test_a_fourth_tool_is_read_shown_and_drawn_through_its_record_alone(tmp_path, monkeypatch):
    results_with_fake_rows(tmp_path / "results")
    before, after = tmp_path / "before.html", tmp_path / "after.html"
    assert cli.main(["report", str(tmp_path / "results"), "--out", str(before)]) == 0
    assert "fake" not in before.read_text()  # unregistered: its table is not read
    monkeypatch.setattr(tools, "TOOLS", (*tools.TOOLS, fake_tool.TOOL))
    assert cli.main(["report", str(tmp_path / "results"), "--out", str(after)]) == 0
    document = after.read_text()
    contents = document.split("<nav>Contents:", 1)[1].split("</nav>", 1)[0]
    assert "<a href='#fake'>What the fake tool saw</a>" in contents
    section = document.split("<h2 id='fake'>What the fake tool saw (bench fake)</h2>", 1)[1]
    assert "<p class='meta'>The fake tool's note.</p>" in section and "<p>7 seen.</p>" in section
    assert "<th>what ran</th><th>seen</th>" in section and "mod:other" in section
    assert section.count("data:image/png;base64,") == 1 and "<figcaption>fake Test GPU</figcaption>" in section


def test_report_says_it_reads_each_registered_tools_table(monkeypatch):
    monkeypatch.setattr(tools, "TOOLS", (*tools.TOOLS, fake_tool.TOOL))
    report_command = next(action for action in parser()._actions if action.dest == "command").choices["report"]
    said = " ".join(action.help or "" for action in report_command._actions)
    assert "syncs --save, trace --save and fake --save keep in _syncs/, _trace/ and _fake/" in " ".join(said.split())

