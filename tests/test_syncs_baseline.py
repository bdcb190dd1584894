"""Syncs baselines without a GPU: the places a run found (as bench.syncs makes them) kept as JSON, matched after
edits by function, text and occurrence (never by line), the verdicts, the three output forms with whatever a source
line holds, and the command line's refusals."""

import json
import textwrap
from pathlib import Path

import pytest

from bench.results import writes
from bench.platform.errors import UsageError
from bench.usercode.syncs import baseline
from bench.usercode.syncs.baseline import Change
from bench.usercode.syncs.gate import github, summary, text
from bench.usercode.syncs.result import Place
from commands import assert_refused, bench

STEP = """
def step(model, batch, losses):
    loss = model(batch)
    loss.backward()
    losses.append(loss.item())
    if len(losses) % 10 == 0:
        print(losses[-1].item())
    return loss.item()
"""


def project(tmp_path: Path, code: str) -> Path:
    """A project (a pyproject.toml at its root) with ``code`` in train/loop.py."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "train").mkdir(exist_ok=True)
    path = tmp_path / "train" / "loop.py"
    path.write_text(textwrap.dedent(code))
    return path


def place(path: Path, text: str, count: int = 1, nth: int = 1, thread: str = "") -> Place:
    """The place bench.syncs reports for the ``nth`` line of ``path`` that holds ``text``."""
    rows = path.read_text().split("\n")  # as Python numbers lines: not at \u2028 in a string
    lines = [number for number, line in enumerate(rows, 1) if text in line]
    number = lines[nth - 1]
    source = rows[number - 1].strip()
    return Place(str(path), number, "step", source, "torch", count, 30.0, 0.0, 30.0, ("cuStreamSynchronize",), (),
                 (), thread)


def saved(tmp_path: Path, places: list[Place]) -> list[baseline.BaselinePlace]:
    file = tmp_path / "baseline.json"
    file.write_text(baseline.to_json(map(baseline.kept, places), "train/loop.py:step"))
    return baseline.read(file)


def found(tmp_path: Path, code: str, *wanted: tuple) -> list[Place]:
    path = project(tmp_path, code)
    return [place(path, *item) for item in wanted]


def changes(comparison) -> list[tuple[str, str, int]]:
    return [(change.change.value, change.place.source, change.line) for change in comparison.changes]


def test_a_baseline_names_each_place_by_project_file_function_text_and_occurrence(tmp_path):
    places = found(tmp_path, STEP, ("losses.append",), (".item())", 1, 2), ("return loss",))
    kept = saved(tmp_path, places)
    data = json.loads((tmp_path / "baseline.json").read_text())
    assert data["format"] == baseline.FORMAT and data["target"] == "train/loop.py:step"
    assert {item.file for item in kept} == {"train/loop.py"}
    assert [(item.source, item.occurrence, item.line) for item in kept] == [
        ("losses.append(loss.item())", 1, 5), ("print(losses[-1].item())", 1, 7), ("return loss.item()", 1, 8)]
    assert kept[0].cuda_calls == ("cuStreamSynchronize",) and kept[0].slack == 0 and kept[0].library == "torch"


def test_code_blank_lines_comments_and_whitespace_above_still_match(tmp_path):
    kept = saved(tmp_path, found(tmp_path, STEP, ("losses.append",), ("return loss",)))
    edited = "import os\n\n\n# a comment\nSCALE = 2\n" + STEP.replace("    loss.backward()\n",
                                                                       "    loss.backward()   # why\n\n\n").replace(
        "losses.append(loss.item())", "losses.append(  loss.item()  )")
    now = found(tmp_path, edited, ("losses.append",), ("return loss",))
    comparison = baseline.compare(kept, now, "baseline.json")
    assert [change.change for change in comparison.changes] == [Change.SAME, Change.SAME]
    assert not comparison.failed and comparison.changes[0].line > kept[0].line  # moved, still matched


def test_a_new_wait_fails_naming_its_line_and_a_removed_one_is_an_improvement(tmp_path):
    kept = saved(tmp_path, found(tmp_path, STEP, ("losses.append",), ("print(",)))
    edited = STEP.replace("    loss.backward()\n", "    loss.backward()\n    norm = model.norm().item()\n").replace(
        "    if len(losses) % 10 == 0:\n        print(losses[-1].item())\n", "")
    now = found(tmp_path, edited, ("losses.append",), ("norm = ",))
    comparison = baseline.compare(kept, now, "baseline.json")
    assert changes(comparison) == [("new", "norm = model.norm().item()", 5), ("gone", "print(losses[-1].item())", 7),
                                   ("same", "losses.append(loss.item())", 6)]
    assert comparison.failed and [change.place.source for change in comparison.better] == ["print(losses[-1].item())"]


def test_the_same_text_twice_in_a_function_is_two_places(tmp_path):
    code = STEP.replace("    return loss.item()\n", "    x = loss.item()\n    x = loss.item()\n    return x\n")
    kept = saved(tmp_path, found(tmp_path, code, ("x = loss", 1, 2)))
    assert kept[0].occurrence == 2
    now = found(tmp_path, code, ("x = loss", 1, 1))
    assert changes(baseline.compare(kept, now, "b")) == [("new", "x = loss.item()", 8), ("gone", "x = loss.item()", 9)]


def test_counts_above_the_baseline_fail_unless_its_slack_allows_them(tmp_path):
    kept = saved(tmp_path, found(tmp_path, STEP, ("print(", 5)))
    more = found(tmp_path, STEP, ("print(", 6))
    assert baseline.compare(kept, more, "b").changes[0].change is Change.MORE
    slack = baseline.BaselinePlace(**{**kept[0].__dict__, "slack": 1})
    assert baseline.compare([slack], more, "b").changes[0].change is Change.SAME
    fewer = baseline.compare(kept, found(tmp_path, STEP, ("print(", 2)), "b")
    assert fewer.changes[0].change is Change.FEWER and not fewer.failed


def test_a_wait_on_another_thread_is_another_place(tmp_path):
    kept = saved(tmp_path, found(tmp_path, STEP, ("print(",)))
    now = found(tmp_path, STEP, ("print(", 1, 1, "metrics"))
    assert [change.change for change in baseline.compare(kept, now, "b").changes] == [Change.NEW, Change.GONE]


@pytest.mark.parametrize("content, fragment", [
    ("not json", "is not JSON"),
    ('{"format": "something else", "places": []}', "is not a bench syncs baseline"),
    ('{"format": "bench syncs baseline 1", "places": [{"file": "a.py"}]}', "place 1 needs"),
    ('{"format": "bench syncs baseline 1", "places": [{"file": "a.py", "function": "f", "source": "x", '
     '"occurrence": 0, "thread": "", "count": 1}]}', "occurrence must be a whole number of at least 1"),
    ('{"format": "bench syncs baseline 1", "places": [{"file": "a.py", "function": "f", "source": "x", '
     '"occurrence": 1, "thread": "", "count": true}]}', "count must be a whole number"),
    ('{"format": "bench syncs baseline 1", "places": [{"file": "a.py", "function": "f", "source": 3, '
     '"occurrence": 1, "thread": "", "count": 1}]}', "source must be text"),
])
def test_a_file_that_is_not_a_baseline_is_one_line(tmp_path, content, fragment):
    file = tmp_path / "b.json"
    file.write_text(content)
    with pytest.raises(UsageError, match=fragment):
        baseline.read(file)


HOSTILE = "x = '%0A\n::error::pwned,\x1b[31m|a|b|' <b>@team</b>"


def hostile_comparison(tmp_path):
    path = project(tmp_path, "def step():\n    " + HOSTILE.replace("\n", "") + "\n")
    now = [Place(str(path), 2, "step", HOSTILE, "torch", 2, 1.0, 0.0, 1.0, ("cuMemcpyDtoH",), (), ())]
    return baseline.compare([], now, "base,line:1.json")


def test_github_commands_put_each_new_wait_on_its_line_escaped(tmp_path):
    lines = github(hostile_comparison(tmp_path), "train/loop.py:step").splitlines()
    assert len(lines) == 2 and lines[0].startswith("::error file=train/loop.py,line=2,title=bench syncs%3A new wait::")
    assert "\x1b" not in lines[0] and "\n" not in lines[0] and "%250A" in lines[0] and "\\x1b" in lines[0]
    assert "(baseline base,line:1.json)" in lines[0]  # the message keeps : and , (only properties escape them)
    assert lines[1].startswith("::error title=bench syncs::train/loop.py:step against base,line:1.json: worse")


def test_markdown_and_text_show_the_place_and_escape_what_it_holds(tmp_path):
    comparison = hostile_comparison(tmp_path)
    table = summary(comparison, "step")
    rows = [line for line in table.splitlines() if line.startswith("| new")]
    assert len(rows) == 1 and rows[0].count(" | ") == 6  # no cell broken by the code's | characters
    assert "<b>" not in table and "\x1b" not in table and "@\u200bteam" in table
    plain = text(comparison, "step")
    assert "\x1b" not in plain and plain.splitlines()[1].startswith("  train/loop.py:2  new: 2 waits in cuMemcpyDtoH")


def test_nothing_worse_is_a_notice_and_passes(tmp_path):
    kept = saved(tmp_path, found(tmp_path, STEP, ("print(",)))
    comparison = baseline.compare(kept, [], "b.json")
    assert not comparison.failed
    assert github(comparison, "t").splitlines() == [
        "::notice file=train/loop.py,line=7,title=bench syncs%3A fewer waits::gone: no wait, the baseline has 1 wait: "
        "train/loop.py in step: print(losses[-1].item()) (baseline b.json)",
        "::notice title=bench syncs::t against b.json: nothing got worse: 0 places worse, 1 better, 0 the same"]


def test_bench_replaces_its_own_baseline_but_no_file_it_did_not_write(tmp_path):
    file = tmp_path / "b.json"
    file.write_text(baseline.to_json([], "t"))
    assert writes.made_by_bench(file)
    mine = writes.writer("syncs", "--save-baseline")
    assert writes.claim(file, mine) == file
    (tmp_path / "other.json").write_text('{"format": "mine"}')
    with pytest.raises(UsageError, match="bench did not write it"):
        writes.claim(tmp_path / "other.json", mine)


@pytest.mark.parametrize("arguments, fragment", [
    (["--format", "github", "m:f"], "--format github shows a gate: give --baseline"),
    (["--baseline", "missing.json", "m:f"], "--baseline: cannot read missing.json"),
    (["--baseline", "b.json", "--save-baseline", "b.json", "m:f"], "name the same file"),
    (["--save-baseline", "b.txt", "m:f"], "is not a .json file"),
    (["--json", "--baseline", "b.json", "m:f"], "--json and --baseline both write stdout"),
    (["--summary", "s.md", "m:f"], "--summary appends the gate's summary: give --baseline"),
    (["--baseline", "b.json", "--summary", "no/s.md", "m:f"], "--summary: no/ does not exist"),
    (["--baseline", "b.json", "--summary", ".", "m:f"], "is a directory, not a regular file"),
])
def test_the_command_line_refuses_a_mistake_before_anything_runs(tmp_path, arguments, fragment):
    (tmp_path / "b.json").write_text(baseline.to_json([], "m:f"))
    assert_refused(bench("syncs", *arguments, cwd=tmp_path, without_cuda=True), fragment)


def waits_at(path: Path, *texts: str, allowed: str = "") -> list:
    """The watcher's waits at the lines of ``path`` holding ``texts``, one each, in function step."""
    from bench.usercode.stacks import Frame
    from bench.usercode.waits import Wait

    lines = path.read_text().splitlines()
    return [Wait((Frame(str(path), next(number for number, line in enumerate(lines, 1) if text in line), "step",
                        ""),), "torch", "cuStreamSynchronize", 0.0, 0.2, 0.2, True, allowed=allowed)
            for text in texts]


