"""plot, claims, compare and report from the command line, and the row selection under them: one GPU per line,
superseded runs left out, figures that do not change unless the results do, and every bad input one line on stderr
with exit status 2 and nothing written."""

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import synthetic
from blank_figures import blank_figures, texts
from bench import cli
from bench.analysis import selection, claims, plots
from bench.results import store
from bench.platform.errors import UsageError
from bench.experiments import registry
from paths import with_path

ROOT = Path(__file__).resolve().parents[1]
V1_TIMELINE = ROOT / "results" / "_superseded" / "20261121T145240Z-NVIDIA-H200.timeline.parquet"
GPU_B = {"gpu_uuid": "GPU-bbbbbbbb-0000-0000-0000-000000000000", "hostname": "node-b"}
GPU_C = {"gpu_uuid": "GPU-cccccccc-0000-0000-0000-000000000000", "hostname": "node-c"}
LOCKED = "/proc/bench-locked" if os.geteuid() == 0 else "locked"  # root writes anywhere chmod allows nothing


def experiment(name: str, **changes) -> list[dict]:
    return synthetic.tagged([row for row in synthetic.all_records() if row["experiment"] == name], **changes)


def names(directory: Path) -> list[str]:
    return sorted(str(path.relative_to(directory)) for path in directory.rglob("*"))


# --- choosing rows ---------------------------------------------------------------------------------------------

def test_newest_keeps_the_newest_measurement_of_each_configuration_per_gpu():
    launch = experiment("launch")
    rows = synthetic.frame(launch + [{**row, "run_id": "20261122T000000Z"} for row in launch[:2]]
                           + synthetic.tagged(launch, **GPU_B))
    kept = selection.newest(rows, registry())
    assert sorted(zip(kept["hostname"], kept["path"], kept["run_id"])) == sorted(
        [("node-a", "dispatcher", "20261122T000000Z"), ("node-a", "precompiled", "20261122T000000Z"),
         ("node-a", "graph", synthetic.RUN_ID)] + [("node-b", path, synthetic.RUN_ID) for path in
                                                   ("dispatcher", "precompiled", "graph")])


def test_gpus_are_told_apart_by_host_and_uuid_and_gpu_picks_one():
    rows = synthetic.frame(experiment("launch") + experiment("launch", **GPU_B)
                           + experiment("launch", gpu_name="Other GPU", **GPU_C))
    found = selection.gpus(rows)
    assert [(gpu.host, gpu.short) for gpu in found] == [
        ("node-a", "Test GPU 00000000"), ("node-b", "Test GPU bbbbbbbb"), ("node-c", "Other GPU cccccccc")]
    assert [len(mine) for _, mine in selection.by_gpu(rows)] == [3, 3, 3]
    for wanted in ("bbbb", "GPU-bbbbbbbb", "node-b"):
        assert set(selection.select_gpu(rows, wanted)["hostname"]) == {"node-b"}
    assert set(selection.select_gpu(rows, "other gpu")["hostname"]) == {"node-c"}
    assert selection.select_gpu(rows, None) is rows
    with pytest.raises(UsageError, match="--gpu Test GPU: matches 2 GPUs"):
        selection.select_gpu(rows, "Test GPU")
    with pytest.raises(UsageError, match="--gpu dddd: no such GPU in the results \\(they hold: Test GPU"):
        selection.select_gpu(rows, "dddd")


