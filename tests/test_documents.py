"""What claims and compare print (bench.analysis.documents) of results files that another program wrote: every text a file
carries lands as text, escaped for the terminal and for Markdown (bench.analysis.escape), and as it is in JSON."""

import html
import json
import re
from pathlib import Path

import pyarrow as pa
import pytest

import synthetic
from bench import cli
from bench.results import store
from bench.analysis.escape import markdown, terminal

EVIL = ("[bold red]RICH[/bold red][link=https://evil.example]L[/link]\x1b[31mANSI\x1b]8;;https://evil.example"
        "\x1b\\OSC<img src=x onerror=alert(1)>[md](https://evil.example)`code`|cell\nline")
HOSTILE = ("gpu_name", "call", "host_memory")  # a GPU's name, and texts that name a configuration


def test_terminal_text_moves_no_cursor_and_keeps_printable_words():
    assert terminal("a\x1b[31mb\x07\tc\nd\re") == "a\\x1b[31mb\\x07\\tc\\nd\\re"
    words = "cupy a[boolean mask] placement=other: 2.5 µs – “same” …"
    assert terminal(words) == words


MARKDOWN_CASES = ["https://evil.example/x", "www.evil.example", "a@b.example", "@user", "# h", "- x", "+ x", "1. x",
                  "1) x", "---", "    code", "$x^2$", "<img src=x onerror=alert(1)>", "[md](https://e.x)", "![i](e.png)",
                  "`c`", "*e* _e_ ~~s~~", "a|b", "&amp; &#60;", "x ##", "> quote", ":smile:", "[^1]", "a\\|b", "\\",
                  "6.14 → 5.833 ms (-5.0%)", "cupy a[boolean mask] placement=other", EVIL]


@pytest.mark.parametrize("where", ["- {}", "| a | b |\n| --- | --- |\n| {} | b |", "### {}"])
def test_markdown_text_renders_as_it_was_and_makes_no_markup(where):
    """Rendered by GitHub's Markdown (cmark-gfm): a list item, a table cell, a heading, holding only the text."""
    cmarkgfm = pytest.importorskip("cmarkgfm")  # the test extra installs it
    element = {"-": "li", "|": "td", "#": "h3"}[where[0]]
    for case in MARKDOWN_CASES:
        rendered = cmarkgfm.github_flavored_markdown_to_html(where.format(markdown(case)))
        inside = re.fullmatch(rf"(?:<ul>\n)?(?:<table>.*<tbody>\n<tr>\n)?<{element}>(.*?)</{element}>.*", rendered, re.S)
        assert inside and not re.search(r"<\w", inside[1]), (case, rendered)  # no element of its own
        text = html.unescape(inside[1]).replace("\u200b", "")
        assert text == terminal(" ".join(case.split())), (case, rendered)


def write_raw(path: Path, rows: list[dict], run_id: str) -> None:
    """Rows as another program could write them: no check of their values."""
    table = pa.Table.from_pylist([{**row, "run_id": run_id} for row in rows], schema=synthetic.suite())
    stamp = {"schema_version": 2, "run_id": run_id}
    store.write_table(path, table.replace_schema_metadata({store.METADATA_KEY: json.dumps(stamp)}))


@pytest.fixture
def hostile(tmp_path, monkeypatch):
    """Two runs of every experiment whose GPU name and configuration texts are EVIL, in the current directory."""
    monkeypatch.chdir(tmp_path)
    rows = [{**row, **{name: EVIL for name in HOSTILE if isinstance(row.get(name), str)}}
            for row in synthetic.all_records()]
    write_raw(tmp_path / "old.parquet", rows, synthetic.RUN_ID)
    write_raw(tmp_path / "new.parquet", rows, "20261122T000000Z")
    return tmp_path


def run(capsys, *arguments) -> tuple[str, str]:
    assert cli.main(list(arguments)) == 0
    out, err = capsys.readouterr()
    return out, err


@pytest.mark.parametrize("command", [("compare", "old.parquet", "new.parquet", "--all"), ("claims", "new.parquet")])
def test_a_results_files_text_reaches_the_terminal_as_text(hostile, capsys, monkeypatch, command):
    monkeypatch.setenv("COLUMNS", "1000")  # a cell on one line
    out, err = run(capsys, *command)
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert terminal(EVIL) in out  # whole, its markup as text: rich interpreted none of it


@pytest.mark.parametrize("command", [("compare", "old.parquet", "new.parquet", "--all"), ("claims", "new.parquet")])
def test_a_results_files_text_reaches_markdown_as_text(hostile, capsys, command):
    out, _ = run(capsys, *command, "--format", "markdown")
    assert markdown(EVIL) in out and "\x1b" not in out
    assert "https://evil" not in out  # its links' addresses, escaped
    for raw in (r"<img", r"`code", r"\|cell", r"\[bold red"):  # the data's markup, unescaped
        assert not re.search(r"(?<!\\)" + raw, out), raw


@pytest.mark.parametrize("command", [("compare", "old.parquet", "new.parquet", "--all"), ("claims", "new.parquet")])
def test_json_keeps_a_results_files_text_as_it_is(hostile, capsys, command):
    out, _ = run(capsys, *command, "--format", "json")
    assert any(EVIL in text for text in strings(json.loads(out)))


def strings(node) -> list[str]:
    """Every string in a JSON document."""
    if isinstance(node, dict):
        return [text for value in node.values() for text in strings(value)]
    if isinstance(node, list):
        return [text for value in node for text in strings(value)]
    return [node] if isinstance(node, str) else []


def test_a_configuration_with_brackets_is_shown_whole(tmp_path, monkeypatch, capsys):
    """Bench's own words too: rich took "[boolean mask]" for markup and printed "cupy a placement=other"."""
    monkeypatch.chdir(tmp_path)
    rows = [row for row in synthetic.all_records() if row["experiment"] == "library"]
    synthetic.write(tmp_path / "old.parquet", [{**row, "call": "a[boolean mask]"} for row in rows])
    synthetic.write(tmp_path / "new.parquet", [{**row, "call": "a[boolean mask]"} for row in rows],
                    run_id="20261122T000000Z")
    out, _ = run(capsys, "compare", "old.parquet", "new.parquet", "--all")
    assert "a[boolean mask]" in out


def test_warnings_and_errors_are_one_line_of_text(hostile, capsys):
    """A warning that names a file's GPU, and an error that names a path, each on one line, escaped."""
    rows = [{**row, "gpu_name": "Other GPU", "gpu_uuid": "GPU-bbbbbbbb-0000-0000-0000-000000000000"}
            for row in synthetic.all_records()]
    write_raw(hostile / "other.parquet", rows, "20261122T000000Z")
    out, err = run(capsys, "compare", "old.parquet", "other.parquet")
    warnings = [line for line in err.splitlines() if terminal(EVIL) in line]
    assert warnings and all(line.startswith("bench: warning: ") for line in warnings) and "\x1b" not in err
    assert cli.main(["plot", "no\x1b[2Jsuch.parquet"]) == 2
    assert capsys.readouterr().err == ("bench: error: cannot read results file no\\x1b[2Jsuch.parquet: no such file "
                                       "or directory\n")
