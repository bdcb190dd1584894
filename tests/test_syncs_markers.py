"""scripts/syncs_markers.py and scripts/syncs_cases.py without a GPU: markers read from a case's own code, found
places matched to them, the case file's own regions' expectations, and a whole run of the script with bench.syncs
and the independent methods faked (the table written as parquet and JSON, and printed)."""

from __future__ import annotations

import importlib
import json
import sys
import threading
import types
from pathlib import Path

import pandas as pd
import pytest

from paths import SCRIPTS, script_module


@pytest.fixture(scope="module")
def markers():
    with script_module("syncs_markers") as module:
        yield module


@pytest.fixture(scope="module")
def cases(markers):
    with script_module("syncs_cases") as module:
        yield module


@pytest.mark.parametrize("comment, expected", [
    ("# wait", (1, False)), ("# wait x30", (30, False)), ("#wait x 3", (3, False)), ("# WAIT X4", (4, False)),
    ("# wait on thread", (1, True)), ("# wait on thread x2", (2, True)), ("# wait x2 on thread", (2, True)),
    ("# no wait", (0, False)), ("# noqa: E731  # wait", (1, False)), ("# wait x30  # noqa: E701", (30, False)),
    ("# wait: the copy", (1, False)), ("# wait (pageable)", (1, False)),
    ("# waits", None), ("# wait for the copy", None), ("# noqa", None), ("# the line that waits", None),
])
def test_parse_comment(markers, comment, expected):
    assert markers.parse_comment(comment) == expected


def thread_target(values):
    values.append(sum(values))  # wait


def marked_region(values):
    a = 1  # no wait
    for _ in range(30): values.append(a)  # wait x30  # noqa: E701
    text = "# wait x99 is inside a string, not a comment"

    def nested():
        return text  # wait x2

    worker = threading.Thread(target=thread_target, args=(values,), name="reader")
    worker.start()
    worker.join()  # wait on thread
    return nested()


def test_markers_of_counts_each_marked_line_its_nested_functions_and_listed_targets(markers):
    found = markers.markers_of(marked_region)
    assert [(marker.waits, marker.on_thread) for marker in found] == [(0, False), (30, False), (2, False), (1, True)]
    assert markers.expected_of(found) == (3, 33)  # "no wait" counts nothing
    lines = Path(__file__).read_text().splitlines()
    for marker in found:
        assert lines[marker.line - 1].strip() == marker.source and marker.file == str(Path(__file__).resolve())
    with_target = markers.markers_of(marked_region, thread_target, marked_region)  # each line once
    assert markers.expected_of(with_target) == (4, 34)
    assert with_target[0].function == "thread_target" and with_target[0].source.startswith("values.append(sum(")


def place(marker, count, **extra):
    return types.SimpleNamespace(file=marker.file, line=marker.line, count=count, source=marker.source,
                                 hold_ms=100.0 * count, **extra)


def test_match_agrees_only_with_the_same_lines_and_counts(markers):
    found = markers.markers_of(marked_region, thread_target)
    target, loop, nested, join = [marker for marker in found if marker.waits]
    exact = markers.match(found, [place(loop, 30), place(nested, 2), place(join, 1), place(target, 1)])
    assert exact.agrees and (exact.found_lines, exact.found_waits) == (4, 34) and not exact.missed
    assert exact.found_threads == "" and exact.on_threads == "" and not exact.thread_mismatch  # a watcher that
    # does not tell threads: no attributes, no complaint
    short = markers.match(found, [place(loop, 28), place(nested, 2), place(join, 1)])
    assert not short.agrees and "x30, found x28" in short.count_mismatch and "values.append(sum(" in short.missed
    extra = types.SimpleNamespace(file=loop.file, line=loop.line - 1, count=1, source="a = 1  # no wait")
    unexpected = markers.match(found, [place(loop, 30), place(nested, 2), place(join, 1), place(target, 1), extra])
    assert not unexpected.agrees and "a = 1" in unexpected.unexpected and unexpected.found_waits == 35