# --- bad input -------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Good, empty, foreign, newer, unrelated and side-table files, and things that are in the way of an output: made
    once for the module, for no command given them writes anything (each test of bad input checks that)."""
    tmp_path = tmp_path_factory.mktemp("inputs")
    good = synthetic.write(tmp_path / "good.parquet", experiment("launch"))
    synthetic.write(tmp_path / "copies.parquet", experiment("bandwidth"))
    synthetic.write(tmp_path / "empty.parquet", [])
    synthetic.write(tmp_path / "twins" / "a.parquet", experiment("launch"))
    synthetic.write(tmp_path / "twins" / "b.parquet", experiment("launch", **GPU_B))
    timeline = synthetic.overlap_timeline_records(synthetic.overlap_records())[:5]
    store.write(store.side_table_path(good, "timeline"), timeline, store.table_schema("timeline", registry()),
                {"run_id": synthetic.RUN_ID, "table": "timeline"})
    (tmp_path / "old.timeline.parquet").write_bytes(V1_TIMELINE.read_bytes())
    store.write(tmp_path / "stamped.parquet", [{"a": 1}], pa.schema([pa.field("a", pa.int64())]), {"run_id": "x"})
    pq.write_table(pa.table({"a": [1]}), tmp_path / "foreign.parquet")
    newer = pa.table({"a": [1]}).replace_schema_metadata({b"bench": json.dumps({"schema_version": 99})})
    pq.write_table(newer, tmp_path / "newer.parquet")
    (tmp_path / "notes.parquet").write_text("not parquet")
    (tmp_path / "afile").write_text("in the way")
    (tmp_path / "adir").mkdir()
    (tmp_path / "emptydir").mkdir()
    if LOCKED == "locked":
        (tmp_path / "locked").mkdir(mode=0o500)
    os.mkfifo(tmp_path / "fifo.html")  # a pipe: a write must never replace it (nor a device, such as /dev/full)
    (tmp_path / "piped.html").symlink_to("fifo.html")
    return tmp_path


@pytest.mark.parametrize("args, fragment", [
    (["plot", "good.parquet", "--out", "afile"], "--out: afile is a file, not a directory"),
    (["plot", "good.parquet", "--out", "afile/plots"], "--out: afile is a file, not a directory"),
    (["plot", "good.parquet", "--out", LOCKED], "--out: cannot write to"),
    (["report", "good.parquet", "--out", "adir"], "--out: adir is a directory"),
    (["report", "good.parquet", "--out", "afile/report.html"], "--out: afile is a file, not a directory"),
    (["report", "good.parquet", "--out", f"{LOCKED}/report.html" if LOCKED == "locked" else "/proc/report.html"],
     "--out: cannot write to"),
    (["report", "good.parquet", "--out", "fifo.html"], "--out: fifo.html is a pipe, not a regular file"),
    (["report", "good.parquet", "--out", "piped.html"], "--out: piped.html is a symlink (to fifo.html)"),
    (["plot", "good.parquet", "--out", "fifo.html"], "--out: fifo.html is a pipe, not a directory"),
    (["plot", "_timeline/good.parquet"], "is the side table 'timeline' of a results file"),
    (["report", "_timeline/good.parquet"], "is the side table 'timeline' of a results file"),
    (["plot", "old.timeline.parquet"], "is the side table 'timeline' of a results file"),
    (["report", "old.timeline.parquet"], "is the side table 'timeline' of a results file"),
    (["compare", "good.parquet", "old.timeline.parquet"], "is the side table 'timeline' of a results file"),
    (["plot", "stamped.parquet"], "stamped.parquet holds no bench result rows"),
    (["report", "stamped.parquet"], "stamped.parquet holds no bench result rows"),
    (["claims", "stamped.parquet"], "stamped.parquet holds no bench result rows"),
    (["compare", "stamped.parquet", "good.parquet"], "stamped.parquet holds no bench result rows"),
    (["plot", "foreign.parquet"], "foreign.parquet is not a bench results file"),
    (["report", "newer.parquet"], "newer.parquet has schema version 99"),
    (["compare", "good.parquet", "notes.parquet"], "cannot read results file notes.parquet"),
    (["plot", "notes.parquet"], "cannot read results file notes.parquet"),  # named itself: never skipped
    (["plot", "empty.parquet"], "empty.parquet holds no result rows"),
    (["report", "empty.parquet"], "empty.parquet holds no result rows"),
    (["claims", "empty.parquet"], "empty.parquet holds no result rows"),
    (["compare", "good.parquet", "empty.parquet"], "empty.parquet holds no result rows"),
    (["compare", "empty.parquet", "good.parquet"], "empty.parquet holds no result rows"),
    (["compare", "good.parquet", "copies.parquet"], "good.parquet and copies.parquet have no configuration in "
                                                    "common"),
    (["compare", "good.parquet", "good.parquet", "--fail-above", "nan"], "'nan' is not a positive finite number"),
    (["compare", "good.parquet", "good.parquet", "--fail-above", "inf"], "'inf' is not a positive finite number"),
    (["compare", "good.parquet", "good.parquet", "--fail-above", "0"], "'0' is not a positive finite number"),
    (["compare", "good.parquet", "good.parquet", "--fail-above=-5"], "'-5' is not a positive finite number"),
    (["compare", "good.parquet", "good.parquet", "--fail-above", "lots"], "'lots' is not a number"),
    (["compare", "good.parquet"], "the following arguments are required: new"),
    (["compare", "good.parquet", "twins", "--gpu", "node-b"], "old results: --gpu node-b: no such GPU"),
    (["compare", "good.parquet", "good.parquet", "--spread-from", "nowhere"], "--spread-from: cannot read results file nowhere: no such file"),
    (["report", "twins", "--gpu", "Test GPU"], "--gpu Test GPU: matches 2 GPUs"),
    (["plot", "good.parquet", "--gpu", "dddd"], "--gpu dddd: no such GPU in the results"),
    (["claims", "twins", "--gpu", "dddd"], "--gpu dddd: no such GPU in the results"),
    (["report", "emptydir"], "no results files (*.parquet) under emptydir/"),
    (["plot"], "no results files (*.parquet) in results/"),
    (["report"], "cannot read results file results: no such file or directory"),
    (["claims", "missing.parquet"], "cannot read results file missing.parquet: no such file or directory"),
])
def test_bad_input_is_one_line_and_exit_2_and_nothing_written(inputs, args, fragment, run):
    before = names(inputs)
    result = run(*args, cwd=inputs)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bench: error: ") and fragment in lines[0], result.stderr
    assert result.stdout == ""  # no warnings, no partial output before the error
    assert names(inputs) == before and not Path(LOCKED).exists()


FAILING_FAST = [["plot", "good.parquet", "--out", "afile"], ["plot", "good.parquet", "--gpu", "dddd"],
                ["claims", "twins", "--gpu", "dddd"], ["compare", "good.parquet", "copies.parquet"]]
REPEATS = 4  # the race was rare
FORKED = """
import gc, json, os, sys
from bench import cli
from bench.cli import results  # what python -m bench imports for these commands, imported once

