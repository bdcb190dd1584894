"""The sweep without a GPU: a fake GPU and fake experiments (tests/fake_experiments.py) through the real runner,
isolated in child processes or inline: faults, interruption, schema checks, side tables, checks before anything is
written, resume."""

import dataclasses
import io
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rich.console import Console

import disks
import synthetic
from bench.platform import env
from bench.results import store, writes
from bench.cli import measuring
from bench.experiments import Processes
from bench.platform.errors import ResultsError, UsageError, WriteError
from bench.sweep import loop, preflight, processes
from bench.sweep import plan as planning
from bench.sweep.loop import Outcome, Runner
from bench.sweep.plan import Planned, Request
from bench.sweep.processes import DoneMessage, FailedMessage, RowMessage
from fake_experiments import (BAD_ROWS, BRACKETED, BRACKETED_ERROR, CAPPED, CRASHING, FINE, HUNGRY, INTERRUPTED,
                              INTERRUPTED_AT_ONCE, MEMORY_ERROR, OUT_OF_MEMORY, PER_MODE, RULES, STICKY,
                              STICKY_ERROR, TABLED)
from fake_gpu import FakeGpu
from paths import with_path

SRC = str(Path(__file__).resolve().parents[1] / "src")
TESTS = str(Path(__file__).resolve().parent)


class Recorder(loop.Reporter):
    def __init__(self):
        self.events = []

    def planned(self, plans, estimate_s, least_s):
        self.events.append(("planned", [item.experiment.name for item in plans], estimate_s))

    def started(self, experiment):
        self.events.append(("started", experiment))

    def row(self, plan, row, seconds_planned):
        self.events.append(("row", plan.experiment.name, row["status"], seconds_planned))

    def stopped(self, plan, why, seconds_planned):
        self.events.append(("stopped", plan.experiment.name, why, seconds_planned))

    def finished(self, experiment, wall_s):
        self.events.append(("finished", experiment))


def _plans(*experiments, mode="default"):
    return [planning.Plan(item, planning.expand(item.axes), planning.rules_for(item, mode)) for item in experiments]


def _runner(path, *experiments, isolate=True, gpu=None, reporter=None, mode="default", **request):
    """A runner, and what its plan step would answer were ``experiments`` the registry (on ``--device``)."""
    subject = Runner(Request(out=Path(path), mode=mode, **request), reporter, gpu=gpu or FakeGpu(), isolate=isolate,
                     save_every_s=0.0)
    return subject, Planned(_plans(*experiments, mode=mode), (subject.request.device,))


def _check(path, *experiments, **options):
    subject, planned = _runner(path, *experiments, **options)
    return subject, subject.check(planned)


def _sweep(path, *experiments, monitor=lambda: {}, **options):
    """What the checks established, and the run's outcome."""
    subject, checked = _check(path, *experiments, **options)
    return checked, subject.run(checked, monitor=monitor)


# --- fault isolation --------------------------------------------------------------------------------------------


def test_a_failing_experiment_loses_no_other_rows(tmp_path):
    path = tmp_path / "r.parquet"
    reporter = Recorder()
    checked, outcome = _sweep(path, CRASHING, STICKY, OUT_OF_MEMORY, FINE, reporter=reporter)
    assert isinstance(outcome, Outcome) and outcome.path == path and not outcome.interrupted
    assert outcome.planned == 20 and len(outcome.rows) == 20 and set(outcome.wall_s) == {
        "crashing", "sticky", "out-of-memory", "fine"}
    rows = store.read(path, synthetic.suite())
    metadata = store.read_metadata(path)
    assert len(rows) == 20 and metadata["complete"] is True and metadata["planned"] == 20
    assert metadata["schema_version"] == 2 and metadata["run_id"] == checked.run_id
    assert metadata["environment"]["gpu_uuid"] == "GPU-fake" and metadata["mode"] == "default"
    assert metadata["stop_rules"]["fine"]["default"]["min_samples"] == 10
    by = {name: group.reset_index(drop=True) for name, group in rows.groupby("experiment")}
    assert list(by["fine"]["status"]) == ["ok"] * 5  # after three broken experiments, untouched
    assert list(by["fine"]["n"]) == [0, 1, 2, 3, 4] and list(by["fine"]["n_samples"]) == [3] * 5
    assert list(by["fine"]["floor_met"]) == [False] * 5  # 3 samples, 10% apart: below the default floor, and says so
    assert metadata["floors"]["fine"] == {"min_samples": 10, "interval": 0.01}
    for name in ("crashing", "sticky"):
        assert list(by[name]["status"]) == ["ok", "ok", "failed", "failed", "failed"]
        assert list(by[name]["n"]) == [0, 1, 2, 3, 4]
    assert all("exit code 3" in error and "not measured" in error for error in by["crashing"]["error"][2:])
    assert all("cudaErrorIllegalAddress" in error for error in by["sticky"]["error"][2:])
    assert list(by["out-of-memory"]["status"]) == ["ok"] + ["skipped"] * 4
    assert all("out of memory" in error for error in by["out-of-memory"]["error"][1:])
    assert set(rows["gpu_name"]) == {"Fake GPU"} and set(rows["run_id"]) == {checked.run_id}
    assert rows["wall_s"].notna().all() and (rows["wall_s"] >= 0).all()
    stopped = [event for event in reporter.events if event[0] == "stopped"]
    assert [event[1] for event in stopped] == ["crashing", "sticky", "out-of-memory"]
    assert stopped[0][3] == pytest.approx(3 * 0.01)  # the time planned for what was left unmeasured


def test_a_process_axis_runs_each_value_in_a_process_of_its_own(tmp_path):
    """Each value of the experiment's process_axis gets its own process, set up by the hook before anything else;
    one part's crash ends that part only."""
    (item,) = _plans(PER_MODE)
    assert [len(part.configs) for part in item.parts()] == [2, 2, 2]
    assert item.estimate_s == pytest.approx(3 * planning.PROCESS_S + 6 * 0.01)
    path = tmp_path / "r.parquet"
    _, outcome = _sweep(path, PER_MODE)
    rows = store.read(path, synthetic.suite())
    assert list(rows["mode"]) == ["a", "a", "b", "b", "c", "c"]
    assert list(rows["status"]) == ["ok", "ok", "ok", "failed", "ok", "ok"]
    assert "exit code 5" in rows["error"][3]
    notes = [note for note in rows["note"] if isinstance(note, str)]
    assert [note.split(":")[0] for note in notes] == ["a", "a", "b", "c", "c"]
    assert len({note.split(":")[1] for note in notes}) == 3  # three processes
    assert outcome.startup_s["per-mode"] > 0


