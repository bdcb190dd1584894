"""A results file is untrusted input (fleets merge files from many hosts): its control characters (an escape
sequence, a bell, a carriage return, C1's CSI U+009B, DEL, a bidi override) never get out raw, whatever command reads
it. A figure draws each as its Python escape (and matplotlib has no glyph of it to warn of), the report writes it so,
and JSON escapes it as \\uXXXX (bench.analysis.escape)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

import synthetic
from blank_figures import blank_figures, texts
from bench import cli, report
from bench.analysis import plots
from bench.analysis.escape import CONTROL, json_text, visible
from bench.results.schema import schema_of
from test_documents import strings
from test_report_safety import KEPT, syncs_rows, trace_rows, write_raw

CONTROLS = "\x1b[31m\x07\r\x9b2J\x7f\u202e\x00"
TEXT = f"evil {CONTROLS}name"  # a space: a library's call names its library first
SHOWN = r"evil \x1b[31m\x07\r\x9b2J\x7f\u202e\x00name"  # TEXT as a figure, the report and a terminal show it
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]")  # what must not get out: every control but tab and line break
RAW_IN_JSON = re.compile("[\x7f-\x9f\u202e]")  # json.dumps escapes C0 itself; these it wrote raw
SHOWN_BY = ("gpu_name", "hostname", "call", "library", "host_memory", "docs", "source", "error")


def test_a_control_character_is_shown_as_its_escape_and_json_keeps_the_text():
    assert visible(TEXT) == SHOWN and visible("a\tb\nc", keep="\t\n") == "a\tb\nc"
    words = "NVIDIA H200 – “µs” 日本 $x$"
    assert visible(words) == words and plots.literal(words) == r"NVIDIA H200 – “µs” 日本 \$x\$"
    written = json_text({"name": TEXT, "words": words, "path": "a\udcffb"}, indent=2)
    assert not RAW_IN_JSON.search(written) and words in written and "\\u009b" in written
    assert json.loads(written) == {"name": TEXT, "words": words, "path": "a\udcffb"}
    written.encode("utf-8")  # a lone surrogate (a path's undecodable byte) escaped: always UTF-8


def test_drawing_a_control_character_warns_of_no_missing_glyph():
    """The escapes are plain ASCII, which DejaVu Sans draws (it has no control pictures, U+2400-U+2421)."""
    plt = plots.pyplot()
    figure, ax = plt.subplots(figsize=(3, 1))
    ax.set_title(plots.literal(TEXT))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plots.rendered(figure, "png", dpi=30)
    assert not [str(warning.message) for warning in caught if "Glyph" in str(warning.message)]


def controlled(rows: list[dict], schema: pa.Schema, kept=KEPT) -> list[dict]:
    """``rows`` with every text column of ``schema`` but ``kept`` holding TEXT."""
    text = {field.name for field in schema if pa.types.is_string(field.type)} - set(kept)
    return [{name: TEXT if name in text and value is not None else value for name, value in row.items()}
            for row in rows]


def results(directory: Path, experiments=None) -> Path:
    """A results directory whose texts (a GPU's name, its host, calls, libraries, docs, errors, the file's metadata)
    hold TEXT, of ``experiments`` (all where None); a trace and a syncs table besides."""
    from bench.syncs import columns as syncs_columns
    from bench.trace import columns as trace_columns

    suite = synthetic.suite()
    rows = [row for row in synthetic.all_records() if experiments is None or row["experiment"] in experiments]
    rows = [{**row, **{name: TEXT for name in SHOWN_BY if isinstance(row.get(name), str)}} for row in rows]
    name = "20261121T000000Z-controls.parquet"
    write_raw(directory / name, rows, suite, host=TEXT, note=TEXT)
    if experiments is None:
        for table, found, columns in (("trace", trace_rows(), trace_columns), ("syncs", syncs_rows(), syncs_columns)):
            schema = schema_of(columns())
            write_raw(directory / f"_{table}" / name, controlled(found, schema, {"op"}), schema, table=table)
    return directory


def test_plot_says_and_draws_no_control_character(tmp_path):
    """``bench plot`` drawing for real (a few experiments: the truth table, a library's, copies'), in a process of
    its own: its output holds no control character, and no warning of a glyph missing (which carried ESC, BEL and
    CR to the terminal)."""
    directory = results(tmp_path / "results", ("blocking", "library", "bandwidth"))
    done = subprocess.run([sys.executable, "-m", "bench", "plot", str(directory), "--out", str(tmp_path / "figures")],
                          capture_output=True, timeout=300, env={**os.environ, "PYTHONWARNINGS": "always"})
    said = (done.stdout + done.stderr).decode("utf-8")
    assert done.returncode == 0, said[-2000:]
    missing = {chr(int(glyph)) for glyph in re.findall(r"Glyph (\d+)", said)}
    assert not RAW.search(said) and not CONTROL.search("".join(missing)), said[-2000:]
    assert len(list((tmp_path / "figures").glob("*.png"))) >= 3


def test_every_figure_text_shows_the_control_characters(tmp_path, monkeypatch, capsys):
    """Every view's figures of every experiment, their texts written instead of their pixels: the file's texts
    reach them as their escapes, never raw."""
    monkeypatch.setattr("bench.analysis.plots.render", texts)
    out = tmp_path / "figures"
    assert cli.main(["plot", str(results(tmp_path / "results")), "--out", str(out)]) == 0
    written = {path.name: path.read_text("utf-8") for path in out.rglob("*.png")}
    assert len(written) > 10
    assert not {name: RAW.findall(words) for name, words in written.items() if RAW.search(words)}
    assert sum(SHOWN in words for words in written.values()) > 10  # the GPU's name in titles; calls, libraries
    said = "".join(capsys.readouterr())
    assert not RAW.search(said)


def test_the_report_holds_no_control_character(tmp_path):
    """``bench report`` of the results, their trace and syncs tables: not one raw control character in the file,
    each shown as its escape."""
    out = tmp_path / "report.html"
    with blank_figures():  # the markup is what is tested
        assert cli.main(["report", str(results(tmp_path / "results")), "--out", str(out)]) == 0
    document = out.read_text("utf-8")
    assert not RAW.search(document), sorted(set(RAW.findall(document)))
    assert document.count(SHOWN) > 20 and "id='syncs'" in document and "id='trace'" in document


def test_the_reports_last_pass_escapes_what_a_section_left(monkeypatch):
    """The last line of defence: a section that wrote a control character raw has it escaped in the document."""
    monkeypatch.setattr(report, "_contents", lambda results, tools: f"<p>{TEXT}</p>")
    document = report.render(synthetic.launch_rows(), {}, {})
    assert f"<p>{visible(TEXT, keep=chr(9) + chr(10))}</p>" in document and not RAW.search(document)


@pytest.mark.parametrize("command", [("compare", "results", "results", "--all"), ("claims", "results")])
def test_json_escapes_c1_and_keeps_the_text(tmp_path, monkeypatch, capsys, command):
    monkeypatch.chdir(tmp_path)
    results(tmp_path / "results")
    assert cli.main([*command, "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert not RAW.search(out) and "\\u009b" in out
    assert any(TEXT in text for text in strings(json.loads(out)))  # the text itself, to a JSON reader


def traced(target: str, kernel: str):
    from bench.trace import result_of
    from bench.usercode.activity import Activity, HostCall, Op, Recording
    from bench.usercode.stacks import Frame

    ms = 1_000_000
    frames = (Frame("/u/x.py", 3, TEXT, ""),)  # a path of its own: Python's linecache reads it
    recording = Recording([Activity(Op.KERNEL, 1, 0, ms, name=kernel),
                           Activity(Op.H2D, 2, 2 * ms, 3 * ms, bytes=1 << 20, host_memory="pageable", correlation=2)],
                          [HostCall("cuMemcpyHtoD", 2 * ms, 4 * ms, 2, frames=frames)])
    return result_of([recording], copy_bound=lambda h2d, d2h: (0.5, 2), pinned=lambda op, nbytes: (0.1, "measured"),
                     target=target)


def test_the_tools_json_escapes_c1(tmp_path, monkeypatch, capsys):
    """A trace's JSON and its Perfetto timeline, syncs' JSON, two traces compared: kernel names, targets, files and
    source lines come from the user's code."""
    from bench.trace import save
    from bench.usercode.syncs.result import Place, SyncsResult
    from bench.usercode.trace.perfetto import encoded

    found = traced(TEXT, TEXT)
    place = Place(f"/u/{TEXT}.py", 3, TEXT, TEXT, TEXT, 1, 5.0, 0.1, 5.0, (TEXT,), (TEXT,), (TEXT,))
    written = {"trace": found.to_json(), "perfetto": encoded(found).decode("utf-8"),
               "syncs": SyncsResult([place], region_ms=9.0).to_json()}
    monkeypatch.chdir(tmp_path)
    for name in ("old", "new"):
        save([(TEXT, traced(TEXT, TEXT))], synthetic.environment(gpu_name=TEXT), Path(f"{name}.parquet"))
    assert cli.main(["compare", "old.parquet", "new.parquet", "--all", "--format", "json"]) == 0
    written["compare"] = capsys.readouterr().out
    for name, text in written.items():
        assert not RAW_IN_JSON.search(text), name
        assert any(TEXT in found for found in strings(json.loads(text))), name


def test_a_trace_timeline_draws_its_title_as_written():
    """``bench trace --plot`` and the report's trace section: the title names the target and the GPU."""
    from bench.usercode.trace.timeline import timeline

    figure = timeline(pd.DataFrame(traced(TEXT, TEXT).table()), f"{TEXT} on {TEXT}")
    drawn = texts(figure, "png").decode("utf-8")
    plots.pyplot().close(figure)
    assert f"{SHOWN} on {SHOWN}" in drawn and not RAW.search(drawn)
    assert not CONTROL.search(plots.literal(TEXT))
