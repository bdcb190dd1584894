"""The HTML report: truth tables as tables, claims coloured by what the measurement says of them, numbers as people
write them, every run with its GPU, one section and a GPU column per GPU, figures at one scale, the same bytes for
the same results."""

import base64
import html
import re
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import synthetic
from blank_figures import blank_figures
from bench import report
from bench.results import store
from bench.analysis.selection import Gpu
from bench.catalogs.runtime import catalog
from bench.analysis.results import Results
from bench.report.gpu import experiment_id, gpu_id
from bench.experiments import registry
from bench.views import in_order

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = sorted((ROOT / "results" / "_superseded").glob("20261121T14[45]*Z-NVIDIA-H200.parquet"))
GPU_B = {"gpu_uuid": "GPU-bbbbbbbb-0000-0000-0000-000000000000", "hostname": "node-b"}
LATER = "20261122T000000Z"
RUN_DATE = "2026-11-21 00:00"  # synthetic.RUN_ID's


def td(document: str, where: str) -> tuple[str, str, str]:
    """(classes, title, text) of the truth-table cell whose hover text starts with ``where``."""
    match = re.search(rf"<td class='([^']*)' title='({re.escape(html.escape(where))}[^']*)'>([^<]*)</td>", document)
    assert match, where
    return match.group(1), html.unescape(match.group(2)), match.group(3)


def cudafree_returns(rows: list[dict]) -> list[dict]:
    return [{**row, "verdict": "returns", "verdicts": ["returns"] * 3, "host_ms": 0.004, "samples": [0.004] * 3,
             "median": 0.004, "matches_docs": None}
            if row["experiment"] == "blocking" and row["call"] == "cudaFree" else row for row in synthetic.tagged(rows)]


def first_headers(document: str) -> list[str]:
    """The first column header of every table but the truth tables."""
    return re.findall(r"<table><thead><tr><th>([^<]*)</th>", document)


def one_gpu_results() -> tuple[pd.DataFrame, dict]:
    """Every experiment's synthetic rows on one GPU, and the overlap timeline: (rows, side tables)."""
    rows = synthetic.frame(synthetic.all_records())
    return rows, {"timeline": synthetic.overlap_timeline(rows[rows["experiment"] == "overlap"])}


@pytest.fixture(scope="module")
def one_gpu() -> str:
    """The report of one_gpu_results(), rendered once for the module, its figures blank (:mod:`blank_figures`)."""
    rows, tables = one_gpu_results()
    with blank_figures():
        return report.render(rows, tables, registry(), source="synthetic")


@pytest.fixture(scope="module")
def two_gpus() -> str:
    """The report of every experiment on GPU A and, measured a day later, on GPU B, where cudaFree returns at once."""
    rows = synthetic.all_records()
    with blank_figures():
        return report.render(synthetic.frame(rows + cudafree_returns(synthetic.tagged(rows, run_id=LATER, **GPU_B))),
                             {}, registry())


def test_cells_read_as_people_write_them():
    values = [16.0, np.int64(16), 0.123456, 123456.7, pd.NA, np.nan, None, True, np.bool_(False), [1.0, 2.5], "x"]
    assert [report.cell(value) for value in values] == ["16", "16", "0.1235", "123457", "", "", "", "yes", "no",
                                                        "1, 2.5", "x"]


