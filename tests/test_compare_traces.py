"""``bench compare`` of two trace files (``bench trace --save``): each target's numbers old against new, a change
flagged only beyond the traced runs' spread, ``--fail-above``, text, JSON and Markdown, and the refusals. Traces are
built from synthetic records (times in ns on CUPTI's clock), saved as ``bench trace --save`` saves them."""

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import synthetic
from bench import cli
from bench.results import store
from bench.experiments import registry
from bench.trace import result_of, save
from bench.usercode.activity import Activity, Op, Recording
from bench.usercode.trace.compare import Line, Verdict, change_text, compare, judge, read

MS = 1_000_000
MIB = 1 << 20


def run(start: int, kernel_ms: float, extra: str = "", extra_ms: float = 0.0, pageable_ms: float = 0.0) -> Recording:
    """One traced run from ``start``: a 1 MiB pinned upload hidden behind kernel "gemm" of ``kernel_ms``, then kernel
    ``extra`` (``extra_ms``) and a pageable 1 MiB upload (``pageable_ms``) where given."""
    records = [Activity(Op.H2D, 2, start, start + MS // 2, bytes=MIB, host_memory="pinned"),
               Activity(Op.KERNEL, 1, start, start + int(kernel_ms * MS), name="gemm")]
    end = start + int(kernel_ms * MS)
    if extra:
        records.append(Activity(Op.KERNEL, 1, end, end + int(extra_ms * MS), name=extra))
        end += int(extra_ms * MS)
    if pageable_ms:
        records.append(Activity(Op.H2D, 2, end, end + int(pageable_ms * MS), bytes=MIB, host_memory="pageable"))
    return Recording(records, [])


def traced(kernel_ms: list[float], target: str = "x.py:step", **extra):
    """A trace of one run per kernel time (the copies' bound 0.5 ms, a pinned MiB 0.1 ms)."""
    recordings = [run(index * 1000 * MS, ms, **extra) for index, ms in enumerate(kernel_ms)]
    return result_of(recordings, copy_bound=lambda h2d, d2h: (0.5, 2), pinned=lambda op, nbytes: (0.1, "measured"),
                     target=target)


def saved(path: Path, *found, **environment) -> Path:
    """``found`` traces saved as one ``bench trace --save`` file."""
    return save([(result.target, result) for result in found], synthetic.environment(**environment), path)


@pytest.fixture
def main(tmp_path, monkeypatch, capsys):
    """``bench`` in this process, in ``tmp_path``: (exit status, stdout, stderr)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")

    def bench(*args):
        status = cli.main([str(arg) for arg in args])
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    return bench


# --- the verdict -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("old, new, old_runs, new_runs, share, verdict", [
    (5.0, 6.0, (4.9, 5.0, 5.1), (5.9, 6.0, 6.1), False, Verdict.WORSE),  # every new run above every old one
    (5.0, 4.0, (4.9, 5.0, 5.1), (3.9, 4.0, 4.1), False, Verdict.BETTER),
    (0.8, 0.6, (0.79, 0.8, 0.81), (0.59, 0.6, 0.61), True, Verdict.WORSE),  # a share that falls is worse
    (0.6, 0.8, (0.59, 0.6, 0.61), (0.79, 0.8, 0.81), True, Verdict.BETTER),
    (5.0, 6.0, (4.0, 5.0, 6.0), (5.9, 6.0, 6.1), False, Verdict.SAME),  # the runs overlap: within the spread
    (5.0, 6.0, (4.9, 5.0, 5.9), (5.9, 6.0, 6.1), False, Verdict.SAME),  # touching is overlapping
    (5.0, 6.0, (5.0,), (5.9, 6.0, 6.1), False, Verdict.UNCLEAR),  # one run: no spread
    (5.0, 6.0, (), (), False, Verdict.UNCLEAR),  # a file that keeps no runs
    (5.0, 5.0, (), (), False, Verdict.SAME),
    (None, 6.0, (), (6.0, 6.1), False, Verdict.CHANGED),  # only the new trace has it
    (5.0, None, (5.0, 5.1), (), False, Verdict.CHANGED),
])
def test_a_change_is_flagged_only_beyond_the_runs_spread(old, new, old_runs, new_runs, share, verdict):
    assert judge(old, new, old_runs, new_runs, share) == verdict


def test_each_number_of_a_target_is_judged_against_its_runs(tmp_path):
    old = read(saved(tmp_path / "old.parquet", traced([4.9, 5.0, 5.1], extra="relu", extra_ms=1.0)))
    new = read(saved(tmp_path / "new.parquet", traced([5.9, 6.0, 6.1], extra="relu", extra_ms=1.0)))
    found = {line.measure: line for line in compare(old, new).lines}
    assert list(found) == ["makespan ms", "efficiency", "copies hidden", "idle ms", "pageable cost ms",
                           "kernel gemm ms", "kernel relu ms"]  # the headline numbers, then kernels, largest first
    makespan = found["makespan ms"]
    assert (makespan.old, makespan.new, makespan.verdict) == (6.0, 7.0, Verdict.WORSE)
    assert makespan.old_runs == (5.9, 6.0, 6.1) and makespan.new_runs == (6.9, 7.0, 7.1)
    assert makespan.percent == pytest.approx(100 / 6) and makespan.worse_by() == pytest.approx(100 / 6)
    assert found["efficiency"].verdict == Verdict.SAME and found["efficiency"].new == 1.0  # compute is the bound
    gemm = found["kernel gemm ms"]
    assert (gemm.old, gemm.new, gemm.verdict) == (5.0, 6.0, Verdict.WORSE) and gemm.new_runs == (5.9, 6.0, 6.1)
    relu = found["kernel relu ms"]
    assert (relu.old, relu.new, relu.verdict, relu.old_runs) == (1.0, 1.0, Verdict.SAME, (1.0, 1.0, 1.0))
    assert found["copies hidden"].verdict == Verdict.SAME and found["copies hidden"].old == 1.0  # all hidden
    assert found["idle ms"].verdict == Verdict.SAME and found["pageable cost ms"].old == 0.0


def test_the_runs_of_a_worse_or_better_number_read_apart_however_close():
    """A number worse or better has every run of one side beyond every run of the other; its runs are stated with
    the decimals that keep them apart (at three, 0.0046 and 0.0047 ms both read 0.005: touching, which is
    overlapping), and its change never reads as none."""
    runs = (0.0041, 0.0046), (0.0047, 0.0049)
    line = Line("x.py:step", "GPU", "kernel k ms", False, 0.0043, 0.0048, *runs, judge(0.0043, 0.0048, *runs))
    assert line.verdict == Verdict.WORSE
    assert change_text(line) == "0.0043 → 0.0048 ms (+11.6%; runs 0.0041–0.0046 → 0.0047–0.0049)"
    same = Line("x.py:step", "GPU", "kernel k ms", False, 0.0043, 0.0046, (0.0041, 0.0046), (0.0046, 0.0049),
                Verdict.SAME)
    assert change_text(same) == "0.004 → 0.005 ms (+7.0%; runs 0.004–0.005 → 0.005–0.005)"
    shares = (0.7990, 0.80041), (0.80044, 0.8010)
    share = Line("x.py:step", "GPU", "efficiency", True, 0.8, 0.8005, *shares, judge(0.8, 0.8005, *shares, True))
    assert share.verdict == Verdict.BETTER
    assert change_text(share) == "80.000% → 80.050% (+0.050 points; runs 79.900%–80.041% → 80.044%–80.100%)"
    runs = (99.99, 100.0), (100.02, 100.04)
    small = Line("x.py:step", "GPU", "makespan ms", False, 100.0, 100.03, *runs, judge(100.0, 100.03, *runs))
    assert change_text(small) == "100.000 → 100.030 ms (+0.03%; runs 99.990–100.000 → 100.020–100.040)"  # not +0.0%


def test_a_kernel_only_one_trace_ran_is_changed_and_named(tmp_path):
    old = read(saved(tmp_path / "old.parquet", traced([4.9, 5.0, 5.1])))
    new = read(saved(tmp_path / "new.parquet", traced([4.9, 5.0, 5.1], extra="copy_kernel", extra_ms=2.0)))
    result = compare(old, new)
    (added,) = [line for line in result.lines if line.verdict == Verdict.CHANGED]
    assert added.measure == "kernel copy_kernel ms" and (added.old, added.new) == (None, 2.0)
    assert "x.py:step: kernel copy_kernel ms: only in the new trace (2.000 ms)" in result.headlines
    assert added.worse_by() == 0 and added not in result.worse_than(0)  # a new kernel fails no gate by itself


def test_pageable_cost_and_idle_are_compared(tmp_path):
    old = read(saved(tmp_path / "old.parquet", traced([5.0, 5.0, 5.0], pageable_ms=0.3)))
    new = read(saved(tmp_path / "new.parquet", traced([5.0, 5.0, 5.0], pageable_ms=1.1)))
    found = {line.measure: line for line in compare(old, new).lines}
    cost = found["pageable cost ms"]
    assert (cost.old, cost.new) == (pytest.approx(0.2), pytest.approx(1.0)) and cost.verdict == Verdict.WORSE
    assert cost.percent == pytest.approx(400)


# --- the command ---------------------------------------------------------------------------------------------------

def test_compare_of_two_traces_says_what_got_worse_and_fails_above_the_gate(main, tmp_path):
    saved(tmp_path / "old.parquet", traced([4.9, 5.0, 5.1]), traced([2.0, 2.1, 2.2], target="other"))
    saved(tmp_path / "new.parquet", traced([5.9, 6.0, 6.1]), traced([2.0, 2.1, 2.3], target="other"))
    status, out, err = main("compare", "old.parquet", "new.parquet")
    assert status == 0 and err == ""
    assert "  - x.py:step: makespan ms worse, 5.000 → 6.000 ms (+20.0%; runs 4.900–5.100 → 5.900–6.100)" in out
    assert "other" not in out.split("\n\n", 1)[0]  # its runs overlap: nothing to say
    assert out.rstrip().splitlines()[-1].endswith("same (not listed; --all lists every number)")
    status, out, err = main("compare", "old.parquet", "new.parquet", "--fail-above", "10")
    assert status == 1 and out.rstrip().endswith("\n2 numbers worse by more than 10%: failing")  # makespan, gemm
    status, out, err = main("compare", "old.parquet", "new.parquet", "--fail-above", "25")
    assert status == 0 and "failing" not in out


def test_compare_of_two_traces_as_json_and_markdown(main, tmp_path):
    saved(tmp_path / "old.parquet", traced([4.9, 5.0, 5.1]))
    saved(tmp_path / "new.parquet", traced([5.9, 6.0, 6.1]))
    status, out, err = main("compare", "old.parquet", "new.parquet", "--format", "json", "--fail-above", "10",
                            "--all")
    assert status == 1
    document = json.loads(out)
    assert document["compared"] == "traces" and document["fail_above"]["percent"] == 10
    numbers = {number["number"]: number for number in document["numbers"]}
    assert numbers["makespan ms"]["old_runs"] == [4.9, 5.0, 5.1] and numbers["makespan ms"]["verdict"] == "worse"
    assert numbers["makespan ms"]["change"] == pytest.approx(20) and numbers["makespan ms"]["change_unit"] == "%"
    assert numbers["efficiency"]["change_unit"] == "points" and document["fail_above"]["failing"] == 2
    assert numbers["copies hidden"]["verdict"] == "same"  # --all lists the same ones too
    status, out, err = main("compare", "old.parquet", "new.parquet", "--format", "markdown")
    assert status == 0 and out.startswith("## What changed between the traces\n")
    assert "| makespan ms | 5.000 | 6.000 | 4.900–5.100 | 5.900–6.100 | worse +20.0% |" in out


def test_traces_saved_before_bench_kept_the_runs_are_unclear_with_a_warning(main, tmp_path):
    path = saved(tmp_path / "old.parquet", traced([4.9, 5.0, 5.1]))
    table = pq.read_table(path)
    kept = [name for name in table.column_names if "_runs" not in name]
    store.write_table(tmp_path / "older.parquet", table.select(kept).replace_schema_metadata(table.schema.metadata))
    saved(tmp_path / "new.parquet", traced([5.9, 6.0, 6.1]))
    status, out, err = main("compare", "older.parquet", "new.parquet")
    assert status == 0 and "the old trace keeps no numbers of each run" in err
    assert "nothing beyond the runs' spread" in out and "unclear" in out


def test_different_gpus_and_drivers_are_said(main, tmp_path):
    saved(tmp_path / "old.parquet", traced([5.0, 5.0, 5.0]))
    saved(tmp_path / "new.parquet", traced([5.0, 5.0, 5.0]), gpu_uuid="GPU-bbbbbbbb-0000", driver_version="590.0")
    status, out, err = main("compare", "old.parquet", "new.parquet")
    assert status == 0
    assert "bench: warning: different GPUs: old Test GPU GPU-00000000-1111-2222-3333-444444444444 on node-a, new " \
           "Test GPU GPU-bbbbbbbb-0000 on node-a" in err
    assert "bench: warning: driver_version differs: 580.0 → 590.0" in err


def test_hostile_names_are_escaped_where_they_land(main, tmp_path):
    name = "k<float>|x_y*\x1b[31m"
    saved(tmp_path / "old.parquet", traced([5.0, 5.0, 5.0], extra=name, extra_ms=1.0))
    saved(tmp_path / "new.parquet", traced([5.0, 5.0, 5.0], extra=name, extra_ms=2.0))
    status, out, err = main("compare", "old.parquet", "new.parquet", "--format", "markdown")
    assert "kernel k\\<float\\>\\|x\\_y\\*\\\\x1b\\[31m ms" in out and "\x1b" not in out
    status, out, err = main("compare", "old.parquet", "new.parquet")
    assert "kernel k<float>|x_y*\\x1b[31m ms" in out and "\x1b" not in out
    status, out, err = main("compare", "old.parquet", "new.parquet", "--format", "json")
    assert any(number["number"] == f"kernel {name} ms" for number in json.loads(out)["numbers"])


@pytest.mark.parametrize("old, new, said", [
    ("trace.parquet", "results.parquet", "results.parquet is not a trace file"),
    ("results.parquet", "trace.parquet", "results.parquet is not a trace file"),
    ("trace.parquet", "other.parquet", "have no target in common"),
])
def test_compare_refuses_a_trace_beside_another_file_or_no_common_target(main, tmp_path, old, new, said):
    saved(tmp_path / "trace.parquet", traced([5.0, 5.1, 5.2]))
    saved(tmp_path / "other.parquet", traced([5.0, 5.1, 5.2], target="y.py:step"))
    store.write(tmp_path / "results.parquet", synthetic.all_records()[:1], store.suite_schema(registry()), {})
    before = sorted(path.name for path in tmp_path.iterdir())
    status, out, err = main("compare", old, new)
    assert status == 2 and out == "" and err.count("\n") == 1 and said in err, err
    assert sorted(path.name for path in tmp_path.iterdir()) == before


def test_gpu_picks_the_traces_of_one_gpu(main, tmp_path):
    saved(tmp_path / "old.parquet", traced([5.0, 5.1, 5.2]))
    saved(tmp_path / "new.parquet", traced([5.0, 5.1, 5.2]))
    status, out, err = main("compare", "old.parquet", "new.parquet", "--gpu", "GPU-00000000")
    assert status == 0
    status, out, err = main("compare", "old.parquet", "new.parquet", "--gpu", "GPU-ffff")
    assert status == 2 and err.startswith("bench: error: old trace: --gpu GPU-ffff: no such GPU")