def _measured(messages):
    """Rows and failures (a process may also say when it is ready)."""
    return [message for message in messages if isinstance(message, (RowMessage, FailedMessage))]


def test_isolated_messages(tmp_path):
    (crashing,) = _plans(CRASHING)
    messages = _measured(processes.isolated(crashing, None))
    assert [type(message) for message in messages] == [RowMessage, RowMessage, FailedMessage]
    assert messages[0].row["n"] == 0 and messages[-1].why.startswith("the crashing process ended (exit code 3)")
    (sticky,) = _plans(STICKY)
    messages = _measured(processes.isolated(sticky, None))
    assert messages[-1] == FailedMessage(f"RuntimeError: {STICKY_ERROR}")
    (fine,) = _plans(FINE)
    assert [message.row["n"] for message in _measured(processes.isolated(fine, None))] == [0, 1, 2, 3, 4]
    assert [message.row["n"] for message in _measured(processes.inline(fine))] == [0, 1, 2, 3, 4]
    assert DoneMessage() == DoneMessage()


def test_a_dead_process_is_noticed_while_its_pipe_is_still_open(tmp_path):
    from fake_experiments import experiment, orphaning_rows

    # its leftover holds the pipe until the test lets it go (or 30 s); the folder travels with the experiment
    (item,) = _plans(experiment("orphaning", partial(orphaning_rows, folder=str(tmp_path))))
    messages, open_still = [], []
    for message in _measured(processes.isolated(item, None)):
        messages.append(message)
        if isinstance(message, FailedMessage):  # heard while the leftover still held the pipe: an order, no clock
            open_still.append(not (tmp_path / "timed-out").exists())
            (tmp_path / "released").touch()
    assert [type(message) for message in messages] == [RowMessage, FailedMessage]
    assert messages[-1].why == "the orphaning process ended (exit code 4)"
    assert open_still == [True]


def test_not_run_rows_are_failed_or_skipped_for_memory():
    (item,) = _plans(FINE)
    received = {planning.config_key("fine", {"n": n}, ["n"]) for n in (0, 1)}
    failed = loop.not_run(item, received, "RuntimeError: device lost")
    assert [row["n"] for row in failed] == [2, 3, 4] and {row["status"] for row in failed} == {"failed"}
    assert failed[0]["error"] == "not measured: the fine experiment stopped: RuntimeError: device lost"
    for why in (MEMORY_ERROR, "cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 1 GiB",
                "CUDARuntimeError: cudaErrorMemoryAllocation"):
        skipped = loop.not_run(item, set(), why)
        assert len(skipped) == 5 and {row["status"] for row in skipped} == {"skipped"}
        assert skipped[0]["error"].startswith("skipped: the fine experiment stopped")


def test_inline_errors_propagate_after_saving_what_finished(tmp_path):
    path = tmp_path / "r.parquet"
    subject, checked = _check(path, STICKY, isolate=False)
    with pytest.raises(RuntimeError, match="cudaErrorIllegalAddress"):
        subject.run(checked, monitor=lambda: {})
    rows = store.read(path, synthetic.suite())
    assert list(rows["n"]) == [0, 1] and (rows["status"] == "ok").all()
    assert store.read_metadata(path)["complete"] is False


def test_an_interrupt_keeps_finished_rows_and_says_where(tmp_path):
    path = tmp_path / "r.parquet"
    checked, outcome = _sweep(path, FINE, INTERRUPTED, dataclasses.replace(FINE, name="after"),
                              isolate=False)
    assert outcome.interrupted and outcome.signal == signal.SIGINT and outcome.stopped_in == "interrupted"
    assert outcome.planned == 15 and len(outcome.rows) == 7 and outcome.path == path
    assert measuring.exit_status(outcome) == 130
    rows = store.read(path, synthetic.suite())
    assert list(rows["experiment"]) == ["fine"] * 5 + ["interrupted"] * 2
    assert store.read_metadata(path)["complete"] is False


def test_a_sweep_that_finishes_nothing_writes_nothing(tmp_path):
    path = tmp_path / "r.parquet"
    _, outcome = _sweep(path, INTERRUPTED_AT_ONCE, isolate=False)
    assert outcome.interrupted and outcome.path is None and outcome.rows == []
    assert list(tmp_path.iterdir()) == []


SIGTERM_SCRIPT = """
import sys
from pathlib import Path
from bench.cli import measuring
from bench.experiments import Processes
from bench.sweep import plan as planning
from bench.sweep.loop import Runner
from fake_experiments import SLOW
from fake_gpu import FakeGpu
subject = Runner(planning.Request(out=Path(sys.argv[1])), gpu=FakeGpu(), save_every_s=0.0)
checked = subject.check(planning.Planned([planning.Plan(SLOW, planning.expand(SLOW.axes),
                                                        planning.rules_for(SLOW, "default"))]))
outcome = subject.run(checked, monitor=lambda: {})
print("stopped in", outcome.stopped_in, len(outcome.rows), outcome.signal, outcome.interrupted)
sys.exit(measuring.exit_status(outcome))
"""


def test_sigterm_keeps_finished_rows_and_says_where(tmp_path):
    path = tmp_path / "r.parquet"
    environment = {**os.environ, "PYTHONPATH": with_path(os.pathsep.join([SRC, TESTS]))}
    child = subprocess.Popen([sys.executable, "-c", SIGTERM_SCRIPT, str(path)], env=environment,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not path.exists() and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.02)
        child.send_signal(signal.SIGTERM)
        stdout, stderr = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 128 + signal.SIGTERM, stderr
    stopped = stdout.split()
    assert stopped[:3] == ["stopped", "in", "slow"] and stopped[4:] == ["15", "True"], stdout
    rows = store.read(path, synthetic.suite())
    assert 1 <= len(rows) < 5 and int(stopped[3]) == len(rows) and (rows["status"] == "ok").all()
    assert store.read_metadata(path)["complete"] is False


# --- what a sweep keeps ------------------------------------------------------------------------------------------