def test_the_truth_tables_are_html_tables_with_the_documentation_on_hover(one_gpu):
    assert one_gpu.startswith("<!doctype html>") and one_gpu.count("<table class='truth'>") == 4
    classes, title, text = td(one_gpu, "cudaFree on none (spinning stream blocking)")
    assert classes == "bad" and text == "20"  # host ms in blocking cells
    assert title == ("cudaFree on none (spinning stream blocking): waits-for-device; host 19.9 ms; with nothing "
                     "running 0.003 ms.\nThe documentation is silent or vague about waiting: the function's page says "
                     f"nothing about waiting for the device ({catalog()['cudaFree'].source}).")
    classes, title, text = td(one_gpu, "cudaGetLastError on none (spinning stream non-blocking): returns")
    assert classes == "good" and text == "4µs"
    contradicted = [row for row in synthetic.blocking_records()
                    if row["experiment"] == "serialization" and row["matches_docs"] is False][0]
    classes, title, text = td(one_gpu, f"{contradicted['call']} on {contradicted['placement']} (spinning stream "
                                       f"{contradicted['spin_stream']}): overlaps")
    assert classes.split()[:2] == ["good", "contradicts"] and text == "!"
    assert title.endswith(f"The documentation says the call keeps the kernels apart: {contradicted['docs']} "
                          f"({contradicted['source']}).\nThe measurement contradicts the documentation.")
    for meaning in ("waits-for-device</b>: returned only after the running kernel ended",
                    "serializes</b>: the second started only after the first ended"):
        assert meaning in one_gpu
    assert "blocking_truth_table" not in one_gpu  # the tables replace the (unreadably wide) figure


def test_the_library_truth_table_is_an_html_table_after_its_headline(one_gpu):
    section = one_gpu.split(">library</h2>")[1].split("<h2")[0]
    assert "library_truth_table" not in section and "<img" not in section  # the table replaces the (long) figure
    assert section.index("<th>waits on its own stream</th>") < section.index("<table class='truth'>")
    assert ">where the spin kernel runs</th>" in section and ">two spins around the call</th>" in section
    classes, title, text = td(section, "cupy a.item(), on the call's stream: waits-for-device")
    assert classes == "bad group" and text == "20"  # the first column of its group
    classes, title, text = td(section, "cupy cupy.cuda.Device().synchronize(), two spins around the call: serializes")
    assert classes == "bad" and text == "host"
    assert "<tr class=library><th>numba " in section  # each library's calls begin below a rule
    assert "<b>serializes</b>: the second started only after the first ended" in section


def test_claims_are_coloured_by_whether_the_measurement_agrees(one_gpu):
    rows = dict(re.findall(r"<tr><td>([^<]*)</td><td class='verdict ([a-z]+)'>", one_gpu))
    assert rows["cudaFree waits for running kernels"] == "good"  # the folklore holds
    assert rows["cudaGetLastError waits for running kernels"] == "bad"  # busted
    assert rows["cudaMemcpyAsync returns immediately"] == "fair"  # partly
    assert ">holds</td>" in one_gpu and ">busted</td>" in one_gpu and ">partly</td>" in one_gpu
    assert "<b>busted</b>: the measurement contradicts the claim" in one_gpu