def test_match_reads_the_threads_a_watcher_tells(markers):
    found = markers.markers_of(marked_region, thread_target)
    target, loop, nested, join = [marker for marker in found if marker.waits]
    places = [place(loop, 30, thread="", on_thread=""), place(nested, 2, thread="", on_thread=""),
              place(join, 1, thread="", on_thread="reader"), place(target, 1, thread="reader", on_thread="")]
    told = markers.match(found, places)
    assert told.agrees and told.found_threads == "reader" and told.on_threads == "reader"
    assert not told.thread_mismatch and "[thread reader]" in told.found and "[on thread reader]" in told.found
    places[2] = place(join, 1, thread="", on_thread="")
    assert "marked on thread" in markers.match(found, places).thread_mismatch


def nested_code(function, name):
    """The code object of the function ``name`` defined inside ``function``."""
    pending = [function.__code__]
    while pending:
        code = pending.pop()
        if code.co_name == name:
            return code
        pending += [const for const in code.co_consts if isinstance(const, types.CodeType)]
    raise KeyError(name)


@pytest.mark.parametrize("factory, names, expected", [
    ("torch_cases", ["loop_30"], (1, 30)), ("torch_cases", ["thousand_items"], (1, 1000)),
    ("torch_cases", ["twelve_lines"], (12, 12)), ("torch_cases", ["three_items"], (1, 3)),
    ("torch_cases", ["matmul_then_item_10"], (1, 10)), ("torch_cases", ["ten_lines"], (10, 10)),
    ("torch_cases", ["thread_waits", "reader"], (2, 2)), ("torch_cases", ["metrics_thread", "log_loss"], (2, 2)),
    ("torch_cases", ["side_enqueue"], (0, 0)), ("torch_cases", ["event_query"], (0, 0)),
    ("torch_cases", ["graph_replay"], (1, 1)), ("torch_cases", ["print_tensor"], (1, 1)),
    ("host_cases", ["host_only"], (0, 0)), ("jax_cases", ["dispatch"], (0, 0)), ("jax_cases", ["if_positive"], (1, 1)),
    ("numba_cases", ["copy_to_host"], (1, 1)), ("two_gpu_cases", ["work_0_ready_item_1"], (0, 0)),
])
def test_the_case_files_regions_expect_what_their_names_say(markers, cases, factory, names, expected):
    codes = [nested_code(getattr(cases, factory), name) for name in names]
    assert markers.expected_of(markers.markers_of(*codes)) == expected


def test_the_case_file_has_at_least_25_marked_regions(cases, markers):
    marked = 0
    for factory in cases.GROUPS.values():
        pending = list(factory.__code__.co_consts)
        while pending:
            code = pending.pop()
            if isinstance(code, types.CodeType):
                pending += code.co_consts
                region = not code.co_name.startswith("<") and code.co_name not in ("reader", "log_loss")
                marked += region and bool(markers.markers_of(code))  # thread targets are not regions
    assert marked >= 25


def fake_environment():
    from bench.platform.env import Environment

    values = {field.name: (0 if field.type == "int" else "x") for field in Environment.fields()}
    return Environment.of(**{**values, "gpu_name": "Fake GPU 80GB", "gpu_uuid": "GPU-00000000-fake"})