def test_rows_that_do_not_fit_the_schema_become_failed_rows(tmp_path):
    path = tmp_path / "r.parquet"
    _, outcome = _sweep(path, BAD_ROWS, isolate=False)
    rows = store.read(path, synthetic.suite())
    assert list(rows["status"]) == ["ok", "failed", "ok", "failed", "ok"]
    assert "row does not fit the schema" in rows["error"][1] and "'count'" in rows["error"][1]
    assert "'undeclared' is not declared" in rows["error"][3]
    assert list(rows["n"]) == [0, 1, 2, 3, 4] and rows["run_id"].notna().all() and rows["gpu_name"].notna().all()
    assert "undeclared" not in rows.columns and pd.isna(rows["count"][1])
    assert store.read_metadata(path)["complete"] is True


def test_side_tables_are_written_beside_the_results(tmp_path):
    path = tmp_path / "20261121T000000Z-Fake-GPU.parquet"
    checked, outcome = _sweep(path, TABLED)
    rows = store.read(path, synthetic.suite())
    assert len(rows) == 2 and not [column for column in rows.columns if column.startswith("_")]
    side = store.side_table_path(path, "timeline")
    assert side == tmp_path / "_timeline" / path.name and side.is_file()
    assert store.read_metadata(side)["table"] == "timeline"
    tables = store.side_tables(path)
    assert list(tables) == ["timeline"]
    timeline = tables["timeline"]
    assert list(timeline["streams"]) == [1, 2] and set(timeline["experiment"]) == {"tabled"}
    assert set(timeline["run_id"]) == {checked.run_id} and list(timeline["op"]) == ["H2D", "H2D"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["20261121T000000Z-Fake-GPU.parquet", "_timeline"]
    assert store.results_files(tmp_path) == [path]


@pytest.mark.parametrize("mode, note", [("default", "default=3,stage=7"), ("quick", "default=3,stage=5")])
def test_the_stop_rules_reach_the_experiments_process(tmp_path, mode, note):
    _, outcome = _sweep(tmp_path / "r.parquet", RULES, mode=mode)
    assert {row["note"] for row in outcome.rows} == {note}


def test_rows_carry_what_the_monitor_saw(tmp_path):
    readings = iter([{"sm_clock_mhz": 1980, "throttle_bits": 0, "other_processes": 0},
                     {"sm_clock_mhz": 1400, "throttle_bits": 0x40, "other_processes": 0}]
                    + [{"sm_clock_mhz": 1980, "throttle_bits": 0, "other_processes": 2}] * 10)
    checked, outcome = _sweep(tmp_path / "r.parquet", FINE, isolate=False, monitor=lambda: next(readings))
    rows = pd.DataFrame(outcome.rows)
    assert list(rows["throttled"]) == [True, True, False, False, False]
    assert list(rows["sm_clock_seen_mhz"]) == [1400, 1400, 1980, 1980, 1980]
    assert list(rows["throttle_reasons"]) == ["hw_thermal", "hw_thermal", "", "", ""]
    assert list(rows["other_processes"]) == [0, 2, 2, 2, 2]

    class Console:
        def __init__(self):
            self.lines = []

        def print(self, text, **kwargs):
            self.lines.append(str(text))

    console = Console()
    measuring._print_summary(checked.plans, outcome, console)
    assert any("2 configurations ran while the GPU was throttled (hw_thermal)" in line for line in console.lines)
    assert any("4 configurations ran while other processes used the GPU" in line for line in console.lines)
    assert any(f"5 configurations written to {outcome.path}" in line for line in console.lines)


def test_without_a_monitor_rows_have_no_monitor_columns(tmp_path):
    _, outcome = _sweep(tmp_path / "r.parquet", FINE, isolate=False, monitor=None)
    assert not {"throttled", "sm_clock_seen_mhz"} & set(outcome.rows[0])


def test_the_reporter_hears_every_step(tmp_path):
    reporter = Recorder()
    _sweep(tmp_path / "r.parquet", FINE, STICKY, reporter=reporter, isolate=True)
    kinds = [event[0] for event in reporter.events]
    assert kinds == ["planned", "started", *["row"] * 5, "finished", "started", "row", "row", "stopped",
                     "finished"]
    assert reporter.events[0][1] == ["fine", "sticky"]
    assert reporter.events[0][2] == pytest.approx(planning.estimate_s(_plans(FINE, STICKY)))
    assert reporter.events[2] == ("row", "fine", "ok", 0.01)
    assert STICKY_ERROR in reporter.events[-2][2]


def test_print_summary_lists_failures_and_headlines(tmp_path):
    checked, outcome = _sweep(tmp_path / "r.parquet", FINE, CRASHING, BRACKETED)
    console = Console(record=True, width=200, file=io.StringIO())
    measuring._print_summary(checked.plans, outcome, console)
    text = console.export_text()
    assert "crashing: 2 ok, 3 failed; the first:" in text
    assert "failed crashing 2: not measured" in text
    assert f"failed bracketed 0: not measured: the bracketed experiment stopped: RuntimeError: {BRACKETED_ERROR}" \
        in text  # words, not markup (a MarkupError before)
    titles = [line.strip() for line in text.splitlines() if line.strip().endswith("on Fake GPU")]
    assert titles == ["fine on Fake GPU", "crashing on Fake GPU", "bracketed on Fake GPU"]


# --- checks before anything runs ---------------------------------------------------------------------------------


def test_plan_turns_value_errors_into_usage_errors():
    for request, message in ((Request(experiments=["nope"]), "unknown experiment 'nope'"),
                             (Request(experiments=["launch", "launch"]), "named twice"),
                             (Request(experiments=["launch"], axes={"colour": ["red"]}), "unknown axis 'colour'"),
                             (Request(experiments=["launch"], budget_s=0.5), "--budget 0.5")):
        with pytest.raises(UsageError, match=message):
            Runner(request, gpu=FakeGpu()).plan()
    plans = Runner(Request(experiments=["launch"], mode="quick"), gpu=FakeGpu()).plan().plans
    assert [item.experiment.name for item in plans] == ["launch"] and plans[0].rules == planning.rules_for(
        plans[0].experiment, "quick")


def test_check_refuses_an_existing_out_file_before_the_gpu(tmp_path):
    path = synthetic.write(tmp_path / "r.parquet", synthetic.launch_records())
    before = path.read_bytes()
    gpu = FakeGpu()
    subject, planned = _runner(path, FINE, gpu=gpu)
    with pytest.raises(UsageError, match="already exists; bench never replaces a results file"):
        subject.check(planned)
    assert gpu.selected == [] and path.read_bytes() == before and list(tmp_path.iterdir()) == [path]


def test_two_runs_of_one_second_get_a_file_each(tmp_path):
    """Sweeps started in the same second into one directory with one run id (its process id tells sweeps of two
    processes apart; these share one): both pass the check, the first save of each takes a name no other run has,
    and each then rewrites only its own file."""
    first, planned = _runner(tmp_path, TABLED, isolate=False)
    second, second_planned = _runner(tmp_path, TABLED, isolate=False)
    assert first.run_id.endswith(f"Z-{os.getpid()}")
    second.run_id = first.run_id
    second_planned.plans[0] = dataclasses.replace(second_planned.plans[0], configs=[{"streams": 2}])
    checked, second_checked = first.check(planned), second.check(second_planned)
    name = checked.path
    assert second_checked.path == name == tmp_path / f"{first.run_id}-Fake-GPU.parquet"
    assert first.run(checked, monitor=lambda: {}).path == name
    taken = second.run(second_checked, monitor=lambda: {}).path
    assert taken == tmp_path / f"{first.run_id}-Fake-GPU_2.parquet"
    assert list(store.read(name, synthetic.suite())["streams"]) == [1, 2]
    assert list(store.read(taken, synthetic.suite())["streams"]) == [2]
    assert len(store.side_tables(name)["timeline"]) == 2 and len(store.side_tables(taken)["timeline"]) == 1
    assert store.results_files(tmp_path) == [name, taken] and store.newest(tmp_path) == taken
    third, third_planned = _runner(tmp_path, FINE, isolate=False)  # a file at the name already: kept, the run
    third.run_id = first.run_id  # takes the next one
    third_checked = third.check(third_planned)
    before = name.read_bytes()
    assert third.run(third_checked, monitor=lambda: {}).path.name == f"{first.run_id}-Fake-GPU_3.parquet"
    assert name.read_bytes() == before and len(store.results_files(tmp_path)) == 3


def test_a_full_disk_ends_the_sweep_keeping_its_last_save(tmp_path, monkeypatch):
    path = tmp_path / "r.parquet"
    subject, checked = _check(path, FINE, isolate=False)  # saves after every row
    disks.fills_after(monkeypatch, 2)
    with pytest.raises(WriteError) as raised:
        subject.run(checked, monitor=lambda: {})
    assert str(raised.value) == (f"cannot write {path}: No space left on device; {path} keeps its last save, 2 "
                                 f"configurations (3 configurations measured in this run); --resume {path} finishes it")
    assert list(store.read(path, synthetic.suite())["n"]) == [0, 1] and store.read_metadata(path)["complete"] is False
    assert [item.name for item in tmp_path.iterdir()] == ["r.parquet"]  # no part of a file left


def test_a_full_disk_at_the_first_save_writes_nothing(tmp_path, monkeypatch):
    subject, checked = _check(tmp_path / "out", TABLED, isolate=False)
    disks.fills_after(monkeypatch, 0)
    with pytest.raises(WriteError, match=r"cannot write .*-Fake-GPU.parquet: No space left on device; nothing was "
                                         r"written \(1 configurations measured in this run\)$"):
        subject.run(checked, monitor=lambda: {})
    assert [str(item.relative_to(tmp_path)) for item in tmp_path.rglob("*")] == ["out"]


def test_check_refuses_an_unwritable_place(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    gpu = FakeGpu()
    with pytest.raises(UsageError, match="is a file, not a directory"):
        _check(blocker / "results", FINE, gpu=gpu)
    with pytest.raises(UsageError, match="is a file, not a directory"):
        _check(blocker / "r.parquet", FINE, gpu=gpu)
    assert gpu.selected == []
    with pytest.raises(UsageError, match="--out: cannot write to"):
        writes.writable_directory(Path("/proc/bench-results"), "--out")
    assert writes.writable_directory(tmp_path / "new" / "dir", "--out") == tmp_path / "new" / "dir"
    assert not (tmp_path / "new").exists()


def test_check_selects_the_gpu_and_names_the_file(tmp_path):
    gpu = FakeGpu()
    subject, checked = _check(tmp_path / "out", FINE, gpu=gpu, device=3)
    assert gpu.selected == [3] and checked.environment["gpu_name"] == "Fake GPU" and checked.devices == (3,)
    assert checked.path == tmp_path / "out" / f"{subject.run_id}-Fake-GPU.parquet" and checked.run_id == subject.run_id
    assert not (tmp_path / "out").exists()  # checking writes nothing


def test_results_path():
    assert preflight.results_path(Path("out.parquet"), "r", "g") == Path("out.parquet")
    assert preflight.results_path(Path("results"), "20261121T000000Z", "NVIDIA H200 (MIG 1g.18gb)") == Path(
        "results/20261121T000000Z-NVIDIA-H200--MIG-1g-18gb.parquet")


def test_check_refuses_what_does_not_fit_in_memory(tmp_path):
    with pytest.raises(UsageError, match="--sizes: hungry needs 1024 TiB of device memory; Fake GPU has 1 GiB free"):
        _check(tmp_path / "out", HUNGRY, gpu=FakeGpu(free=1 << 30))
    assert not (tmp_path / "out").exists()


def test_memory_problem_checks_device_then_host():
    plans = planning.make(["bandwidth"], sizes=[1 << 30])  # two 1 GiB buffers on each side, random-fill scratch
    assert preflight.memory_problem(plans, "GPU", device_free=8 << 30, host_available=8 << 30) is None
    assert "needs 2.2 GiB of device memory; GPU has 1 GiB free" in preflight.memory_problem(plans, "GPU", 1 << 30,
                                                                                          8 << 30)
    assert "needs 2 GiB of host memory; 1 GiB is available" in preflight.memory_problem(plans, "GPU", 8 << 30, 1 << 30)
    empty = [planning.Plan(HUNGRY, [], planning.rules_for(HUNGRY, "default"))]
    assert preflight.memory_problem(empty, "GPU", 0, 0) is None  # nothing to run needs nothing
    assert env.host_memory_available() > 0


# --- resume -----------------------------------------------------------------------------------------------------


def _interrupted_file(tmp_path, gpu=None):
    path = tmp_path / "r.parquet"
    subject, checked = _check(path, STICKY, isolate=False, gpu=gpu)
    with pytest.raises(RuntimeError):
        subject.run(checked, monitor=lambda: {})
    return path


def test_resume_refuses_a_file_from_another_gpu_and_a_missing_file(tmp_path):
    path = _interrupted_file(tmp_path)
    before = path.read_bytes()
    with pytest.raises(UsageError, match="measured on another GPU \\(GPU-fake\\)"):
        _check(tmp_path / "unused", STICKY, gpu=FakeGpu(uuid="GPU-other"), resume=path)
    assert path.read_bytes() == before
    with pytest.raises(ResultsError, match="cannot read results file"):
        _check(tmp_path / "unused", STICKY, resume=tmp_path / "missing.parquet")


def test_resume_plans_only_what_the_file_lacks(tmp_path):
    path = _interrupted_file(tmp_path)
    _, checked = _check(tmp_path / "unused", dataclasses.replace(FINE, name="sticky"), resume=path)
    assert checked.path == path and [config["n"] for config in checked.plans[0].configs] == [2, 3, 4]


def test_resume_runs_only_what_is_missing(tmp_path):
    path = _interrupted_file(tmp_path)
    first = store.read(path, synthetic.suite())["run_id"].iloc[0]
    reporter = Recorder()
    checked, outcome = _sweep(tmp_path / "unused", dataclasses.replace(FINE, name="sticky"), resume=path,
                              reporter=reporter)
    assert len(outcome.rows) == 3 and outcome.path == path and outcome.planned == 3
    rows = store.read(path, synthetic.suite())
    assert list(rows["n"]) == [0, 1, 2, 3, 4] and (rows["status"] == "ok").all()
    assert list(rows["run_id"]) == [first] * 2 + [checked.run_id] * 3
    assert str(rows["n_samples"].dtype) == "Int64" and list(rows["samples"][0]) == [1.0, 1.1, 0.9]
    assert store.read_metadata(path)["complete"] is True
    assert not (tmp_path / "unused").exists()


def test_resume_keeps_earlier_side_table_rows(tmp_path):
    path = tmp_path / "r.parquet"
    subject, planned = _runner(path, TABLED)
    planned.plans[0] = dataclasses.replace(planned.plans[0], configs=[{"streams": 1}])
    subject.run(subject.check(planned), monitor=lambda: {})
    resumed, checked = _check(tmp_path / "unused", TABLED, resume=path)
    assert checked.plans[0].configs == [{"streams": 2}]
    resumed.run(checked, monitor=lambda: {})
    assert list(store.read(path, synthetic.suite())["streams"]) == [1, 2]
    timeline = store.side_tables(path)["timeline"]
    assert list(timeline["streams"]) == [1, 2] and list(timeline["run_id"]) == [subject.run_id, resumed.run_id]


def test_resume_refuses_a_version_1_file(tmp_path):
    path = tmp_path / "old.parquet"
    rows = pd.DataFrame([{"experiment": "fine", "n": 0, "status": "ok", "error": "", "gpu_uuid": "GPU-fake"}])
    table = pa.Table.from_pandas(rows, preserve_index=False)
    pq.write_table(table.replace_schema_metadata({store.METADATA_KEY: b'{"schema_version": 1}'}), path)
    before = path.read_bytes()
    gpu = FakeGpu()
    with pytest.raises(UsageError, match="written by an older bench \\(schema version 1\\); start a new sweep"):
        _check(tmp_path / "unused", FINE, resume=path, gpu=gpu)
    assert path.read_bytes() == before and gpu.selected == []


# --- several GPUs -----------------------------------------------------------------------------------------------

@pytest.fixture
def two_gpu_registry(monkeypatch):
    """The planner sees two fake experiments: one per GPU (fine) and one over GPU pairs (pairs)."""
    from fake_experiments import PAIRS

    monkeypatch.setattr(planning, "registry", lambda: {"fine": FINE, "pairs": PAIRS})
    return PAIRS


def test_devices_plan_each_gpu_and_the_pairs_once(two_gpu_registry):
    planned = Runner(Request(devices="all"), gpu=FakeGpu(gpus=2)).plan()
    plans = planned.plans
    assert planned.devices == (0, 1) and planned.left_out == {}
    assert [item.name for item in plans] == ["fine on GPU 0", "fine on GPU 1", "pairs"]
    assert [item.devices for item in plans] == [(0,), (1,), (0, 1)]
    assert [(config["a"], config["b"]) for config in plans[2].configs] == [(0, 1), (1, 0)]
    sequential, concurrent = planning.estimate_s(plans), planning.estimate_s(plans, at_once=True)
    assert concurrent == pytest.approx(sequential - plans[1].estimate_s)  # GPU 1's part runs beside GPU 0's


def test_one_gpu_leaves_pairs_out_and_refuses_them_when_asked(two_gpu_registry):
    planned = Runner(Request(), gpu=FakeGpu(gpus=1)).plan()
    assert [item.name for item in planned.plans] == ["fine"]
    assert planned.left_out == {"pairs": "needs 2 GPUs; this sweep has 1 (--devices all)"}
    with pytest.raises(UsageError, match="pairs needs 2 GPUs; this sweep has 1"):
        Runner(Request(experiments=["pairs"]), gpu=FakeGpu(gpus=1)).plan()
    with pytest.raises(UsageError, match=r"--devices 5: 2 GPU\(s\) visible, ordinals 0..1"):
        Runner(Request(devices=(0, 5)), gpu=FakeGpu(gpus=2)).plan()
    with pytest.raises(UsageError, match="--concurrent runs several GPUs at once"):
        Runner(Request(devices=(1,), concurrent=True), gpu=FakeGpu(gpus=2)).plan()


@pytest.mark.parametrize("concurrent", [False, True])
def test_a_sweep_of_two_gpus_keeps_each_gpus_rows_apart(tmp_path, two_gpu_registry, concurrent):
    """--concurrent runs every one-GPU experiment on both GPUs at once; --one-at-a-time one GPU after another."""
    reporter = Recorder()
    subject = Runner(Request(out=tmp_path / "r.parquet", devices=(0, 1), concurrent=concurrent,
                             one_at_a_time=not concurrent), reporter, gpu=FakeGpu(gpus=2), isolate=False,
                     save_every_s=0.0)
    outcome = subject.run(subject.check(subject.plan()), monitor=lambda: {})
    rows = store.read(tmp_path / "r.parquet", synthetic.suite())
    fine = rows[rows["experiment"] == "fine"]
    assert sorted(fine["gpu_index"]) == [0] * 5 + [1] * 5
    assert dict(fine.groupby("gpu_index")["gpu_uuid"].first()) == {0: "GPU-fake", 1: "GPU-fake-1"}
    assert fine["concurrent_gpus"].max() == (2 if concurrent else 1)  # each GPU's first row at least: both started
    pairs = rows[rows["experiment"] == "pairs"]
    assert len(pairs) == 2 and set(pairs["gpu_index"]) == {0} and set(pairs["concurrent_gpus"]) == {1}
    assert set(outcome.wall_s) == {"fine on GPU 0", "fine on GPU 1", "pairs"}
    metadata = store.read_metadata(tmp_path / "r.parquet")
    assert metadata["devices"] == [0, 1] and metadata["concurrent"] is concurrent
    assert metadata["one_at_a_time"] is not concurrent
    assert metadata["environments"]["1"]["gpu_uuid"] == "GPU-fake-1"
    events = [event[:2] for event in reporter.events if event[0] in ("started", "finished")]
    if concurrent:  # both GPUs' parts start before either finishes
        assert events[:2] == [("started", "fine on GPU 0"), ("started", "fine on GPU 1")]
    else:
        assert events[:2] == [("started", "fine on GPU 0"), ("finished", "fine on GPU 0")]


def test_by_default_two_gpus_run_beside_each_other_all_but_what_holds_the_host(tmp_path, monkeypatch):
    """Without --concurrent or --one-at-a-time, an experiment that neither loads nor measures what another GPU's run
    shares (own_gpu) runs beside anything on the other GPU; any other holds the host, so that two of them never run
    at once; a multi-GPU one holds every GPU and the host."""
    from fake_experiments import PAIRS

    alone = dataclasses.replace(FINE, name="alone", processes=Processes(own_gpu=True))
    monkeypatch.setattr(planning, "registry", lambda: {"alone": alone, "fine": FINE, "pairs": PAIRS})
    request = Request(out=tmp_path / "r.parquet", devices=(0, 1))
    assert [request.at_once(experiment) for experiment in (alone, FINE, PAIRS)] == [True, False, False]
    assert [Request(concurrent=True).at_once(experiment) for experiment in (alone, FINE, PAIRS)] == [True, True,
                                                                                                     False]
    assert not any(Request(one_at_a_time=True).at_once(experiment) for experiment in (alone, FINE, PAIRS))
    reporter = Recorder()
    subject = Runner(request, reporter, gpu=FakeGpu(gpus=2), isolate=False, save_every_s=0.0)
    plans = subject.plan().plans
    assert [sorted(map(str, planning.holds(item, request.at_once))) for item in plans] == [
        ["0"], ["1"], ["0", "host"], ["1", "host"], ["0", "1", "host"]]
    assert planning.estimate_s(plans, request.at_once) == pytest.approx(
        planning.estimate_s(plans) - 2 * plans[0].estimate_s)  # each GPU's alone beside the other GPU's fine
    outcome = subject.run(subject.check(subject.plan()), monitor=lambda: {})
    rows = pd.DataFrame(outcome.rows)
    assert dict(rows.groupby("experiment")["concurrent_gpus"].max())["alone"] == 2 and outcome.concurrent
    assert set(rows[rows["experiment"] == "pairs"]["concurrent_gpus"]) == {1}
    events = [event[:2] for event in reporter.events if event[0] in ("started", "finished")]
    assert events[:2] == [("started", "fine on GPU 0"), ("started", "alone on GPU 1")]  # what holds the host first
    assert events.index(("finished", "fine on GPU 0")) < events.index(("started", "fine on GPU 1"))
    assert events[-2:] == [("started", "pairs"), ("finished", "pairs")]


def test_the_schedule_runs_a_gpus_own_work_while_another_gpu_holds_the_host(monkeypatch):
    """The host passes from GPU to GPU in the sweep's order while each GPU does its own work in between: two GPUs of
    host-bound work (fine) and own work (alone) take half the time of one GPU after another."""
    from fake_experiments import PAIRS

    alone = dataclasses.replace(FINE, name="alone", processes=Processes(own_gpu=True))
    monkeypatch.setattr(planning, "registry", lambda: {"fine": FINE, "alone": alone, "pairs": PAIRS})
    request = Request(devices=(0, 1))
    plans = Runner(request, gpu=FakeGpu(gpus=2)).plan().plans
    assert [item.name for item in plans] == ["fine on GPU 0", "fine on GPU 1", "alone on GPU 0", "alone on GPU 1",
                                             "pairs"]
    each = plans[0].estimate_s
    assert plans[2].estimate_s == pytest.approx(each)
    assert planning.schedule(plans, request.at_once) == pytest.approx([0, each, each, 0, 2 * each])
    assert planning.schedule(plans) == pytest.approx([0, each, 2 * each, 3 * each, 4 * each])  # one at a time
    assert planning.schedule(plans, True) == pytest.approx([0, 0, each, each, 2 * each])  # --concurrent
    busy = planning.schedule(plans[1:], request.at_once, busy_s={0: each / 2, "host": each / 2})
    assert busy == pytest.approx([each, each / 2, 0, 2 * each])  # fine on GPU 0 still running


def test_each_gpus_processes_see_their_gpu_alone_and_a_multi_gpu_experiments_every_gpu(tmp_path, monkeypatch):
    """A library that starts on every GPU it sees (JAX) must not start on a GPU where another process measures: a
    one-GPU plan's processes are shown their GPU alone (CUDA_VISIBLE_DEVICES, its UUID), ahead of their turn too."""
    from fake_experiments import PAIRS, experiment, visible_rows

    visible = experiment("visible", visible_rows, own_gpu=True)
    pairs = dataclasses.replace(PAIRS, measure=visible_rows)
    monkeypatch.setattr(planning, "registry", lambda: {"visible": visible, "pairs": pairs})
    subject = Runner(Request(out=tmp_path / "r.parquet", devices=(0, 1)), gpu=FakeGpu(gpus=2, sees=True),
                     save_every_s=0.0)
    rows = pd.DataFrame(subject.run(subject.check(subject.plan()), monitor=lambda: {}).rows)
    seen = rows.groupby(["experiment", "gpu_uuid"])["note"].agg(set).to_dict()
    assert seen == {("visible", "GPU-fake"): {"GPU-fake"}, ("visible", "GPU-fake-1"): {"GPU-fake-1"},
                    ("pairs", "GPU-fake"): {os.environ.get("CUDA_VISIBLE_DEVICES", "(all)")}}


def test_resume_of_two_gpus_runs_what_each_gpu_lacks(tmp_path, two_gpu_registry):
    path = tmp_path / "r.parquet"
    first = Runner(Request(out=path, devices=(0, 1), experiments=["fine"]), gpu=FakeGpu(gpus=2), isolate=False,
                   save_every_s=0.0)
    first.run(first.check(first.plan()), monitor=lambda: {})
    rows = store.read(path, synthetic.suite())
    keep = rows[(rows["gpu_index"] == 0) | (rows["n"] < 2)]  # GPU 1 stopped after two configurations
    store.write(path, store.records(keep), store.suite_schema(planning.registry()), store.read_metadata(path))
    again = Runner(Request(resume=path, experiments=["fine"]), gpu=FakeGpu(gpus=2),  # the file's GPUs: 0 and 1
                   isolate=False, save_every_s=0.0)
    checked = again.check(again.plan())
    assert [(item.name, [config["n"] for config in item.configs]) for item in checked.plans] == [
        ("fine on GPU 0", []), ("fine on GPU 1", [2, 3, 4])]
    with pytest.raises(UsageError, match="was measured on another GPU"):
        other = Runner(Request(resume=path, devices=(0,), experiments=["fine"]), gpu=FakeGpu(gpus=2))
        other.check(other.plan())


def test_side_tables_of_two_gpus_keep_apart(tmp_path, monkeypatch):
    from bench.analysis import plots

    monkeypatch.setattr(planning, "registry", lambda: {"tabled": TABLED})
    path = tmp_path / "r.parquet"
    subject = Runner(Request(out=path, devices=(0, 1)), gpu=FakeGpu(gpus=2), isolate=False, save_every_s=0.0)
    subject.run(subject.check(subject.plan()), monitor=lambda: {})
    timeline = store.side_tables(path)["timeline"]
    assert sorted(timeline["gpu_uuid"]) == ["GPU-fake"] * 2 + ["GPU-fake-1"] * 2  # one run id, two GPUs
    rows = store.read(path, synthetic.suite())
    chosen = plots.tables_of({"timeline": timeline}, rows[rows["gpu_uuid"] == "GPU-fake-1"])["timeline"]
    assert list(chosen["gpu_uuid"]) == ["GPU-fake-1"] * 2


def test_a_cold_machine_compiles_every_experiment_at_once_first_and_only_once(tmp_path):
    from fake_experiments import experiment, rows, touch_warm, touching_rows

    touched, warmed = tmp_path / "touched", tmp_path / "warmed"
    touched.mkdir()
    warmed.mkdir()
    touching = [experiment(name, partial(touching_rows, directory=str(touched))) for name in ("one", "two")]
    touching[1] = dataclasses.replace(touching[1],
                                      processes=Processes(warm=partial(touch_warm, str(warmed)), warm_shards=2))
    broken = experiment("broken", partial(rows, fail_after=0, how="no kernel for you"))
    markers = tmp_path / "cache" / "bench" / "warm-key"
    reporter = Recorder()
    reporter.warmed = lambda seconds, experiments, failed: reporter.events.append(("warmed", experiments, failed))
    checked, outcome = _sweep(tmp_path / "r.parquet", *touching, broken, gpu=FakeGpu(marker=markers),
                              reporter=reporter)
    assert sorted(path.name for path in markers.iterdir()) == ["one", "two"]  # the failed warm-up stays cold
    assert outcome.warm_s > 0 and [row["status"] for row in outcome.rows].count("ok") == 10
    names = [path.name for path in touched.iterdir()]
    processes = {name.split("-")[0]: [] for name in names}
    for name in names:
        processes[name.split("-")[0]].append(int(name.split("-")[1]))
    assert sorted(map(sorted, processes.values())) == [[0], [0], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4]]  # a warm-up
    # process per experiment with its first configuration, then the measuring ones
    hooked = {name.split("-")[0]: name.split("-", 1)[1] for name in (path.name for path in warmed.iterdir())}
    assert sorted(hooked.values()) == ["0-2-5", "1-2-5"]  # "two"'s warm hook in two shards, each in a process of its
    # own, each handed the plan's five configurations:
    (first,) = [pid for pid, shard in hooked.items() if shard == "0-2-5"]
    assert processes[first] == [0]  # the first shard's process warmed its first configuration; the second's none
    (second,) = [pid for pid, shard in hooked.items() if shard == "1-2-5"]
    assert second not in processes
    assert [event[0] for event in reporter.events][:2] == ["planned", "warmed"]
    (_, experiments, failed), = [event for event in reporter.events if event[0] == "warmed"]
    assert list(experiments) == ["one", "two", "broken"] and list(failed) == ["broken"]
    assert "no kernel" in failed["broken"]
    assert 0 < max(experiments.values()) <= outcome.warm_s
    metadata = store.read_metadata(tmp_path / "r.parquet")
    assert metadata["warm_s"] == outcome.warm_s and metadata["warm_each_s"] == experiments
    for path in touched.iterdir():
        path.unlink()
    _, again = _sweep(tmp_path / "r2.parquet", touching[0], gpu=FakeGpu(marker=markers))
    assert again.warm_s == 0 and len(list(touched.iterdir())) == 5  # warm now: no warm-up


def test_each_process_starts_ahead_while_the_one_before_measures_and_then_measures(tmp_path):
    from fake_experiments import experiment, pid_rows, touch_ahead, waiting_rows

    first = experiment("first", partial(waiting_rows, directory=str(tmp_path)))
    second = experiment("second", pid_rows, ahead=partial(touch_ahead, directory=str(tmp_path)))
    _, outcome = _sweep(tmp_path / "r.parquet", first, second)
    notes = {row["experiment"]: set() for row in outcome.rows}
    for row in outcome.rows:
        notes[row["experiment"]].add(row["note"])
    assert notes["first"] == {"seen=True"}  # the second's process did its ahead work before the first's rows
    (marker,) = tmp_path.glob("ahead-*")
    assert notes["second"] == {marker.name.removeprefix("ahead-")}  # and then measured, in the same process


def test_a_process_started_ahead_ends_with_an_interrupted_sweep(tmp_path):
    from fake_experiments import ahead_seen, experiment, rows, touch_ahead

    class InterruptOnceAhead(Recorder):
        def row(self, plan, row, seconds_planned):
            assert ahead_seen(str(tmp_path))
            raise KeyboardInterrupt

    later = experiment("later", rows, ahead=partial(touch_ahead, directory=str(tmp_path)))
    _, outcome = _sweep(tmp_path / "r.parquet", FINE, later, reporter=InterruptOnceAhead())
    assert outcome.interrupted and outcome.stopped_in == "fine"
    (marker,) = tmp_path.glob("ahead-*")
    with pytest.raises(ProcessLookupError):  # ended and reaped: its turn never came
        os.kill(int(marker.name.removeprefix("ahead-")), 0)


class _SlowAfterModeB(Recorder):
    """Takes its time over a row of mode b, so that the threads draining the processes move on to mode c's part
    before the main thread hears that mode b's process died."""

    def row(self, plan, row, seconds_planned):
        super().row(plan, row, seconds_planned)
        if row.get("mode") == "b":
            time.sleep(0.5)


def test_a_concurrent_part_that_fails_fails_only_its_own_configurations(tmp_path, monkeypatch):
    monkeypatch.setattr(planning, "registry", lambda: {"per-mode": PER_MODE})
    path = tmp_path / "r.parquet"
    subject = Runner(Request(out=path, devices=(0, 1), concurrent=True), _SlowAfterModeB(), gpu=FakeGpu(gpus=2),
                     save_every_s=0.0)
    subject.run(subject.check(subject.plan()), monitor=lambda: {})
    rows = store.read(path, synthetic.suite())
    for gpu in (0, 1):
        mine = rows[rows["gpu_index"] == gpu].sort_values(["mode", "n"])
        assert list(zip(mine["mode"], mine["n"], mine["status"])) == [
            ("a", 0, "ok"), ("a", 1, "ok"), ("b", 0, "ok"), ("b", 1, "failed"), ("c", 0, "ok"), ("c", 1, "ok")]


class _InterruptOnFirstRow(Recorder):
    def row(self, plan, row, seconds_planned):
        raise KeyboardInterrupt


def test_an_interrupted_concurrent_sweep_ends_every_gpus_process(tmp_path, monkeypatch):
    from fake_experiments import SLOW

    monkeypatch.setattr(planning, "registry", lambda: {"slow": SLOW})
    subject = Runner(Request(out=tmp_path / "r.parquet", devices=(0, 1), concurrent=True), _InterruptOnFirstRow(),
                     gpu=FakeGpu(gpus=2), save_every_s=0.0)
    outcome = subject.run(subject.check(subject.plan()), monitor=lambda: {})
    assert outcome.interrupted and outcome.stopped_in == "slow on GPU 0, slow on GPU 1"
    assert multiprocessing.active_children() == []  # SLOW's processes would run on for a second and more


@pytest.mark.cuda_libs
def test_the_fork_servers_preload_builds_numbas_cuda_target():
    """What the fork server imports once (bench.sweep.preload) builds numba-cuda's CUDA target, whose registries each
    experiment process would otherwise load again (a GPU test checks that it leaves the driver alone)."""
    code = "import sys, bench.sweep.preload; print('numba.cuda.np.arraymath' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == "True"


def test_the_test_experiments_import_nothing_the_fork_server_lacks():
    """An isolated sweep's experiment process unpickles its experiment: of the tests' fake experiments, that imports
    fake_experiments, and nothing the fork server has not (the experiment modules it imports): not bench.results.store and
    the pandas under it, a second for every process these tests start (fake_gpu keeps the preflight apart)."""
    code = ("import sys\nfrom bench.sweep import processes\nfor name in processes._experiment_modules():\n"
            "    __import__(f'bench.experiments.{name}')\nbefore = set(sys.modules)\nimport fake_experiments\n"
            "print(sorted(set(sys.modules) - before))")
    environment = {**os.environ, "PYTHONPATH": with_path(os.pathsep.join([SRC, TESTS]))}
    result = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[-2] == "['fake_experiments']", result.stdout


def _fresh_in_child(sender) -> None:
    from bench.catalogs import fresh_number

    sender.send([fresh_number(), fresh_number()])
    sender.close()


def test_fresh_kernels_differ_between_processes_forked_from_one_parent():
    """A fresh call's kernel source carries a number no other process used: processes forked from one server (or
    sweeps run one after another on a machine with CuPy's on-disk cache) must not compile the same source."""
    from bench.catalogs import fresh_number

    mine = [fresh_number(), fresh_number()]
    assert mine[1] == mine[0] + 1
    context = multiprocessing.get_context("fork")
    seen = [mine]
    for _ in range(2):
        receiver, sender = context.Pipe(duplex=False)
        child = context.Process(target=_fresh_in_child, args=(sender,))
        child.start()
        seen.append(receiver.recv())
        child.join(30)
    starts = {numbers[0] for numbers in seen}
    assert len(starts) == 3 and all(numbers[1] == numbers[0] + 1 for numbers in seen)


def test_a_budgeted_sweep_keeps_a_slow_experiment_to_its_budget(tmp_path):
    """CAPPED's time model is three times too optimistic and every one of its measurements ends at its time cap:
    with a budget of about twice its estimate, its process shortens the caps of what is left as it learns."""
    checked, outcome = _sweep(tmp_path, CAPPED, budget_s=1.0, isolate=False)
    rows = pd.DataFrame(outcome.rows)
    # orderings a slower machine only strengthens (it falls further behind its model): the caps shrink as it learns
    assert rows["stop_scale"].iloc[0] == 1.0 and rows["stop_scale"].iloc[-1] < rows["stop_scale"].iloc[0]
    assert rows["value"].iloc[-1] < rows["value"].iloc[0]  # the time cap it sampled under, last against first
    assert rows["value"].sum() < len(rows) * rows["value"].iloc[0]  # the sampling it spent, against unpaced
    assert set(rows["stop_reason"]) == {"time_cap"}
    assert rows["n_samples"].min() >= 6 and rows["floor_met"].all()  # the time caps shrank, never the floor


def test_a_sweep_whose_budget_is_mostly_spent_scales_what_is_left(tmp_path):
    """The budget counts from the command's start: a command that has already spent most of it gives what is left
    less than its estimate, and its time caps shrink from its third configuration on (the first also pays the
    process's setup, so the pace learns from the second); an unbudgeted one (--full) runs as planned."""
    _, spent = _sweep(tmp_path / "spent", CAPPED, budget_s=10.0, started_s=8.8, isolate=False)
    assert pd.DataFrame(spent.rows)["stop_scale"].iloc[2:].max() < 1.0  # every cap from the third on shrank
    assert pd.DataFrame(spent.rows)["n_samples"].min() >= 6  # its floor: the time caps shrink, never the samples
    _, full = _sweep(tmp_path / "full", CAPPED, mode="full", started_s=1e6, isolate=False)
    assert set(pd.DataFrame(full.rows)["stop_scale"]) == {1.0}
