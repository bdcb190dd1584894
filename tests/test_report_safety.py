"""A results file is untrusted input (fleets merge files from many hosts): the report of hostile results holds no
element, attribute or URL that came from the data, forbids script by its Content-Security-Policy, and in a real
browser (headless Chromium) runs none and shows the answers on the first 1366×768 screen."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa
import pytest

import synthetic
from blank_figures import blank_figures
from bench import cli, report
from bench.results import store
from bench.results.schema import schema_of

MARK = "PWNED"
HOSTILE = (f"javascript:document.title='{MARK}'//'\"><img src=x onerror=\"document.title='{MARK}'\">"
           f"<script>document.title='{MARK}'</script></style></title><svg onload=document.title='{MARK}'>"
           f"' autofocus onfocus='document.title=\"{MARK}\"' x='<!--")
KEPT = {  # the columns that name what was measured: hostile rows keep them so that every section shows them
    "experiment", "status", "verdict", "verdicts", "unit", "clock", "stop_reason", "docs_host", "library",
    "stream_use", "capture_state_after_sync", "access_order", "allocator", "api", "call", "case", "connections",
    "direction", "host_memory", "issue", "launch", "load", "memory", "method", "module_loading", "operation", "path",
    "pattern", "peer_access", "placement", "spin_stream", "release_threshold", "schedule", "side", "wait", "workload"}
TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "nav", "ul", "li", "a", "div",
        "table", "caption", "thead", "tbody", "tr", "th", "td", "span", "b", "figure", "img", "figcaption", "details",
        "summary"}
TEXT_ATTRIBUTES = {"title", "alt"}  # attributes whose value is text to read: the data may be in them, escaped
FORMS = {"id": r"[a-z][a-z0-9-]*", "class": r"[a-z ]+", "width": r"\d+", "height": r"\d+", "colspan": r"\d+",
         "rowspan": r"\d+", "lang": "en", "charset": "utf-8", "name": "viewport|generator",
         "content": r"width=device-width|cuda-sync-bench|default-src 'none';[^<>\"]*",
         "http-equiv": "Content-Security-Policy",
         "href": r"#[a-z][a-z0-9-]*|https?://[\w.-]+/[\w./#%?=&+-]*",
         "src": r"data:image/png;base64,[A-Za-z0-9+/]+=*"}


class Parsed(HTMLParser):
    """Every start tag with its attributes, and the text of each element kind (the texts of ``<style>``,
    ``<title>``, ``<h3>``...)."""

    def __init__(self, document: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.texts: dict[str, list[str]] = {}
        self.open: list[str] = []
        self.other: list[str] = []  # comments, declarations but the doctype, processing instructions
        self.feed(document)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))
        if tag not in ("meta", "img"):
            self.open.append(tag)

    def handle_endtag(self, tag):
        if tag in self.open:
            while self.open.pop() != tag:
                pass

    def handle_data(self, data):
        self.texts.setdefault(self.open[-1] if self.open else "", []).append(data)

    def handle_comment(self, data):
        self.other.append(f"<!--{data}-->")

    def handle_decl(self, decl):
        if decl.lower() != "doctype html":
            self.other.append(decl)

    def handle_pi(self, data):
        self.other.append(data)


def hostile(rows: list[dict], schema: pa.Schema, kept=frozenset()) -> list[dict]:
    """``rows`` with every text column (and text list item) of ``schema`` but ``kept`` set to HOSTILE."""
    text = {field.name for field in schema if pa.types.is_string(field.type)} - set(kept)
    lists = {field.name for field in schema if field.type == pa.list_(pa.string())} - set(kept)
    return [{name: HOSTILE if name in text and value is not None
             else [HOSTILE] * len(value) if name in lists and value else value for name, value in row.items()}
            for row in rows]


def write_raw(path: Path, rows: list[dict], schema: pa.Schema, **metadata) -> None:
    """Rows written as another program could write them: no check of their values; hostile metadata besides."""
    table = pa.Table.from_pylist(rows, schema=schema)
    stamp = {"schema_version": 2, "host": HOSTILE, "note": HOSTILE, **metadata}
    store.write_table(path, table.replace_schema_metadata({store.METADATA_KEY: json.dumps(stamp)}))


def trace_rows() -> list[dict]:
    from bench.trace import SUMMARY

    summary = {name: 0.5 for name in SUMMARY}
    ops = [("kernel", 7, 0.0, 0.1), ("H2D", 8, 0.02, 0.06), ("idle", -1, 0.1, 0.2), ("wait", -2, 0.09, 0.18)]
    return [{"target": "step", "traced_at": "2026-11-21T00:00:00Z", "op": op, "stream": stream, "start_ms": start,
             "end_ms": end, "bytes": 4096, "host_memory": "pinned", "name": "k", "call": "c", "line": "x.py:1",
             "runs": 1, **summary, **synthetic.ENV} for op, stream, start, end in ops]


def syncs_rows() -> list[dict]:
    return [{"target": "step", "file": "/u/x.py", "line": 3, "function": "f", "source": "x.item()",
             "library": "torch", "waits": 2, "held_ms": 5.0, "natural_ms": 0.1, "hold_ms": 5.0,
             "cuda_calls": "cuStreamSynchronize", "into_library": "torch", "waited": True, "region_ms": 9.0,
             "settle_ms": 1.0, **synthetic.ENV}]


def hostile_results(directory: Path) -> Path:
    """A results directory whose every text value and every file's metadata is HOSTILE: one GPU's rows keep the
    columns that name what was measured (so that every section, figure, truth table and claim shows them), another
    GPU's rows have every text column hostile; a timeline, a trace and a syncs table besides."""
    from bench.syncs import columns as syncs_columns
    from bench.trace import columns as trace_columns

    suite = synthetic.suite()
    shown = hostile(synthetic.all_records(), suite, KEPT)
    whole = synthetic.tagged(hostile(synthetic.all_records(), suite), gpu_uuid=f"GPU-2{HOSTILE}")
    name = "20261121T000000Z-hostile.parquet"
    write_raw(directory / name, shown + whole, suite, run_id=HOSTILE)
    timeline = synthetic.overlap_timeline(synthetic.frame(shown).query("experiment == 'overlap'"))
    timeline = pa.Table.from_pandas(timeline.assign(run_id=HOSTILE), preserve_index=False)
    write_raw(directory / "_timeline" / name, timeline.to_pylist(), timeline.schema, table="timeline")
    for table, rows, columns in (("trace", trace_rows(), trace_columns), ("syncs", syncs_rows(), syncs_columns)):
        schema = schema_of(columns())
        write_raw(directory / f"_{table}" / name, hostile(rows, schema, {"op"}), schema, table=table)
    return directory


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory) -> Path:
    """The report of hostile_results(), as ``bench report`` writes it."""
    directory = tmp_path_factory.mktemp("hostile")
    out = directory / "report.html"
    with blank_figures():  # the markup is what is tested: each figure is built of the hostile rows, not drawn
        assert cli.main(["report", str(hostile_results(directory / "results")), "--out", str(out)]) == 0
    return out