def test_a_whole_run_with_faked_syncs_writes_and_prints_the_table(cases, markers, monkeypatch, tmp_path, capsys):
    monkeypatch.syspath_prepend(str(SCRIPTS))
    import bench.platform.env
    import bench.syncs  # noqa: F401  (bench.syncs is also the function's name: the module is sys.modules')

    def agreeing():
        for _ in range(3): sum([1])  # wait x3  # noqa: E701

    def missing():
        sum([2])  # wait

    def broken():
        sum([3])  # wait

    def fake_syncs(region, settle_ms=100.0):
        if region is broken:
            raise RuntimeError("held too long")
        found = [place(marker, marker.waits, thread="", on_thread="") for marker in markers.markers_of(region)
                 if marker.waits and region is agreeing]
        return types.SimpleNamespace(places=found, own_work=[], region_ms=1.5, held_region_ms=310.0,
                                     settle_ms=float(settle_ms), rows=lambda: [])

    def fake_independent(case, row):
        row.update(host_ms=1.0, gpu_done_ms=1.2, host_time_waited=True, independent="waits",
                   independent_method="host time", independent_agrees=True)

    def fake_group():
        return [cases.Case("three waits", "torch", agreeing), cases.Case("a wait missed", "cupy", missing),
                cases.Case("syncs raises", "jax", broken)]

    def missing_group():
        raise ImportError("No module named 'jax'")

    monkeypatch.setattr(sys.modules["bench.syncs"], "syncs", fake_syncs)
    monkeypatch.setattr(bench.platform.env, "gpu_environment", lambda device: fake_environment())
    monkeypatch.setattr(cases, "independent", fake_independent)
    monkeypatch.setattr(cases, "GROUPS", {"fake": fake_group, "jax": missing_group})
    assert cases.main([str(tmp_path), "--groups", "fake,jax", "--settle-ms", "50", "--no-assert-async"]) == 0
    [table] = tmp_path.glob("*-Fake-GPU-80GB-syncs-cases.parquet")
    rows = pd.read_parquet(table).set_index("case")
    assert list(rows.index) == ["three waits", "a wait missed", "syncs raises"]
    assert rows.loc["three waits", ["expected_lines", "expected_waits", "found_lines", "found_waits"]].tolist() == [
        1, 3, 1, 3]
    assert bool(rows.loc["three waits", "agrees"]) and not bool(rows.loc["a wait missed", "agrees"])
    assert "sum([2])" in rows.loc["a wait missed", "missed"] and rows.loc["three waits", "settle_ms"] == 50.0
    assert rows.loc["syncs raises", "status"] == "error" and "held too long" in rows.loc["syncs raises", "error"]
    assert rows.loc["three waits", "gpu_name"] == "Fake GPU 80GB" and rows["syncs_s"].notna().sum() == 2
    assert rows.loc["three waits", "hold_ms"] == 300.0 and rows.loc["three waits", "independent"] == "waits"
    from bench.results.store import read_metadata

    assert read_metadata(table)["table"] == "syncs-cases"
    summary = json.loads(table.with_suffix(".json").read_text())
    assert summary["format"] == "syncs-cases 2" and "jax" in summary["skipped_groups"]
    assert [row["case"] for row in summary["rows"]] == list(rows.index)
    findings = importlib.import_module("syncs_findings").case_table(summary, table.with_suffix(".json"))
    assert "| three waits | torch | 1 / 3 | 1 / 3 | yes | waits (host time) | 0.0 |" in findings
    assert "| a wait missed | cupy | 1 / 1 | 0 / 0 | **no** |" in findings and "- skipped jax: ImportError" in findings
    printed = capsys.readouterr().out
    assert "skipped group jax" in printed and "1 of 2 cases agree with their markers" in printed
    assert "- a wait missed: missed:" in printed and "- syncs raises: error: RuntimeError" in printed


def test_the_budget_skips_cases_not_started(cases, markers, monkeypatch, tmp_path):
    import bench.platform.env

    monkeypatch.setattr(bench.platform.env, "gpu_environment", lambda device: fake_environment())
    monkeypatch.setattr(cases, "GROUPS", {"host": cases.host_cases})
    assert cases.main([str(tmp_path), "--groups", "host", "--budget-s", "-1", "--no-assert-async"]) == 0
    [table] = tmp_path.glob("*-syncs-cases.parquet")
    rows = pd.read_parquet(table)
    assert rows["status"].tolist() == ["skipped"] and "time budget" in rows["error"].iloc[0]
    assert rows[["expected_lines", "expected_waits"]].values.tolist() == [[0, 0]] and rows["found_lines"].isna().all()