gc.freeze()  # as a fork server does: no child's collections touch (and so copy) the objects it was forked with
ends = []
for args in json.loads(sys.argv[1]):
    sys.stdout.flush(); sys.stderr.flush()
    child = os.fork()
    if child == 0:  # a process of its own: it runs the command and exits as python -m bench does
        sys.argv = ["bench", *args]
        raise SystemExit(cli.main(args))
    ends.append(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))
print(json.dumps(ends))
"""


def test_a_command_that_fails_fast_never_ends_by_a_signal(inputs):
    """Each of FAILING_FAST reads results (pyarrow's thread pools read the file), then stops at once. A pool worker
    that dropped a NumPy-backed buffer after the interpreter began to exit used to abort it (SIGABRT, 'terminate
    called without an active exception': about 1 run in 100); bench.cli.main now lets the pools go idle first. Each
    runs REPEATS times (the race was rare), each run a process of its own that ends as ``python -m bench`` does (its
    interpreter finalizes). The processes fork from one interpreter that imported bench's command line once (a
    second each, not sixteen): the race is in the interpreter's exit, after the command's work, which each process
    does itself. One test, not one per command: the runs are made once, on one pytest worker."""
    commands = [args for args in FAILING_FAST for _ in range(REPEATS)]
    env = {**os.environ, "PYTHONPATH": with_path(str(ROOT / "src")), "COLUMNS": "100"}
    done = subprocess.run([sys.executable, "-c", FORKED, json.dumps(commands)], cwd=inputs, env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    ends = json.loads(done.stdout.splitlines()[-1])
    found = {" ".join(args): ends[index * REPEATS:(index + 1) * REPEATS] for index, args in enumerate(FAILING_FAST)}
    assert found == {" ".join(args): [2] * REPEATS for args in FAILING_FAST}  # negative: ended by that signal


# --- what the commands do --------------------------------------------------------------------------------------

def test_plot_draws_one_set_of_figures_per_gpu_and_gpu_picks_one(tmp_path, run, monkeypatch):
    synthetic.write(tmp_path / "fleet" / "a.parquet", experiment("launch") + experiment("latency"))  # quick to draw
    synthetic.write(tmp_path / "fleet" / "b.parquet", experiment("launch", **GPU_B))
    monkeypatch.setattr(plots, "render", texts)  # the files, and whose figures they are, count
    result = run("plot", "fleet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert names(tmp_path / "plots" / "local") == sorted([
        "Test-GPU-00000000", "Test-GPU-00000000/latency.png", "Test-GPU-00000000/latency.svg",
        "Test-GPU-00000000/launch.png", "Test-GPU-00000000/launch.svg", "Test-GPU-bbbbbbbb",
        "Test-GPU-bbbbbbbb/launch.png", "Test-GPU-bbbbbbbb/launch.svg"])
    result = run("plot", "fleet", "--gpu", "node-b", "--out", "b", cwd=tmp_path)
    assert result.returncode == 0 and names(tmp_path / "b") == ["launch.png", "launch.svg"], result.stderr
    assert "Test GPU (GPU-bbbbbbbb)" in (tmp_path / "b" / "launch.svg").read_text()


def test_overlap_runs_of_two_payloads_get_a_set_of_figures_each(tmp_path, run, monkeypatch):
    larger = [{**row, "total_bytes": 1 << 30} for row in experiment("overlap", run_id="20261122T000000Z")]
    synthetic.write(tmp_path / "r.parquet", experiment("overlap") + larger)
    monkeypatch.setattr(plots, "render", lambda figure, fmt, dpi=plots.DPI: fmt.encode())  # the files' names count
    result = run("plot", "r.parquet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert names(tmp_path / "plots" / "local") == sorted(
        f"overlap_{kind}-{size}.{ext}" for kind in ("scaling", "heatmap") for size in ("256MiB", "1GiB")
        for ext in ("png", "svg"))


def test_replotting_unchanged_results_leaves_every_file_alone(tmp_path, run):
    rows = [row for row in synthetic.all_records() if row["experiment"] in ("latency", "launch")]  # quick to draw
    synthetic.write(tmp_path / "r.parquet", rows)
    assert run("plot", "r.parquet", cwd=tmp_path).returncode == 0
    files = sorted((tmp_path / "plots" / "local").iterdir())
    assert len(files) == 4 and not any(b"<dc:date>" in path.read_bytes() for path in files)
    for path in files:
        os.utime(path, ns=(1_000_000_000, 1_000_000_000))  # as if written long ago
    before = {path.name: path.read_bytes() for path in files}
    assert run("plot", "r.parquet", cwd=tmp_path).returncode == 0
    assert sorted((tmp_path / "plots" / "local").iterdir()) == files
    assert {path.name: path.read_bytes() for path in files} == before
    assert {path.stat().st_mtime_ns for path in files} == {1_000_000_000}


def test_superseded_runs_are_left_out_unless_named(tmp_path, run):
    synthetic.write(tmp_path / "results" / "20261121T000000Z-Test-GPU.parquet", experiment("launch"))
    superseded = tmp_path / "results" / "_superseded" / "20261120T000000Z-Test-GPU.parquet"
    synthetic.write(superseded, experiment("launch", run_id="20261120T000000Z", **GPU_C))
    assert [gpu.host for gpu in selection.gpus(store.read_any(tmp_path / "results", synthetic.suite()))] == ["node-a"]
    with blank_figures():  # which runs each command reads is tested
        result = run("report", cwd=tmp_path)
        assert result.returncode == 0 and result.stdout == "wrote plots/local/report.html\n", result.stderr
        document = (tmp_path / "plots" / "local" / "report.html").read_text()
        assert synthetic.RUN_ID in document and "20261120T000000Z" not in document and "node-c" not in document
        result = run("report", "results", "results/_superseded", "--out", "all.html", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert "20261120T000000Z" in (tmp_path / "all.html").read_text()
        result = run("compare", "results/_superseded", "results", cwd=tmp_path)
        assert result.returncode == 0 and "different GPUs" in result.stderr and "3 same" in result.stdout
        assert run("plot", cwd=tmp_path).returncode == 0  # the newest file directly in results/
    assert names(tmp_path / "plots" / "local") == ["launch.png", "launch.svg", "report.html"]


def test_claims_of_a_directory_judge_each_gpu_on_its_own(tmp_path, run):
    everything = synthetic.all_records()
    synthetic.write(tmp_path / "fleet" / "a.parquet", everything)
    cudafree_returns = [{**row, "verdict": "returns", "host_ms": 0.004}
                        if row["experiment"] == "blocking" and row["call"] == "cudaFree" else row
                        for row in synthetic.tagged(everything, **GPU_B)]
    synthetic.write(tmp_path / "fleet" / "b.parquet", cudafree_returns)
    result = run("claims", "fleet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.split("CUDA claims against measurement on Test GPU GPU-bbbbbbbb")
    assert "CUDA claims against measurement on Test GPU GPU-00000000" in first
    assert "cudaFree waits for running kernels: HOLDS" in first
    assert "cudaFree waits for running kernels: BUSTED" in second
    assert "measuring" not in result.stdout and names(tmp_path) == ["fleet", "fleet/a.parquet", "fleet/b.parquet"]


def test_claims_judge_what_the_results_hold_and_say_how_to_measure_the_rest(tmp_path, run):
    synthetic.write(tmp_path / "r.parquet", experiment("blocking"))
    result = run("claims", "r.parquet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (warning,) = result.stderr.splitlines()  # one line: what is missing, and how to measure it
    assert warning.startswith("bench: warning: the results lack graphs, ") and "library" in warning
    assert warning.endswith("measure them on this machine's GPU with: python -m bench claims r.parquet --measure")
    assert "cudaFree waits for running kernels: HOLDS" in result.stdout  # judged from what the results hold
    assert "cudaMallocAsync is cheaper than cudaMalloc in a loop: NOT MEASURED" in result.stdout
    assert "measuring" not in result.stdout and names(tmp_path) == ["r.parquet"]  # never measures unasked
    document = json.loads(run("claims", "r.parquet", "--format", "json", cwd=tmp_path).stdout)
    (gpu,) = document["gpus"]
    verdicts = {claim["claim"]: claim["verdict"] for claim in gpu["claims"]}
    assert verdicts["cudaFree waits for running kernels"] == "holds"
    assert verdicts["cudaMallocAsync is cheaper than cudaMalloc in a loop"] == "not measured"
    assert "graphs" in document["not_measured"] and gpu["gpu"].startswith("Test GPU GPU-00000000")
    markdown = run("claims", "r.parquet", "--format", "markdown", cwd=tmp_path).stdout
    assert markdown.startswith("## CUDA claims against measurement on Test GPU GPU-00000000")
    assert "| claim | verdict | the documentation | measured |" in markdown
    assert "| cudaFree waits for running kernels | **holds** | silent ([docs](https://" in markdown


# --- files bench cannot read, and where it writes ----------------------------------------------------------------

TORN = "results/20261123T000000Z-Test-GPU.parquet"  # the newest file: half of one
TORN_SIDE = "results/_timeline/20261122T000000Z-Test-GPU.parquet"


@pytest.fixture
def torn(tmp_path):
    """results/ with two good runs, a torn newest file and a torn side table of the newest good run. The first run
    holds the experiments the claims judge (so that claims has nothing else to warn of), the second launch."""
    claimed = [row for row in synthetic.all_records() if row["experiment"] in claims.needed_experiments()]
    synthetic.write(tmp_path / "results" / "20261121T000000Z-Test-GPU.parquet", claimed)
    good = synthetic.write(tmp_path / "results" / "20261122T000000Z-Test-GPU.parquet",
                           experiment("launch", run_id="20261122T000000Z"))
    (tmp_path / TORN).write_bytes(b"PAR1 half a file")
    store.side_table_path(good, "timeline").parent.mkdir()
    (tmp_path / TORN_SIDE).write_bytes(b"PAR1 torn")
    return tmp_path


@pytest.mark.parametrize("args, skipped", [
    (["plot"], [TORN, TORN_SIDE]),  # the newest file bench can read, and its side tables
    (["report"], [TORN, TORN_SIDE]),
    (["claims", "results"], [TORN]),
    (["compare", "results", "results"], [TORN, TORN]),
])
def test_a_file_bench_cannot_read_is_skipped_with_a_warning_unless_strict(torn, args, skipped, run):
    with blank_figures():  # what is read and said is tested
        result = run(*args, cwd=torn)
    assert result.returncode == 0, result.stderr
    warnings = result.stderr.splitlines()
    assert [line.split("cannot read results file ")[1].split(":")[0] for line in warnings] == skipped, warnings
    assert all(line.startswith("bench: warning: skipped a file: cannot read results file ") and "Parquet" in line
               and line.endswith(" (--strict stops instead)") for line in warnings), warnings
    before = names(torn)
    result = run(*args, "--strict", cwd=torn)
    assert result.returncode == 2 and result.stdout == "" and names(torn) == before
    assert result.stderr.startswith(f"bench: error: cannot read results file {skipped[0]}: ")
    assert len(result.stderr.splitlines()) == 1, result.stderr


def test_a_full_disk_leaves_the_old_report(tmp_path, monkeypatch, capsys):
    synthetic.write(tmp_path / "r.parquet", experiment("launch"))
    (tmp_path / "report.html").write_text("the old report")
    monkeypatch.chdir(tmp_path)

    def full(descriptor):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with blank_figures():  # the write is what fails
        assert cli.main(["report", "r.parquet", "--out", "report.html", "--force"]) == 2  # not bench's: force
    assert capsys.readouterr().err == "bench: error: cannot write report.html: No space left on device\n"
    assert names(tmp_path) == ["r.parquet", "report.html"]
    assert (tmp_path / "report.html").read_text() == "the old report"