def test_no_element_attribute_or_url_comes_from_the_data(hostile_report):
    document = hostile_report.read_text()
    parsed = Parsed(document)
    assert not parsed.other, parsed.other[:3]
    assert {tag for tag, _ in parsed.tags} <= TAGS, {tag for tag, _ in parsed.tags} - TAGS
    ids = {value for _, attrs in parsed.tags for name, value in attrs if name == "id"}
    for tag, attrs in parsed.tags:
        for name, value in attrs:
            if name in TEXT_ATTRIBUTES:
                continue
            assert name in FORMS, (tag, name, value)
            assert value is not None and re.fullmatch(FORMS[name], value), (tag, name, value)
            if name == "href" and value.startswith("#"):
                assert value[1:] in ids, value  # a link within the report goes to a section of it
    assert parsed.texts["title"] == ["bench report"] and parsed.texts["style"] == [report.STYLE]
    assert sum(value == report.POLICY for _, attrs in parsed.tags for name, value in attrs) == 1


def test_the_hostile_data_is_shown_as_text(hostile_report):
    """The test above is not vacuous: the data reached every section, as text."""
    parsed = Parsed(hostile_report.read_text())
    shown = {tag: sum(HOSTILE in text for text in texts) for tag, texts in parsed.texts.items()}
    assert shown["h3"] >= 4 and shown["td"] >= 20 and shown["p"] >= 1, shown  # GPUs; runs, syncs, trace; summary
    titles = [value for _, attrs in parsed.tags for name, value in attrs if name == "title"]
    assert any(HOSTILE in title for title in titles)  # the truth tables' hover text: docs and source
    document = hostile_report.read_text()
    for section in ("id='syncs'", "id='trace'", ">Claims</h", "<table class='truth'>", "data:image/png"):
        assert section in document, section


def test_the_policy_forbids_script():
    directives = dict(directive.strip().split(" ", 1) for directive in report.POLICY.split(";") if directive.strip())
    assert directives["default-src"] == "'none'" and not any("script" in name for name in directives), directives
    assert [name for name, value in directives.items() if "unsafe" in value] == ["style-src"]


