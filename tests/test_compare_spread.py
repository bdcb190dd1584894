"""compare against the machine-to-machine spread (issue 50): a change said to be beyond (or within) the spread is
stated in the spread's own terms, so that what the line says is true as written, in text, Markdown and JSON, on
synthetic rows and on the committed results."""

import json
import math
import re
from pathlib import Path

import pytest

import synthetic
from bench.analysis import compare, numbers
from test_compare import MIB, _machine

ROOT = Path(__file__).resolve().parents[1]
PAIRS = [("20261122T034221Z-NVIDIA-H200.parquet", "20261127T112130Z-481-NVIDIA-H200.parquet"),
         ("20261123T231801Z-2805-NVIDIA-H100-80GB-HBM3.parquet", "20261127T105602Z-482-NVIDIA-H100-80GB-HBM3.parquet")]
# a stated change, then how it stands against a spread: '(time -9.6%); beyond the ...', 'faster -9.6% (beyond the ...'
STATED = re.compile(r"([+-]\d+(?:\.\d+)?)%\)?;? \(?(beyond|within) the ([^()]+?) spread of \d+ machines")


def stands(line: str) -> list[tuple[float, str, float, float]]:
    """Each (change, 'beyond' or 'within', lowest, highest) a line states, in percent: a spread stated as one
    percent X stands for -X to +X, as a reader takes it."""
    found = []
    for change, word, spread in STATED.findall(re.sub(r"\\(.)", r"\1", line)):  # Markdown's escapes undone
        bounds = [float(value) for value in re.findall(r"[+-]?\d+(?:\.\d+)?(?=%)", spread)]
        low, high = (-bounds[0], bounds[0]) if len(bounds) == 1 else bounds
        found.append((float(change), word, low, high))
    return found


def true_as_written(found: list[tuple[float, str, float, float]]) -> list[tuple]:
    """The statements of ``found`` that are false as written: 'beyond' of a change within the bounds stated,
    'within' of one outside them."""
    return [(change, word, low, high) for change, word, low, high in found
            if (word == "beyond") == (low <= change <= high)]


def test_a_faster_change_beyond_the_spread_is_stated_beyond_it(tmp_path, run, monkeypatch):
    """Machine b against machine a, where the machines on record (a, c) lie 8.5% apart: 1 MiB is 8.0% faster on b,
    16 MiB 8.7% slower, 256 MiB 7.0% faster. Both 1/0.92 and 1.087 exceed 1.085, the spread's own ratio, so the
    first two are beyond it; stated as a change of the old median, as the changes are, the spread runs from -7.8%
    to +8.5%. Before, the first read 'faster -8.0% (beyond the 8.5% spread ...)'."""
    monkeypatch.setenv("COLUMNS", "300")  # one line a configuration
    factors = {MIB: 0.92, 16 * MIB: 1.087, 256 * MIB: 0.93}
    synthetic.write(tmp_path / "old.parquet", _machine("a", {}))
    synthetic.write(tmp_path / "new.parquet", _machine("b", factors))
    synthetic.write(tmp_path / "results" / "c.parquet", _machine("c", dict.fromkeys(factors, 1.085)))
    document = json.loads(run("compare", "old.parquet", "new.parquet", "--format", "json", cwd=tmp_path).stdout)
    lines = document["configurations"]
    assert [(line["verdict"], line["beyond_machine_spread"]) for line in lines] == [
        ("faster", True), ("slower", True), ("faster", False)]
    assert [line["note"] for line in lines] == [f"{word} the -7.8% to +8.5% spread of 2 machines"
                                                for word in ("beyond", "beyond", "within")]
    assert [line["change"].split("(")[1] for line in lines] == ["time -8.0%)", "time +8.7%)", "time -7.0%)"]
    for line in lines:  # the JSON's numbers say what its words say
        assert line["machine_spread"] == pytest.approx(0.085)
        assert line["machine_spread_low"] == pytest.approx(1 / 1.085 - 1)
        assert line["machine_spread_high"] == line["machine_spread"]
        inside = line["machine_spread_low"] <= line["ratio"] - 1 <= line["machine_spread_high"]
        assert line["beyond_machine_spread"] is not inside
    text = run("compare", "old.parquet", "new.parquet", cwd=tmp_path).stdout
    assert "faster -8.0% (beyond the -7.8% to +8.5% spread of 2 machines)" in text
    markdown = run("compare", "old.parquet", "new.parquet", "--format", "markdown", cwd=tmp_path).stdout
    assert "| faster -8.0% (beyond the -7.8% to +8.5% spread of 2 machines\\) |" in markdown
    for output, count in ((text, 6), (markdown, 6), ("\n".join(document["headlines"]), 3)):  # headlines, listing
        found = [stand for line in output.splitlines() for stand in stands(line)]
        assert len(found) == count and not true_as_written(found), output


def test_a_change_and_the_bounds_it_is_beyond_read_apart():
    """The spread's bounds are changes of the old median; a change that rounds to a bound gets the decimals that
    tell them apart (a committed line: 'time -3.17%; beyond the -3.16% to +3.26% spread')."""
    assert compare.spread_bounds(0.25) == pytest.approx((-0.2, 0.25))
    assert numbers.decimals(-0.0317, (-0.0316, 0.0326)) == 2 and numbers.decimals(-0.2, (-0.2, 0.25)) == 1
    line = {"ratio": 1 - 0.0317, "machine_spread_low": -0.0316, "machine_spread_high": 0.0326}
    assert numbers.change_percent(line) == "-3.17%"
    assert numbers.change_percent({**line, "machine_spread_low": math.nan, "machine_spread_high": math.nan}) == "-3.2%"
    assert numbers.change_percent({"ratio": math.nan}) == ""


@pytest.mark.parametrize("old, new", PAIRS)
def test_every_line_of_committed_machines_states_its_spread_truly(old, new, run, monkeypatch):
    """Two committed runs of one kind on different machines, against the committed results' spread: every line
    that says a change is beyond (or within) the spread states a change outside (or inside) the bounds it states,
    in text, Markdown and JSON; among them, changes the old wording contradicted (a faster change, its size less
    than the spread's largest over smallest, beyond it)."""
    monkeypatch.setenv("COLUMNS", "400")
    paths = [str(ROOT / "results" / name) for name in (old, new)]
    outputs = {form: run("compare", *paths, "--all", "--format", form, cwd=ROOT) for form in ("text", "markdown",
                                                                                               "json")}
    assert all(printed.returncode == 0 for printed in outputs.values())
    document = json.loads(outputs["json"].stdout)
    lines = [line for line in document["configurations"] if line["beyond_machine_spread"] is not None]
    assert any(line["beyond_machine_spread"] and abs(line["ratio"] - 1) <= line["machine_spread"] for line in lines)
    for line in lines:
        inside = line["machine_spread_low"] <= line["ratio"] - 1 <= line["machine_spread_high"]
        assert line["beyond_machine_spread"] is not inside, line
    stated = [f"{line['change']}; {line['note']}" for line in lines] + document["headlines"]
    for form in ("text", "markdown"):
        stated += outputs[form].stdout.splitlines()
    found = [stand for line in stated for stand in stands(line)]
    assert len(found) >= 3 * len(lines) and not true_as_written(found)
