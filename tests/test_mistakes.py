"""Mistakes a user makes on the command line that bench once took silently or answered with a traceback: each is one
line on stderr, exit status 2, and nothing written. Run as a user runs bench: in a subprocess, without a GPU (the
CUDA libraries hidden, as after ``pip install -e .``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import synthetic
from commands import ROOT, assert_refused, bench
from paths import with_path

LONG = "n" * 300  # a name over the 255 bytes a file system takes


@pytest.fixture
def here(tmp_path) -> Path:
    synthetic.write(tmp_path / "r.parquet", synthetic.launch_records())
    for name in OWN:
        (tmp_path / name).write_text(OWN[name])
    return tmp_path


OWN = {"README.md": "# mine\n", "notes.txt": "not a results file\n"}  # the user's files, beside the results


def assert_one_line(done: subprocess.CompletedProcess, fragment: str, here: Path) -> None:
    assert_refused(done, fragment)
    assert sorted(path.name for path in here.iterdir()) == sorted([*OWN, "r.parquet"])  # nothing written
    assert all((here / name).read_text() == text for name, text in OWN.items())


@pytest.mark.parametrize("args", [
    ["report", f"{LONG}.parquet"], ["report", "r.parquet", "--out", f"{LONG}.html"], ["plot", f"{LONG}.parquet"],
    ["plot", "r.parquet", "--out", LONG], ["claims", f"{LONG}.parquet"], ["compare", f"{LONG}.parquet", "r.parquet"],
    ["compare", "r.parquet", "r.parquet", "--spread-from", LONG], ["sweep", "--list", "--out", f"{LONG}.parquet"],
    ["sweep", "--list", "--resume", f"{LONG}.parquet"], ["trace", "--merge", f"{LONG}.parquet"],
    ["syncs", "--save", f"{LONG}.parquet", "x.py"]], ids=lambda args: " ".join(args)[:40])
def test_a_name_too_long_is_one_line(here, args):
    assert_one_line(bench(*args, cwd=here, without_cuda=True), "file name too long: 30", here)


def test_a_target_too_long_is_one_line(here):
    assert_one_line(bench("syncs", f"{LONG}.py", cwd=here, without_cuda=True), "File name too long", here)


@pytest.mark.parametrize("args, fragment", [
    (["report", "--gpu", ""], "--gpu: an empty name chooses no GPU"),
    (["plot", "--gpu", " "], "--gpu: an empty name chooses no GPU"),
    (["claims", "--out", "X"], "--out: claims measures only with --measure"),
    (["claims", "r.parquet", "--device", "3"], "--device: claims measures only with --measure"),
    (["claims", "--measure", "--out", "no/such/dir/"], "--out: no/ does not exist"),
    (["sweep", "--list", "--one-at-a-time"], "--one-at-a-time runs several GPUs"),
    (["sweep", "--list", "--axis", "streams=1", "--axis", "streams=8"], "--axis streams is given twice"),
    (["sweep", "--list", "--experiments", "launch", "--sizes", "4K"], "launch takes no transfer size"),
    (["sweep", "--list", "--out", "README.md"], "--out: README.md is a file, not a directory nor a new .parquet file"),
    (["sweep", "--list", "--out", "/nonexistent-bench-dir/x.parquet"], "/nonexistent-bench-dir/ does not exist"),
    (["sweep", "--list", "--resume", "r.parquet", "--out", "new.parquet"], "--out and --resume"),
    (["compare", "r.parquet", "r.parquet", "--spread-from", "r.parquet", "notes.txt"], "--spread-from: cannot read"),
    (["trace", "--merge", "r.parquet", "--runs", "3"], "trace --merge takes no --runs"),
    (["trace", "--merge", "r.parquet", "--device", "1"], "trace --merge takes no --device"),
    (["sweep", "--list", "--experiments", ""], "--experiments '': name experiments"),
    (["sweep", "--list", "--experiments", "launch,"], "--experiments 'launch,': name experiments"),
    (["sweep", "--list", "--sizes", "99999999999999999999G"], "is over 1 TiB"),
    (["sweep", "--list", "--devices", "9"], "--devices 9: no GPU is visible here"),
    (["sweep", "--list", "--device", "3"], "--device 3: no GPU is visible here"),
    (["env", "--device", "7"], "--device 7: no GPU is visible here"),
    ([], "name a command: sweep,plot,claims"),
    (["report", "--out", ""], "an empty path names no file"),
])
def test_what_was_taken_silently_is_one_line(here, args, fragment):
    assert_one_line(bench(*args, cwd=here, without_cuda=True), fragment, here)


def test_what_needs_no_gpu_still_works_without_one(here):
    listed = bench("sweep", "--list", "--devices", "all", "--experiments", "launch", cwd=here, without_cuda=True)
    assert listed.returncode == 0 and "launch" in listed.stdout, listed.stderr
    shown = bench("env", cwd=here, without_cuda=True)
    assert shown.returncode == 0 and "none: " in shown.stdout, shown.stderr


# --- results files that say they are bench's and are not as bench writes them ----------------------------------------

def _rewritten(source: Path, path: Path, metadata: dict | None = None, pandas: bytes | None = None, **columns) -> Path:
    """``source``'s table with ``columns`` replaced and its bench (and pandas) metadata as given."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from bench.results import store

    table = pq.read_table(source)
    for name, values in columns.items():
        table = table.set_column(table.schema.get_field_index(name), name, pa.array(values))
    kept = dict(table.schema.metadata)
    if metadata is not None:
        kept[store.METADATA_KEY] = json.dumps(metadata).encode()
    if pandas is not None:
        kept[b"pandas"] = pandas
    pq.write_table(table.replace_schema_metadata(kept), path)
    return path