# --- in a browser ----------------------------------------------------------------------------------------------

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--window-size=1366,768")
SCREEN = (1366, 768)


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    """A function running headless Chromium (Debian's ``chromium``, which .ci/run installs) on a file with more
    arguments, returning its stdout. Skips where there is none, but fails in CI (``CI=true``): there it must run."""
    found = shutil.which("chromium")
    if not found:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but chromium is not installed (.ci/run installs it with apt-get)")
        pytest.skip("chromium is not installed (apt-get install chromium); CI runs this test")

    def run(page: Path, *args: str) -> str:
        profile = tmp_path_factory.mktemp("chromium-profile")
        done = subprocess.run([found, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()],
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    return run


def title_of(dom: str) -> str:
    return Parsed(dom).texts.get("title", [""])[0]


def test_no_script_runs_in_a_browser(hostile_report, chromium, tmp_path):
    """Chromium loads the hostile report and its title stays: no handler or script of the data ran. The probe sees
    script where there is some: the hostile markup on a page of its own sets the title, but not under the report's
    policy."""
    assert title_of(chromium(hostile_report, "--dump-dom")) == "bench report"
    bare = tmp_path / "bare.html"
    bare.write_text(f"<!doctype html><html><head><title>bare</title></head><body>{HOSTILE}</body></html>")
    assert title_of(chromium(bare, "--dump-dom")) == MARK
    guarded = tmp_path / "guarded.html"
    guarded.write_text(f"<!doctype html><html><head><meta http-equiv='Content-Security-Policy' "
                       f"content=\"{report.POLICY}\"><title>guarded</title></head><body>{HOSTILE}</body></html>")
    assert title_of(chromium(guarded, "--dump-dom")) == "guarded"


PROBE = """<script>
const answers = document.getElementById('answers').getBoundingClientRect();
const rows = [...document.querySelectorAll('table.answers')[0].querySelectorAll('tbody tr')];
document.title = JSON.stringify({width: innerWidth, height: innerHeight, wide: document.documentElement.scrollWidth,
  answers: answers.top, rows: rows.map(row => row.getBoundingClientRect().bottom)});
</script>"""


@pytest.fixture(scope="module")
def fleet_report(tmp_path_factory) -> Path:
    """The report of two hosts × two H200s and, a day later, of an H100: the newest GPU, whose answers open the
    report, measured every experiment; the H200s two (each GPU's section lies below the answers, and the H100's
    has every figure, so the H200s' sections would only repeat figures of the sizes it shows)."""
    directory = tmp_path_factory.mktemp("fleet")
    rows = synthetic.all_records()
    synthetic.write_fleet(directory / "results", [row for row in rows if row["experiment"] in ("blocking", "launch")])
    h100 = {"gpu_name": "NVIDIA H100", "gpu_uuid": "GPU-c0c0c0c0-0000-0000-0000-000000000000", "hostname": "node-c"}
    synthetic.write(directory / "results" / "20261122T000000Z-NVIDIA-H100.parquet",
                    synthetic.tagged(rows, run_id="20261122T000000Z", **h100), "20261122T000000Z")
    out = directory / "report.html"
    with blank_figures():  # blank figures of the size they would have: the page lays out the same
        assert cli.main(["report", str(directory / "results"), "--out", str(out)]) == 0
    return out


def test_the_answers_are_on_the_first_screen(fleet_report, chromium, tmp_path):
    """Measured in the browser, in a 1366×768 window: a copy of the report with a probe script (and without the
    policy that would stop it) writes where the answers lie into its title. Of the window, the page gets what the
    browser leaves it (headless Chromium: 1366×625). The Answers heading is in the top third of that first screen
    and the newest GPU's first eight answers are on it, whole; nothing is wider than the screen. The same run takes a
    screenshot of the page (the probe changes only its title), left in the test's temporary directory."""
    document = fleet_report.read_text()
    assert document.count(report.POLICY) == 1
    probed = tmp_path / "probed.html"
    probed.write_text(document.replace(report.POLICY, "").replace("</body>", f"{PROBE}</body>"))
    shot = tmp_path / "report-1366x768.png"
    found = json.loads(title_of(chromium(probed, "--dump-dom", f"--screenshot={shot}")))
    width, height = found["width"], found["height"]  # the page's part of the screen: less the browser's own
    assert width == SCREEN[0] and SCREEN[1] * 3 / 4 <= height <= SCREEN[1] and found["wide"] <= width, found
    assert 0 <= found["answers"] <= height / 3, found
    assert len(found["rows"]) >= 8 and found["rows"][7] <= height, found
    png = shot.read_bytes()
    assert struct.unpack(">I", png[16:20])[0] == SCREEN[0] and len(png) > 10_000  # a screen with something on it
