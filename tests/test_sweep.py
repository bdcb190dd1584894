import math

import pandas as pd
import pytest

from bench import store, sweep
from bench.experiments import Experiment, registry
from bench.experiments.bandwidth import EXPERIMENT as BANDWIDTH
from bench.timing import StopRule


def test_expand_is_a_filtered_product_first_axis_slowest():
    configs = sweep.expand({"a": (1, 2), "b": ("x", "y")}, valid=lambda c: (c["a"], c["b"]) != (2, "x"))
    assert configs == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "y"}]


def test_bandwidth_default_plan():
    (item,) = sweep.plan(["bandwidth"])
    sizes = sorted({c["bytes"] for c in item.configs})
    assert sizes[0] == 4 << 10 and sizes[-1] == 1 << 30 and len(sizes) == 19
    combos = {(c["direction"], c["host_memory"]) for c in item.configs}
    assert ("D2D", "device") in combos and ("D2D", "pinned") not in combos and ("H2D", "device") not in combos
    assert len(combos) == 3 * 3 + 1
    assert len(item.configs) == 10 * 19


def test_plan_quick_and_sizes_override():
    (quick,) = sweep.plan(["bandwidth"], quick=True)
    assert len(quick.configs) < len(sweep.plan(["bandwidth"])[0].configs)
    assert 16 << 20 in {c["bytes"] for c in quick.configs}
    (sized,) = sweep.plan(["bandwidth"], quick=True, sizes=[4096, 1 << 20])
    assert {c["bytes"] for c in sized.configs} == {4096, 1 << 20}


def test_plan_rejects_unknown_experiment():
    with pytest.raises(ValueError, match="unknown experiment 'nope'; choose from bandwidth"):
        sweep.plan(["nope"])


def test_registry_entries_are_complete():
    for name, experiment in registry().items():
        assert experiment.name == name and experiment.axes
        assert experiment.size_axis in experiment.axes or experiment.size_axis == ""


def test_describe():
    config = {"host_memory": "pinned", "direction": "H2D", "bytes": 16 << 20}
    assert sweep.describe(BANDWIDTH, config) == "bandwidth pinned H2D 16 MiB"


def _fake_experiment(rows_before_stop, stop_with):
    def run(configs, timer):
        for index, config in enumerate(configs):
            if index == rows_before_stop:
                raise stop_with
            yield {**config, "samples_ms": [1.0, 1.1], "median_ms": 1.0, "status": "ok"}

    return Experiment(name="fake", description="", axes={"n": tuple(range(5))}, run=run,
                      memory_needed=lambda configs: (0, 0), headline=lambda rows: rows)


class _Timer:
    rule = StopRule()


@pytest.mark.parametrize("stop_with", [KeyboardInterrupt(), RuntimeError("device lost")])
def test_interrupted_or_failed_sweep_keeps_finished_rows(tmp_path, stop_with):
    experiment = _fake_experiment(3, stop_with)
    plans = [sweep.Plan(experiment, sweep.expand(experiment.axes))]
    path = tmp_path / "run.parquet"
    if isinstance(stop_with, KeyboardInterrupt):
        outcome = sweep.run(plans, _Timer(), {"gpu_name": "fake"}, path, run_id="r1")
        assert outcome.interrupted and outcome.planned == 5 and outcome.path == path
    else:
        with pytest.raises(RuntimeError):
            sweep.run(plans, _Timer(), {"gpu_name": "fake"}, path, run_id="r1")
    rows = pd.read_parquet(path)
    assert list(rows["n"]) == [0, 1, 2] and set(rows["gpu_name"]) == {"fake"}
    assert store.read_metadata(path)["complete"] is False


def test_sweep_that_finishes_nothing_writes_nothing(tmp_path):
    experiment = _fake_experiment(0, KeyboardInterrupt())
    path = tmp_path / "run.parquet"
    outcome = sweep.run([sweep.Plan(experiment, [{"n": 0}])], _Timer(), {}, path, run_id="r1")
    assert outcome.path is None and not path.exists() and list(tmp_path.iterdir()) == []


def test_complete_sweep_metadata(tmp_path):
    experiment = _fake_experiment(99, None)
    path = tmp_path / "run.parquet"
    outcome = sweep.run([sweep.Plan(experiment, sweep.expand(experiment.axes))], _Timer(), {"gpu_name": "g"},
                        path, run_id="r7", command="python -m bench sweep")
    metadata = store.read_metadata(path)
    assert not outcome.interrupted and metadata["complete"] is True and metadata["run_id"] == "r7"
    assert metadata["environment"] == {"gpu_name": "g"} and metadata["stop_rule"]["target_relerr"] == 0.005
    assert not math.isnan(pd.read_parquet(path)["median_ms"].iloc[0])


def test_sizes_do_not_add_an_axis_to_experiments_without_one():
    (item,) = sweep.plan(["launch"], sizes=[4096])
    assert [set(c) for c in item.configs] == [{"path"}] * 3


def test_overlap_default_plan_covers_the_issue_axes():
    (item,) = sweep.plan(["overlap"])
    assert len(item.configs) == 2 * 3 * 2 * 2 * 2 * 2 * 7
    assert {c["streams"] for c in item.configs} == {1, 2, 3, 4, 8, 16, 32}
    (sized,) = sweep.plan(["overlap"], sizes=[64 << 20])
    assert {c["total_bytes"] for c in sized.configs} == {64 << 20}


def test_side_tables_and_stop_rule_overrides(tmp_path):
    def run(configs, timer):
        assert timer.rule.min_samples == 3  # the experiment's override reached its timer
        for config in configs:
            yield {**config, "median_ms": 1.0, "_timeline": [{"op": "H2D", "start_ms": 0.0, "end_ms": 1.0}]}

    experiment = Experiment(name="piped", description="", axes={"n": (1, 2)}, run=run,
                            memory_needed=lambda configs: (0, 0), headline=lambda rows: rows,
                            stop_rule={"min_samples": 3})
    path = tmp_path / "20261121T000000Z-x.parquet"
    sweep.run([sweep.Plan(experiment, sweep.expand(experiment.axes))], _Timer(), {}, path, run_id="r")
    rows = pd.read_parquet(path)
    assert "_timeline" not in rows.columns and list(rows["n"]) == [1, 2]
    tables = store.read_side_tables(path)
    assert list(tables) == ["timeline"]
    assert list(tables["timeline"]["n"]) == [1, 2] and set(tables["timeline"]["run_id"]) == {"r"}
    assert store.newest(tmp_path) == path
    assert store.read_metadata(path)["stop_rule_overrides"] == {"piped": {"min_samples": 3}}


def test_axis_overrides():
    (item,) = sweep.plan(["overlap"], axes={"host_memory": ["pinned"], "streams": ["1", "8"],
                                             "total_bytes": ["1G"], "compute_ratio": ["0.5"]})
    assert {c["host_memory"] for c in item.configs} == {"pinned"}
    assert {c["streams"] for c in item.configs} == {1, 8} and {c["total_bytes"] for c in item.configs} == {1 << 30}
    assert {c["compute_ratio"] for c in item.configs} == {0.5}
    with pytest.raises(ValueError, match="unknown axis 'path'"):
        sweep.plan(["bandwidth"], axes={"path": ["graph"]})
    (launch, bandwidth) = sweep.plan(["launch", "bandwidth"], axes={"path": ["graph"], "direction": ["H2D"]})
    assert launch.configs == [{"path": "graph"}] and {c["direction"] for c in bandwidth.configs} == {"H2D"}