def test_one_gpu_has_no_gpu_column_and_its_run_is_listed(one_gpu):
    assert first_headers(one_gpu).count("run") == 1 and "GPU" not in first_headers(one_gpu)
    runs = one_gpu.split("<h2 id='runs'>Runs</h2>")[1].split("</table>")[0]
    for value in (synthetic.RUN_ID, "Test GPU", synthetic.ENV["gpu_uuid"], "node-a", "580.0 / 12.9", "Gen5 x16"):
        assert f">{value}<" in runs, value
    assert re.search(r">\d+ streams × 4 chunks, malloc, eager<", one_gpu) and ">10 × 1 MiB<" in one_gpu
    assert not re.search(r"\d\.0 (streams|chunks|×)|Gen\d\.0|x\d+\.0", one_gpu)  # whole numbers as integers
    run_date = f"{RUN_DATE} UTC"  # the only date: the run's (the same results, the same bytes)
    assert set(re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", one_gpu)) == {run_date}
    assert not re.search(r"\d{4}-\d\d-\d\d", one_gpu.replace(run_date, ""))


def test_figures_are_embedded_at_one_scale(one_gpu):
    images = re.findall(r"<img alt='([^']+)' width='(\d+)' height='(\d+)' src='data:image/png;base64,([^']+)'>",
                        one_gpu)
    assert sorted(name for name, *_ in images) == [
        "alloc", "bandwidth", "batched", "connections", "firstcall", "hostlinks",
        "hostmemory", "latency", "launch", "managed", "overlap_heatmap", "overlap_scaling",
        "overlap_timeline", "peer_matrix_16mib", "peer_matrix_1mib", "peer_matrix_256mib", "roundtrip", "waitmodes",
        "zerocopy"]
    for name, width, height, encoded in images:
        pixels = struct.unpack(">II", base64.b64decode(encoded)[16:24])
        assert all(abs(shown * report.SCALE - int(css)) <= 1 for shown, css in zip(pixels, (width, height))), name
    assert "figure img { max-width: 100%; height: auto" in one_gpu  # a figure wider than the page shrinks to it
    widest = max(int(width) for _, width, _, _ in images)  # none needs to, on a 1366 px screen
    assert "max-width: 1240px" in one_gpu and widest <= 1240, widest
    assert "src='http" not in one_gpu and "<script" not in one_gpu


def test_several_gpus_get_a_section_and_a_gpu_column_each(two_gpus):
    document = two_gpus
    uuid_a, uuid_b = synthetic.ENV["gpu_uuid"], GPU_B["gpu_uuid"]
    gpu_a, gpu_b = Gpu("node-a", uuid_a, "Test GPU"), Gpu("node-b", uuid_b, "Test GPU")
    first, second = document.split(f"<h2 id='{gpu_id(gpu_b)}'>Test GPU {uuid_b} on node-b</h2>")
    assert f"<h2 id='{gpu_id(gpu_a)}'>Test GPU {uuid_a} on node-a</h2>" in first
    headers = first_headers(document)
    assert headers[0] == "run" and len(headers) > 12 and set(headers[1:]) == {"GPU"}
    assert "<caption>GPU Test GPU 00000000 on node-a. Host:" in first
    assert "<caption>GPU Test GPU bbbbbbbb on node-b. Host:" in second
    assert "<td class='gpu'>Test GPU bbbbbbbb on node-b</td>" in second
    assert "Test GPU 00000000" not in second.split("</caption>", 1)[1]  # no row of A in B's section
    where = "cudaFree on none (spinning stream blocking)"
    assert td(first, where)[0] == "bad" and td(second, where)[0] == "good"
    contents = re.search(r"<nav>Contents: (.*?)</nav>", document)[1]
    assert f"<a href='#{gpu_id(gpu_b)}'>Test GPU bbbbbbbb</a>" in contents  # every section is in the contents,
    assert f"<a href='#{experiment_id(gpu_b, 'blocking')}'>blocking</a>" in second.split("</nav>")[0]  # each GPU's
    assert gpu_id(gpu_a) != gpu_id(gpu_b) and re.fullmatch(r"gpu-[0-9a-f]{10}", gpu_id(gpu_a))  # never the data


def test_the_crossgpu_truth_table_is_an_html_table_of_call_gpu_by_spin_gpu_and_stream(one_gpu):
    section = one_gpu.split(">crossgpu</h2>")[1].split("<h2")[0]
    assert "<img" not in section and ">call made on GPU 0</th>" in section and ">call made on GPU 1</th>" in section
    assert ">spin on GPU 1 (other), non-blocking</th>" in section
    classes, _, text = td(section, "cudaFree on GPU 1, spin on GPU 1 (spinning stream blocking): waits-for-device")
    assert classes.startswith("bad") and text == "9.50"
    assert td(section, "cudaFree on GPU 1, spin on GPU 0 (spinning stream blocking): returns")[0] == "good group"


def test_an_experiments_figures_are_drawn_once_of_the_gpu_that_measured_it_last():
    other = {"gpu_name": "Other GPU", "gpu_uuid": "GPU-cccccccc-0000-0000-0000-000000000000", "hostname": "node-c"}
    launch, latency = synthetic.launch_records(), synthetic.latency_records()
    rows = launch + latency + synthetic.tagged(launch, run_id=LATER, **other)  # launch: the other GPU is newer
    with blank_figures():
        document = report.render(synthetic.frame(rows), {}, registry())
    first, second = document.split("<h2 id='gpu-", 2)[1:]
    assert "alt='latency'" in first and "alt='launch'" not in first and "alt='launch'" in second
    owner = Gpu("node-c", other["gpu_uuid"], "Other GPU")
    launch_section = first.split(">launch</h3>")[1].split("<h3")[0]
    assert (f"Figures: drawn once per experiment, of the GPU that measured it last: <a href='#"
            f"{experiment_id(owner, 'launch')}'>Other GPU cccccccc on node-c</a>; bench report --gpu 00000000"
            in launch_section)


def test_the_newest_measurement_is_shown_and_every_run_listed():
    blocking = [row for row in synthetic.blocking_records() if row["experiment"] == "blocking"]
    overlap = synthetic.overlap_records()
    larger = [{**row, "total_bytes": 1 << 30, "chunk_bytes": row["chunk_bytes"] * 4} for row in overlap]
    rows = (blocking + cudafree_returns(synthetic.tagged(blocking, run_id=LATER))
            + synthetic.tagged(overlap, run_id="20261120T000000Z")
            + synthetic.tagged(larger, run_id="20261123T000000Z"))
    with blank_figures():
        document = report.render(synthetic.frame(rows), {}, registry())
    assert td(document, "cudaFree on none (spinning stream blocking)")[0] == "good"
    runs = document.split("<h2 id='runs'>Runs</h2>")[1].split("</table>")[0]
    assert "<td>0 (newer runs measured all of it)</td>" in runs
    assert all(f">{run}<" in runs for run in (synthetic.RUN_ID, LATER, "20261120T000000Z", "20261123T000000Z"))
    overlap_section = document.split(">overlap</h2>")[1].split("<h2")[0]
    assert ">256 MiB<" in overlap_section and ">1 GiB<" in overlap_section  # both payloads
    assert "alt='overlap_scaling-256MiB'" in document and "alt='overlap_scaling-1GiB'" in document
    answers = dict(re.findall(r"<tr><td><a href='#[^']+'>([a-z]+)</a></td><td>[^<]+</td><td>([^<]+)</td></tr>",
                              document))  # measured in three runs: each answer says when
    assert answers == {"blocking": "2026-11-22 00:00 UTC", "overlap": "2026-11-23 00:00 UTC"}


def test_the_same_results_give_the_same_bytes(tmp_path):
    """Figures drawn for real, by several workers: an experiment with several figures and a side table, and one
    more."""
    def results() -> tuple[pd.DataFrame, dict]:  # built again for each render
        rows = synthetic.frame(synthetic.records("overlap") + synthetic.records("launch"))
        return rows, {"timeline": synthetic.overlap_timeline(rows[rows["experiment"] == "overlap"])}

    first = report.render(*results(), registry(), source="synthetic")
    written = report.write(*results(), tmp_path / "a.html", registry(), source="synthetic").read_bytes()
    assert written == first.encode("utf-8") and first.count("<img ") == 4
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.html"]  # no temporary files left


def test_a_report_of_the_committed_h200_results():
    rows = pd.concat([store.read(path, synthetic.suite()) for path in COMMITTED], ignore_index=True)
    tables: dict = {}
    for path in COMMITTED:
        for name, table in store.side_tables(path).items():
            tables[name] = pd.concat([tables.get(name, table.iloc[0:0]), table], ignore_index=True)
    document = report.render(rows, tables, registry(), source="results")
    sections = re.findall(r"<h2 id='gpu-[0-9a-f]{10}'>NVIDIA H200 (GPU-[0-9a-f-]+) on ", document)
    assert sections == ["GPU-0ae58127-4a68-57cf-5fb8-628232d62d6e", "GPU-45364c49-8b5e-b5bd-5853-b478f0fefa40"]
    runs = document.split("<h2 id='runs'>Runs</h2>")[1].split("</table>")[0]
    assert runs.count("<tr><td>20261121T") == len(COMMITTED) == 5
    for table in re.findall(r"<table class='truth'>.*?</table>", document):
        assert table.count("<tr><th>") == len(catalog())  # every call of the catalog, once
    claims = dict(re.findall(r"<tr><td class='gpu'>[^<]*</td><td>([^<]*)</td><td class='verdict ([a-z]+)'>",
                             document))
    assert claims["cudaFree waits for running kernels"] == "good"
    assert claims["cudaGetLastError waits for running kernels"] == "bad"
    assert "alt='overlap_scaling-256MiB'" in document and "alt='overlap_scaling-1GiB'" in document
    assert "alt='bandwidth'" in document.split(f"NVIDIA H200 {sections[1]} on ")[-1]  # it ran on the second GPU


def test_the_answers_come_first_with_each_gpus_newest_run(one_gpu):
    answers = one_gpu.split("<h2 id='answers'>Answers</h2>")[1].split("<h2 id='runs'>")[0]
    assert one_gpu.index("<h2 id='answers'>") < one_gpu.index("<h2 id='runs'>") < one_gpu.index("<h2 id='gpu-")
    uuid = synthetic.ENV["gpu_uuid"]
    assert f"<h3>Test GPU {uuid} on node-a</h3>" in answers
    assert (f"newest run {RUN_DATE} UTC ({synthetic.RUN_ID}), commit {synthetic.ENV['git_commit'][:12]}, driver 580.0, "
            "CUDA runtime 12.9") in answers
    linked = re.findall(r"<tr><td><a href='#([^']+)'>([a-z]+)</a></td><td>([^<]+)</td></tr>", answers)
    assert [name for _, name, _ in linked] == list(registry())  # every experiment, in sweep order
    for anchor, name, _ in linked:
        assert f" id='{anchor}'>{name}</h2>" in one_gpu, name
    assert "<th>measured</th>" not in answers  # all measured in the one run: its date is said once, above
    said = {name: html.unescape(text) for _, name, text in linked}
    assert said["blocking"].startswith("7 of 29 calls wait for a running kernel in some placement: cudaFree, ")
    assert said["launch"] == "host µs per launch: dispatcher 9, precompiled 2.5, graph 0.4"
    assert said["overlap"] == "the best pipelines reach, of the engine-aware bound: pinned 95%, pageable 38%"


def test_the_gpu_measured_last_answers_first(two_gpus):
    document = two_gpus
    answers = document.split("<h2 id='runs'>")[0]
    assert answers.index(f"<h3>Test GPU {GPU_B['gpu_uuid']} on node-b</h3>") < answers.index(
        f"<h3>Test GPU {synthetic.ENV['gpu_uuid']} on node-a</h3>")
    assert "newest run 2026-11-22 00:00 UTC (20261122T000000Z)" in answers
    assert document.index("<nav>Contents: <a href='#answers'>Answers</a> · <a href='#runs'>Runs</a>") < answers.index(
        "<h2 id='answers'>")  # the contents of a report, in a line above the answers


@pytest.mark.parametrize("source", ["synthetic", "committed"])
def test_a_table_column_holds_one_unit_named_in_its_header(source):
    """No headline cell carries a time or rate unit: the column's header names it (sizes are values, not units).
    Each experiment's rows as the report hands them to its view (:class:`~bench.analysis.results.GpuResults`: a
    few columns, selected once)."""
    rows = (synthetic.frame(synthetic.all_records()) if source == "synthetic"
            else store.read_any(ROOT / "results", synthetic.suite()))
    unit = re.compile(r"\d\s*(ms|µs|us|ns|GB/s)\b")
    for part in Results(rows, registry(), in_order(registry())).gpus:
        for name, table in part.headlines.items():
            for column in table.columns:
                assert not [value for value in table[column].astype(str) if unit.search(value)], (name, column)


def test_gpu_filters_every_section(tmp_path):
    """``report --gpu`` shows the chosen GPU's syncs and traces only, as it does its sweep rows."""
    import test_report_safety as safety
    from bench import cli
    from bench.results.schema import schema_of
    from bench.syncs import columns

    blocking = [row for row in synthetic.blocking_records() if row["experiment"] == "blocking"]
    synthetic.write(tmp_path / "results" / f"{synthetic.RUN_ID}.parquet",
                    blocking + synthetic.tagged(blocking, **GPU_B))
    syncs = safety.syncs_rows()
    store.write(tmp_path / "results" / "_syncs" / "s.parquet", syncs + synthetic.tagged(syncs, **GPU_B),
                schema_of(columns()), {"table": "syncs"})
    out = tmp_path / "b.html"
    with blank_figures():
        assert cli.main(["report", str(tmp_path / "results"), "--gpu", "node-b", "--out", str(out)]) == 0
    section = out.read_text().split("<h2 id='syncs'>")[1]
    assert ">Test GPU bbbbbbbb on node-b</h3>" in section and "node-a" not in section


def terminal() -> tuple:
    """A console that is a terminal, writing into a buffer: (console, buffer)."""
    import io

    from rich.console import Console

    sink = io.StringIO()
    return Console(file=sink, force_terminal=True, width=100), sink


def test_a_report_quicker_than_the_bars_delay_prints_no_bar():
    from bench.report.bar import DelayedBar

    console, sink = terminal()
    with DelayedBar(console, after_s=60) as bar:  # left long before the bar is due: it never shows
        bar.figures(3, 5)
    assert sink.getvalue() == ""


def test_a_longer_report_shows_what_it_does_and_how_many_figures_are_drawn():
    from bench.report.bar import DelayedBar

    console, sink = terminal()
    with DelayedBar(console, after_s=0) as bar:
        bar.timer.join()  # the bar is due at once: it has started
        bar.doing("reading the results")
        bar.figures(3, 5)
    assert "drawing the report's figures" in sink.getvalue() and "3/5" in sink.getvalue()


def test_plot_shows_its_bar_on_a_terminal_only(tmp_path, monkeypatch, capsys):
    from bench import cli
    from bench.report import bar

    monkeypatch.setattr(bar, "AFTER_S", 0)
    synthetic.write(tmp_path / "r.parquet", synthetic.launch_records() + synthetic.latency_records())
    with blank_figures():  # what the terminal shows is tested
        assert cli.main(["plot", str(tmp_path / "r.parquet"), "--out", str(tmp_path / "a")]) == 0
        assert capsys.readouterr().err == ""
        monkeypatch.setenv("FORCE_COLOR", "1")  # rich takes stderr for a terminal
        assert cli.main(["plot", str(tmp_path / "r.parquet"), "--out", str(tmp_path / "b")]) == 0
    shown = capsys.readouterr().err
    assert "drawing the figures" in shown and "/?" in shown  # counted as drawn: how many is not known before


def test_report_shows_its_bar_on_a_terminal_only(tmp_path, monkeypatch, capsys):
    from bench import cli
    from bench.report import bar

    monkeypatch.setattr(bar, "AFTER_S", 0)
    monkeypatch.setenv("BENCH_CACHE_DIR", "off")  # each run makes its report: a report kept from before draws nothing
    synthetic.write(tmp_path / "r.parquet", synthetic.launch_records())
    with blank_figures():  # what the terminal shows is tested
        assert cli.main(["report", str(tmp_path / "r.parquet"), "--out", str(tmp_path / "r.html")]) == 0
        assert capsys.readouterr().err == ""
        monkeypatch.setenv("FORCE_COLOR", "1")  # rich takes stderr for a terminal
        assert cli.main(["report", str(tmp_path / "r.parquet"), "--out", str(tmp_path / "r.html")]) == 0
    assert "drawing the report's figures" in capsys.readouterr().err


def test_every_truth_table_has_its_question():
    """The analysis side names the experiments shown as truth tables; the report asks each one's question."""
    from bench.analysis.results import TRUTH_TABLES
    from bench.report.truth import QUESTIONS

    assert tuple(QUESTIONS) == TRUTH_TABLES