@pytest.mark.parametrize("change, fragment", [
    ({"metadata": [1, 2]}, "unreadable bench metadata"),
    ({"metadata": {"schema_version": "2"}}, "unreadable bench metadata"),
    ({"metadata": {"schema_version": 1}}, "a column is not as bench writes it"),
    ({"pandas": b"{not json"}, "cannot read results file bad.parquet"),
    ({"bytes": ["many"] * 3}, "a column is not as bench writes it"),
], ids=["a list", "a text version", "version 1", "pandas' metadata", "text for a number"])
def test_a_malformed_results_file_is_one_line(here, change, fragment):
    rows = synthetic.alloc_records()[:3]  # version 1's alloc rows held columns that today's have not
    synthetic.write(here / "good.parquet", rows)
    _rewritten(here / "good.parquet", here / "bad.parquet", **change)
    (here / "good.parquet").unlink()
    for command in (["plot", "bad.parquet"], ["compare", "r.parquet", "bad.parquet"]):  # each reader: store.read
        done = bench(*command, cwd=here, without_cuda=True)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and fragment in done.stderr, done.stderr
    (here / "bad.parquet").unlink()
    assert sorted(path.name for path in here.iterdir()) == sorted([*OWN, "r.parquet"])  # nothing written


def test_a_results_file_whose_name_is_not_utf8_reads(tmp_path):
    name = os.fsdecode(b"run-\xff\xfe.parquet")
    synthetic.write(tmp_path / name, synthetic.launch_records())
    done = bench("claims", name, "--format", "json", cwd=tmp_path, without_cuda=True)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


def test_a_tool_file_bench_cannot_read_is_passed_over_with_a_warning(here):
    (here / "runs").mkdir()
    synthetic.write(here / "runs" / "r.parquet", synthetic.launch_records())
    (here / "runs" / "_syncs").mkdir()
    (here / "runs" / "_syncs" / "junk.parquet").write_text("not parquet")
    done = bench("report", "runs", "--out", here / "elsewhere.html", cwd=here, without_cuda=True)
    assert done.returncode == 0 and done.stderr.startswith("bench: warning: skipped a file: "), done.stderr
    assert done.stderr.count("\n") == 1 and "junk.parquet" in done.stderr
    strict = bench("report", "runs", "--out", here / "strict.html", "--strict", cwd=here, without_cuda=True)
    assert strict.returncode == 2


def test_warnings_are_bench_lines_and_drawing_says_nothing(here):
    import pyarrow as pa
    import pyarrow.parquet as pq

    synthetic.write(here / "all.parquet", [{**row, "gpu_name": "GPU \x1b[31mred\x07"} for row in
                                           synthetic.all_records()])
    table, odd = pq.read_table(here / "all.parquet"), (0.0, float("inf"), float("nan"), -1.0, 1e308)
    for index, field in enumerate(table.schema):
        if pa.types.is_floating(field.type):
            table = table.set_column(index, field, pa.array([odd[i % 5] for i in range(len(table))], field.type))
    pq.write_table(table, here / "odd.parquet")
    for command in (["plot", "odd.parquet", "--out", "figures"], ["report", "odd.parquet", "--out", "o.html"]):
        done = bench(*command, cwd=here, without_cuda=True)
        assert done.returncode == 0, done.stderr
        assert all(line.startswith("bench: warning: ") for line in done.stderr.splitlines()), done.stderr
        assert "\x1b" not in done.stderr + done.stdout and "\x07" not in done.stderr + done.stdout


def test_the_figures_of_gpus_with_long_names_are_drawn(here):
    rows = [{**row, "gpu_name": "G" * 300, "gpu_uuid": uuid} for uuid in ("GPU-1111aaaa", "GPU-2222bbbb")
            for row in synthetic.launch_records()]
    synthetic.write(here / "two.parquet", rows)
    done = bench("plot", "two.parquet", "--out", "figures", cwd=here, without_cuda=True)
    assert done.returncode == 0 and len(list((here / "figures").iterdir())) == 2, done.stderr


def test_a_path_is_written_as_it_is_never_as_markup(here):
    done = bench("report", "r.parquet", "--out", "[red]x.html", cwd=here, without_cuda=True)
    assert done.returncode == 0 and done.stdout == "wrote [red]x.html\n", done.stderr


def test_env_shows_what_the_environment_holds_escaped(here):
    done = bench("env", cwd=here, BENCH_GIT_COMMIT="\x1b[31mX\x9b")
    assert done.returncode == 0 and "\\x1b[31mX\\x9b" in done.stdout and "\x1b" not in done.stdout, done.stdout


@pytest.mark.parametrize("redirect, status, said", [
    ("1>/dev/full", 2, "bench: error: cannot write the output: No space left on device\n"),
    ("1>&-", 0, ""), ("| true", 141, "")], ids=["full", "closed", "gone"])
def test_an_output_that_cannot_be_written_ends_in_one_line_at_most(here, redirect, status, said):
    env = {**os.environ, "PYTHONPATH": with_path(str(ROOT / "src"))}
    done = subprocess.run(["bash", "-c", f'"$@" {redirect}; echo "status ${{PIPESTATUS[0]}}" >&2', "bench",
                           sys.executable, "-m", "bench", "sweep", "--list"], cwd=here, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.stderr == f"{said}status {status}\n"