def test_a_tests_baseline_is_written_then_gates_its_waits_by_line(tmp_path):
    import linecache

    from bench.pytest_plugin import WaitedForGpu, gate_waits

    path = project(tmp_path, STEP)
    stored = tmp_path / "baselines" / "test_step.json"
    gate_waits(waits_at(path, "losses.append") + waits_at(path, "print(", allowed="log"), stored, update=True)
    assert [place.source for place in baseline.read(stored)] == ["losses.append(loss.item())"]  # allowed: not kept
    path.write_text("import os\n" + textwrap.dedent(STEP))
    linecache.checkcache()
    gate_waits(waits_at(path, "losses.append"), stored, update=False)  # moved down a line: the same place
    with pytest.raises(WaitedForGpu) as failed:
        gate_waits(waits_at(path, "losses.append", "return loss"), stored, update=False)
    assert "train/loop.py:9  new: 1 wait in cuStreamSynchronize" in str(failed.value)
    with pytest.raises(WaitedForGpu, match="no baseline yet: --bench-update-baseline writes it"):
        gate_waits(waits_at(path, "return loss"), tmp_path / "none.json", update=False)


def test_each_test_and_block_has_a_baseline_file_of_its_own(tmp_path):
    from bench.pytest_plugin import baseline_path

    first = baseline_path(tmp_path, "tests/test_a.py::test_step[cuda:0]", 1)
    assert first.parent == tmp_path and first.name.startswith("tests_test_a.py__test_step_cuda_0_-")
    assert baseline_path(tmp_path, "tests/test_a.py::test_step[cuda:0]", 2).name == first.stem + "-2.json"
    assert baseline_path(tmp_path, "tests/test_a.py::test_step[cuda/0]", 1) != first  # the same name, another id
    assert len(baseline_path(tmp_path, "x" * 400, 1).name) < 200


