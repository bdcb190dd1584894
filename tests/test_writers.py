"""What bench may write, and where: no writer replaces a file it did not make (``--force`` aside), none replaces a
results file, a report or figure never lands on a results path, a missing directory is a mistake (bench's own
aside), a results path that is a pipe is refused unopened; the policy table in docs/usage.md is bench.results.writes.WRITERS;
and the docs' own example commands write where git ignores them. Run as a user runs bench: in a subprocess."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import synthetic
from commands import ROOT, assert_refused, bench
from bench.analysis import plots
from bench.results import writes
from bench.cli.parser import parser
from bench.trace import save
from bench.usercode.trace.perfetto import encoded
from bench.results.writes import WRITERS, Replaces
from blank_figures import blank_figures
from test_trace_multigpu import GPU0, GPU0_CALLS, traced

USAGE = ROOT / "docs" / "usage.md"
FOREIGN = "# my notes\nnothing of bench's\n"


def tree(directory: Path) -> dict[str, bytes | None]:
    return {str(path.relative_to(directory)): path.read_bytes() if path.is_file() else None
            for path in sorted(directory.rglob("*"))}


@pytest.fixture
def results(tmp_path) -> Path:
    """A directory holding one results file, r.parquet."""
    synthetic.write(tmp_path / "r.parquet", synthetic.launch_records())
    return tmp_path


# --- the policy, stated once ----------------------------------------------------------------------------------------

def _table_rows() -> list[list[str]]:
    text = USAGE.read_text()
    block = text[text.index("<!-- writers:"):].split("\n\n")[0]
    rows = [line for line in block.splitlines() if line.startswith("| `")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def _names(suffixes: tuple[str, ...]) -> str:
    return ", ".join("a directory" if suffix == "/" else f"`{suffix}`" for suffix in suffixes)


def test_the_docs_table_is_the_writers_policy():
    stated = [[f"`{w.command}`", f"`{w.option}`", w.writes, _names(w.suffixes), w.replaces.value] for w in WRITERS]
    assert _table_rows() == stated


def test_every_writer_is_an_option_and_force_is_offered_where_a_writer_may_replace():
    commands = {name: sub for action in parser()._subparsers._group_actions for name, sub in action.choices.items()}
    for writer in WRITERS:
        assert writer.option in commands[writer.command]._option_string_actions, writer
    for name, command in commands.items():
        replacing = any(w.command == name and w.replaces is Replaces.OWN for w in WRITERS)
        assert ("--force" in command._option_string_actions) == replacing, name


# --- every writer's own output carries its mark ---------------------------------------------------------------------

def test_what_bench_writes_carries_its_mark_and_nothing_else_does(tmp_path):
    plt = plots.pyplot()
    made = {"f.png": plots.rendered(plt.figure(), "png"), "f.svg": plots.rendered(plt.figure(), "svg"),
            "t.json": encoded(traced(GPU0, GPU0_CALLS, rank=0))}
    foreign = {"g.png": b"\x89PNG\r\n\x1a\n" + b"\0" * 40, "n.html": b"<!doctype html><html><head></head></html>",
               "n.json": b'{"traceEvents": [], "otherData": {"generator": "cuda-sync-bench"}}', "README.md": b"x"}
    for name, content in {**made, **foreign}.items():
        (tmp_path / name).write_bytes(content)
    assert {name for name in {**made, **foreign} if writes.made_by_bench(tmp_path / name)} == set(made)


@pytest.mark.parametrize("writer", WRITERS, ids=lambda w: f"{w.command}{w.option}")
def test_a_file_there_is_replaced_only_where_the_writer_may(tmp_path, monkeypatch, writer):
    monkeypatch.chdir(tmp_path)
    suffix = writer.suffixes[0] if writer.suffixes != ("/",) else "/launch.png"  # plot --out: a figure in it
    target = tmp_path / "made" / f"out{suffix}"
    target.parent.mkdir(parents=True)
    target.write_text(FOREIGN)
    for force in (False, True):
        if writer.replaces is Replaces.NEVER or not force:
            with pytest.raises(writes.UsageError, match="never replaces a results file|bench did not write it"):
                writes.replaceable(target, writer, force)
        else:
            assert writes.replaceable(target, writer, force) == target
    assert target.read_text() == FOREIGN


# --- report, plot and trace's outputs, as a user meets them ---------------------------------------------------------

def test_report_never_replaces_what_it_did_not_write(results):
    (results / "README.md").write_text(FOREIGN)
    (results / "notes.html").write_text(FOREIGN)
    before = tree(results)
    assert_refused(bench("report", "r.parquet", "--out", "README.md", cwd=results),
                   "README.md is not a .html or .htm file")
    assert_refused(bench("report", "r.parquet", "--out", "notes.html", cwd=results),
            "notes.html exists and bench did not write it; bench replaces only its own files (--force replaces it)")
    assert tree(results) == before


def test_report_replaces_its_own_and_with_force_any_file(tmp_path, results):
    out = tmp_path / "elsewhere"
    out.mkdir()
    (out / "notes.html").write_text(FOREIGN)
    with blank_figures():
        done = bench("report", results / "r.parquet", "--out", out / "notes.html", "--force", cwd=tmp_path)
        assert done.returncode == 0 and writes.made_by_bench(out / "notes.html"), done.stderr
        again = bench("report", results / "r.parquet", "--out", out / "notes.html", cwd=tmp_path)
    assert again.returncode == 0 and again.stdout == f"wrote {out / 'notes.html'}\n", again.stderr


@pytest.mark.parametrize("out, fragment", [
    ("results/report.html", "results/ is a directory of results"),
    ("results/_x/report.html", "results/_x/ is a directory of results"),
    ("r.parquet", "r.parquet is not a .html or .htm file"),
    ("here/report.html", "here/ is a directory of results"),
    ("missing/deeper/report.html", "missing/ does not exist; bench makes no directory but its own"),
    ("/nonexistent-bench-dir/x/report.html", "/nonexistent-bench-dir/ does not exist"),
])
def test_a_report_never_goes_among_results_nor_makes_a_stranger_directory(results, out, fragment):
    (results / "results").mkdir()
    (results / "here").mkdir()
    synthetic.write(results / "here" / "h.parquet", synthetic.launch_records())
    before = tree(results)
    assert_refused(bench("report", "r.parquet", "here", "--out", out, cwd=results), fragment)
    assert tree(results) == before and not Path("/nonexistent-bench-dir").exists()


def test_plot_makes_only_the_directory_it_names_and_replaces_only_its_own_figures(results):
    before = tree(results)
    assert_refused(bench("plot", "r.parquet", "--out", "a/b", cwd=results),
                   "a/ does not exist; bench makes no directory but a/b/ and its own")
    assert_refused(bench("plot", "r.parquet", "--out", "results", cwd=results), "results/ is a directory of results")
    assert tree(results) == before
    with blank_figures():
        assert bench("plot", "r.parquet", "--out", "figures", cwd=results).returncode == 0
        drawn = sorted((results / "figures").iterdir())
        drawn[0].write_text(FOREIGN)
        assert_refused(bench("plot", "r.parquet", "--out", "figures", cwd=results), "bench did not write it")
        assert drawn[0].read_text() == FOREIGN
        assert bench("plot", "r.parquet", "--out", "figures", "--force", cwd=results).returncode == 0
    assert writes.made_by_bench(drawn[0])


def test_trace_outputs_follow_the_policy(tmp_path):
    rank = save([("ddp:step", traced(GPU0, GPU0_CALLS, rank=0))], synthetic.environment(),
                tmp_path / "_trace" / "rank0.parquet")
    (tmp_path / "t.json").write_text(FOREIGN)
    before = tree(tmp_path)
    for args, fragment in ((["--perfetto", "t.json"], "t.json exists and bench did not write it"),
                           (["--perfetto", rank], "is not a .json file"),
                           (["--plot", "t.parquet"], "is not a .png or .svg file"),
                           (["--save", "t.json"], "is not a .parquet file"),
                           (["--save", rank], "already exists; bench never replaces a results file"),
                           (["--save", "s.parquet", "--plot", "s.parquet"], "is not a .png or .svg file"),
                           (["--perfetto", "t2.json", "--plot", "no/such/dir/t.png"], "no/ does not exist")):
        assert_refused(bench("trace", "--merge", rank, *args, cwd=tmp_path), fragment)
    assert tree(tmp_path) == before
    done = bench("trace", "--merge", rank, "--perfetto", "t.json", "--force", cwd=tmp_path)
    assert done.returncode == 0 and writes.made_by_bench(tmp_path / "t.json"), done.stderr
    assert bench("trace", "--merge", rank, "--perfetto", "t.json", cwd=tmp_path).returncode == 0  # its own now


def test_the_python_api_keeps_the_policy_too(tmp_path):
    found = traced(GPU0, GPU0_CALLS, rank=0)
    (tmp_path / "mine.json").write_text(FOREIGN)
    with pytest.raises(writes.UsageError, match="bench did not write it"):
        found.to_perfetto(tmp_path / "mine.json")
    assert (tmp_path / "mine.json").read_text() == FOREIGN
    assert found.to_perfetto(tmp_path / "mine.json", force=True) == tmp_path / "mine.json"
    assert found.to_perfetto(tmp_path / "mine.json") == tmp_path / "mine.json"  # bench's own now


# --- what is read must be a regular file -----------------------------------------------------------------------------

def test_a_pipe_is_refused_unopened(tmp_path):
    os.mkfifo(tmp_path / "f.parquet")
    (tmp_path / "d").mkdir()
    os.mkfifo(tmp_path / "d" / "g.parquet")
    for command in ("report", "plot", "claims"):
        assert_refused(bench(command, "f.parquet", cwd=tmp_path, timeout=60),
                       "f.parquet: it is a pipe, not a regular file")
    done = bench("report", "d", cwd=tmp_path, timeout=60)
    assert done.returncode == 2 and "it is a pipe" in done.stderr and len(done.stderr.splitlines()) == 2
    assert_refused(bench("report", "d", "--strict", cwd=tmp_path, timeout=60), "d/g.parquet: it is a pipe")
    assert_refused(bench("compare", "f.parquet", "d", cwd=tmp_path, timeout=60), "it is a pipe")


# --- the docs' examples ----------------------------------------------------------------------------------------------

def test_the_docs_examples_write_where_git_ignores_or_results_belong():
    from test_docs import shown_commands

    ignored = (ROOT / "plots" / "local").resolve()
    wrong = []
    for where, words in shown_commands():
        for writer in WRITERS:
            if words[:1] != [writer.command] or writer.option not in words[:-1]:
                continue
            path = (ROOT / words[words.index(writer.option) + 1]).resolve()
            home = ignored if writer.replaces is Replaces.OWN else (ROOT / "results").resolve()
            if not (path == home or home in path.parents or ignored in path.parents):
                wrong.append(f"{where}: {writer.option} {path.relative_to(ROOT) if ROOT in path.parents else path}")
    assert not wrong, "examples that would leave files git does not ignore:\n" + "\n".join(wrong)


def test_plots_local_is_ignored_by_git():
    assert re.search(r"^/plots/local/$", (ROOT / ".gitignore").read_text(), re.MULTILINE)