def test_pytest_refuses_update_without_a_baseline_directory(tmp_path):
    import os
    import subprocess
    import sys

    from paths import with_path

    (tmp_path / "test_theirs.py").write_text("def test_nothing():\n    pass\n")
    env = {**os.environ, "PYTHONPATH": with_path(str(Path(__file__).resolve().parents[1] / "src")),
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    command = [sys.executable, "-m", "pytest", "-p", "bench.pytest_plugin", "-p", "no:cacheprovider"]
    refused = subprocess.run([*command, "--bench-update-baseline", "test_theirs.py"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 4 and "--bench-update-baseline writes the baselines of --bench-baseline DIR" in \
        refused.stderr, refused.stdout + refused.stderr
    shown = subprocess.run([*command, "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert "--bench-baseline=DIR" in shown.stdout and "--bench-update-baseline" in shown.stdout


def test_places_are_named_by_qualified_scope_so_two_methods_of_one_name_stay_apart(tmp_path):
    code = '''\ufeffimport torch


class Student:
    def forward(self, x):
        return x.item()


class Teacher:
    def forward(self, x):
        return x.item()


def helper(x):
    return x.item()


print("\u2028", x.item())
value = x.item()
'''
    path = project(tmp_path, code)
    made = [baseline.kept(place(path, "return x.item()", 1, nth)) for nth in (1, 2, 3)]
    assert [(item.function, item.occurrence) for item in made] == [("Student.forward", 1), ("Teacher.forward", 1),
                                                                    ("helper", 1)]
    module = baseline.kept(place(path, "value = x.item()"))
    assert (module.function, module.occurrence, module.line) == ("<module>", 1, 19)  # helper's lines are not its own
    assert len({item.key for item in [*made, module]}) == 4


def test_threads_are_matched_by_their_role_not_their_counters(tmp_path):
    kept = saved(tmp_path, found(tmp_path, STEP, ("print(", 1, 1, "Thread-3 (log_metrics)")))
    now = found(tmp_path, STEP, ("print(", 1, 1, "Thread-11 (log_metrics)"))
    assert [change.change for change in baseline.compare(kept, now, "b").changes] == [Change.SAME]
    assert baseline.thread_role("ThreadPoolExecutor-0_1") == "ThreadPoolExecutor"
    assert baseline.thread_role("thread 140213873") == "thread" and baseline.thread_role("metrics") == "metrics"


def test_a_baseline_naming_one_place_twice_or_nested_too_deep_is_one_line(tmp_path):
    item = {"file": "a.py", "function": "f", "source": "x", "occurrence": 1, "thread": "", "count": 1}
    twice = tmp_path / "twice.json"
    twice.write_text(json.dumps({"format": baseline.FORMAT, "places": [item, {**item, "count": 3}]}))
    with pytest.raises(UsageError, match="places 1 and 2 are one place"):
        baseline.read(twice)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(UsageError, match="is not JSON"):
        baseline.read(deep)


def test_no_line_of_a_gate_is_a_command_to_the_ci_runner(tmp_path):
    from bench.analysis.escape import log_line

    assert log_line("x = '##[error]pwned'") == "x = '##\u200b[error]pwned'"
    assert log_line("  ::error::pwned").startswith("\u200b") and log_line("a::b") == "a::b"
    path = project(tmp_path, "def step():\n    y = '##[add-mask]secret'; z.item()\n")
    now = [Place(str(path), 2, "step", "y = '##[add-mask]secret'; z.item()", "torch", 1, 1.0, 0.0, 1.0, (), (), ())]
    comparison = baseline.compare([], now, "b.json")
    assert "##[" not in text(comparison, "t") and "##[" not in github(comparison, "t")
    assert "\u2028" not in baseline.to_json([baseline.kept(Place(str(path), 2, "step", "a\u2028b", "", 1, 1.0, 0.0,
                                                                  1.0, (), (), ()))], "t")


def test_the_summary_is_appended_to_what_the_job_wrote_before(tmp_path):
    from bench.cli.usercode import _append_summary

    summary = tmp_path / "step_summary.md"
    summary.write_text("## earlier steps\n")
    _append_summary(summary, "### bench syncs: first")
    _append_summary(summary, "### bench trace: second")
    assert summary.read_text() == "## earlier steps\n### bench syncs: first\n### bench trace: second\n"
    (tmp_path / "elsewhere.md").write_text("x")
    (tmp_path / "link.md").symlink_to(tmp_path / "elsewhere.md")
    with pytest.raises(UsageError, match="is a symlink"):
        _append_summary(tmp_path / "link.md", "y")
