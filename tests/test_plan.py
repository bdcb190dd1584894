"""What a sweep will run: configurations, stop rules, estimates, budgets, axis overrides, resume bookkeeping."""

import dataclasses
import math

import pandas as pd
import pytest

from bench.experiments import registry
from bench.sweep import plan
from bench.sweep.plan import Plan, axis_values, config_key, describe, estimate_s, expand, make, rules_for
from bench.sweep.resume import without_done
from bench.timing import StopRule
from fake_experiments import FINE, RULES


def _experiment(name):
    return registry()[name]


def _only(name, **options):
    """The one plan of ``name`` (multi-GPU experiments on two GPUs)."""
    (item,) = make([name], **{"devices": (0, 1) if registry()[name].processes.gpus > 1 else (0,), **options})
    return item


# --- expansion and estimates ------------------------------------------------------------------------------------


def test_expand_is_a_filtered_product_first_axis_slowest():
    configs = expand({"a": (1, 2), "b": ("x", "y")}, lambda c: (c["a"], c["b"]) != (2, "x"))
    assert configs == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "y"}]
    assert expand({"a": (1, 2, 3)}) == [{"a": 1}, {"a": 2}, {"a": 3}]
    assert expand({"a": (1,), "b": ()}) == []


def test_plan_estimates():
    rules = rules_for(FINE, "default")
    item = Plan(FINE, expand(FINE.axes), rules)
    assert item.seconds({"n": 0}) == FINE.cost.seconds({"n": 0}, rules["default"]) == 0.01
    assert item.estimate_s == pytest.approx(plan.PROCESS_S + 5 * 0.01)
    assert Plan(FINE, [], rules).estimate_s == 0.0  # nothing to run: no process either
    assert estimate_s([item, item]) == pytest.approx(plan.STARTUP_S + 2 * item.estimate_s)
    assert estimate_s([]) == plan.STARTUP_S


def test_default_and_quick_sweeps_fit_their_budgets():
    default, quick, full = (estimate_s(make(mode=mode)) for mode in ("default", "quick", "full"))
    assert default <= plan.DEFAULT_BUDGET_S == 120
    assert quick <= plan.QUICK_BUDGET_S == 20
    assert quick < default < full


# --- stop rules -------------------------------------------------------------------------------------------------


def test_rules_for_each_mode():
    assert rules_for(FINE, "default") == {"default": StopRule()} == rules_for(FINE, "full")
    rules = rules_for(RULES, "default")
    assert rules == {"default": StopRule(min_samples=3), "stage": StopRule(min_samples=7)}
    quick = rules_for(RULES, "quick")
    assert quick["default"] == StopRule(min_samples=3, time_cap_s=plan.QUICK_CAPS["time_cap_s"])
    assert quick["stage"] == StopRule(min_samples=plan.QUICK_CAPS["min_samples"],
                                      time_cap_s=plan.QUICK_CAPS["time_cap_s"])
    overlap = rules_for(_experiment("overlap"), "default")
    assert set(overlap) == {"default", "stage", "bound"}
    for purpose, changes in _experiment("overlap").accuracy.stop_rules.items():
        assert overlap[purpose] == StopRule().replace(**changes)


def test_rules_scaled_for_a_budget():
    scaled = rules_for(RULES, "default", scale=0.5)
    assert scaled["stage"].min_samples == 7 and scaled["default"].min_samples == 3  # the floor: no budget buys it off
    assert scaled["default"].time_cap_s == pytest.approx(StopRule().time_cap_s * 0.5)
    assert rules_for(RULES, "default", scale=1.0) == rules_for(RULES, "default")
    tiny = rules_for(FINE, "quick", scale=0.1)["default"]
    assert tiny.min_samples == plan.QUICK_CAPS["min_samples"] and tiny.time_cap_s == pytest.approx(plan.QUICK_CAPS["time_cap_s"] * 0.1)


# --- axis values ------------------------------------------------------------------------------------------------


def test_axis_values_in_the_axis_type():
    overlap, bandwidth = _experiment("overlap"), _experiment("bandwidth")
    assert axis_values(overlap, "streams", ["1", "8", "1"]) == (1, 8)
    assert all(type(value) is int for value in axis_values(overlap, "streams", ["3"]))
    assert axis_values(overlap, "compute_ratio", ["0.5", "2"]) == (0.5, 2.0)
    assert all(type(value) is float for value in axis_values(overlap, "compute_ratio", ["2"]))
    assert axis_values(overlap, "total_bytes", ["1G", "64M"]) == (1 << 30, 64 << 20)  # the size axis
    assert axis_values(bandwidth, "bytes", ["4K"]) == (4096,)
    assert axis_values(bandwidth, "host_memory", ["pageable", "pinned"]) == ("pageable", "pinned")


@pytest.mark.parametrize("axis, text, message", [
    ("compute_ratio", "nan", "positive finite"),
    ("compute_ratio", "inf", "positive finite"),
    ("compute_ratio", "-inf", "positive finite"),
    ("compute_ratio", "0", "positive finite"),
    ("compute_ratio", "-1", "positive finite"),
    ("streams", "0", "positive finite"),
    ("streams", "-1", "positive finite"),
    ("streams", "many", "is not a number"),
    ("streams", "1.5", "is not a number"),
    ("host_memory", "floppy", "'floppy' is not a value of host_memory; choose from pinned, pageable"),
    ("total_bytes", "0", "not a positive size"),
    ("total_bytes", "lots", "not a size"),
])
def test_axis_values_refused(axis, text, message):
    with pytest.raises(ValueError, match=message):
        axis_values(_experiment("overlap"), axis, [text])


def test_axis_values_accept_words_of_the_full_grid():
    experiment = dataclasses.replace(FINE, name="words", axes={"note": ("a",)},
                                     sweeps=dataclasses.replace(FINE.sweeps, full={"note": ("a", "b")}))
    assert axis_values(experiment, "note", ["b"]) == ("b",)


# --- plans ------------------------------------------------------------------------------------------------------


def test_make_plans_every_experiment_in_sweep_order():
    one_gpu = [name for name, experiment in registry().items() if experiment.processes.gpus == 1]
    assert [item.experiment.name for item in make()] == one_gpu  # the multi-GPU ones need --devices
    assert [item.name for item in make(devices=(0, 1)) if item.experiment.processes.gpus > 1] == [
        name for name in registry() if name not in one_gpu]
    plans = make()
    orders = [item.experiment.order for item in plans]
    assert orders == sorted(orders)
    for item in plans:
        assert item.configs and item.rules == rules_for(item.experiment, "default")
        sweeps = item.experiment.sweeps
        assert all(sweeps.valid(config) and sweeps.lean(config) for config in item.configs)


def test_make_modes_pick_axes_and_lean_configurations():
    for name, experiment in registry().items():
        for mode in plan.MODES:
            configs = _only(name, mode=mode).configs
            keep = [config for config in expand(experiment.axes_for(mode)) if experiment.sweeps.valid(config)
                    and (mode == "full" or experiment.sweeps.lean(config))]
            assert configs == keep, (name, mode)
    overlap = _experiment("overlap")
    full = _only("overlap", mode="full").configs
    assert any(not overlap.sweeps.lean(config) for config in full)  # --full keeps what the default sweep leaves out
    quick = _only("overlap", mode="quick")
    assert {c["total_bytes"] for c in quick.configs} == set(overlap.sweeps.quick["total_bytes"])
    assert quick.rules == rules_for(overlap, "quick")
    alloc = _experiment("alloc")
    assert any(not alloc.sweeps.lean(config) for config in _only("alloc", mode="full").configs)
    with pytest.raises(ValueError, match="unknown mode 'fast'"):
        make(mode="fast")


def test_make_sizes_replace_the_size_axis_only():
    bandwidth = _only("bandwidth", sizes=[4096, 1 << 20])
    assert {c["bytes"] for c in bandwidth.configs} == {4096, 1 << 20}
    overlap = _only("overlap", mode="quick", sizes=[32 << 20])
    assert {c["total_bytes"] for c in overlap.configs} == {32 << 20}
    with pytest.raises(ValueError, match="--sizes: launch takes no transfer size"):  # never dropped silently
        _only("launch", sizes=[4096])
    with pytest.raises(ValueError, match="--sizes and --axis bytes=... both set the sizes"):
        _only("bandwidth", sizes=[4096], axes={"bytes": ["8K"]})


def test_make_axis_overrides():
    item = _only("overlap", axes={"host_memory": ["pinned"], "streams": ["1", "8"], "total_bytes": ["1G"],
                                  "compute_ratio": ["0.5"]})
    assert {c["host_memory"] for c in item.configs} == {"pinned"}
    assert {c["streams"] for c in item.configs} == {1, 8} and {c["total_bytes"] for c in item.configs} == {1 << 30}
    assert {c["compute_ratio"] for c in item.configs} == {0.5}
    launch, bandwidth = make(["launch", "bandwidth"], axes={"path": ["graph"], "direction": ["H2D"]})
    assert launch.configs == [{"path": "graph"}] and {c["direction"] for c in bandwidth.configs} == {"H2D"}
    with pytest.raises(ValueError, match="unknown axis 'path'; the selected experiments have bytes, direction, "
                                         "host_memory"):
        make(["bandwidth"], axes={"path": ["graph"]})


def test_make_device_axes_take_gpus_of_the_sweep_only():
    item = _only("peer", devices=(0, 2), axes={"src": ["0"], "method": ["ce"]})
    assert {(c["src"], c["dst"]) for c in item.configs} == {(0, 2)}
    with pytest.raises(ValueError, match=r"src=1 is not a GPU of this sweep \(0, 2\)"):
        make(["peer"], devices=(0, 2), axes={"src": ["1"]})
    with pytest.raises(ValueError, match="src='-1' is not a GPU ordinal"):
        make(["peer"], devices=(0, 1), axes={"src": ["-1"]})


def test_make_refuses_unknown_and_repeated_experiments():
    with pytest.raises(ValueError, match="unknown experiment 'nope'; choose from bandwidth"):
        make(["nope"])
    with pytest.raises(ValueError, match="experiment 'bandwidth' is named twice"):
        make(["bandwidth", "launch", "bandwidth"])


def test_make_fits_a_budget_by_scaling_the_stop_rules():
    unbudgeted = make()
    assert make(budget_s=1e9) == unbudgeted
    floor = estimate_s([Plan(item.experiment, item.configs, rules_for(item.experiment, "default",
                                                                      plan.SMALLEST_SCALE)) for item in unbudgeted])
    budget = (floor + estimate_s(unbudgeted)) / 2
    fitted = make(budget_s=budget)
    assert [item.configs for item in fitted] == [item.configs for item in unbudgeted]  # the same configurations
    assert 0.9 * budget <= estimate_s(fitted) <= budget  # the largest scale that fits, not just any
    for item, original in zip(fitted, unbudgeted):
        for purpose, rule in item.rules.items():
            assert rule.time_cap_s < original.rules[purpose].time_cap_s
            assert rule.min_samples <= original.rules[purpose].min_samples
    with pytest.raises(ValueError, match=r"--budget 5: these \d+ configurations need at least \d+ s"):
        make(budget_s=5)


def test_describe():
    assert describe(_experiment("bandwidth"), {"host_memory": "pinned", "direction": "H2D", "bytes": 16 << 20}) == \
        "bandwidth pinned H2D 16 MiB"
    assert describe(_experiment("launch"), {"path": "graph"}) == "launch graph"
    row = pd.Series({"host_memory": "device", "direction": "D2D", "bytes": 4096.0, "gbps": 1.0})
    assert describe(_experiment("bandwidth"), row) == "bandwidth device D2D 4 KiB"


# --- resuming ---------------------------------------------------------------------------------------------------


def test_config_key_compares_numbers_as_numbers():
    assert config_key("e", {"n": 1}, ["n"]) == config_key("e", {"n": 1.0}, ["n"]) == ("e", 1.0)
    assert config_key("e", {"a": "x", "n": 2, "other": 9}, ["a", "n"]) == ("e", "x", 2.0)
    assert config_key("e", {"n": 1}, ["n"]) != config_key("f", {"n": 1}, ["n"])
    assert config_key("e", {"flag": True}, ["flag"]) == ("e", "True")


def test_without_done_keeps_what_did_not_finish():
    item = Plan(FINE, expand(FINE.axes), rules_for(FINE, "default"))
    previous = pd.DataFrame([
        {"experiment": "fine", "n": 0.0, "status": "ok"},
        {"experiment": "fine", "n": 1.0, "status": "failed"},
        {"experiment": "fine", "n": 2.0, "status": "skipped"},
        {"experiment": "fine", "n": 3.0, "status": "unsupported"},
        {"experiment": "other", "n": 4.0, "status": "ok"},
        {"experiment": "fine", "n": math.nan, "status": "ok"},
    ])
    (remaining,) = without_done([item], previous)
    assert [config["n"] for config in remaining.configs] == [1, 4]
    assert remaining.rules == item.rules and remaining.experiment is FINE
    assert without_done([item], None) == [item] and without_done([item], pd.DataFrame()) == [item]
    typed = pd.DataFrame({"experiment": ["fine"], "n": pd.array([2], dtype="Int64"), "status": ["ok"]})
    assert [config["n"] for config in without_done([item], typed)[0].configs] == [0, 1, 3, 4]


def test_every_experiment_fits_its_share_of_the_default_budget():
    """A new experiment in the default sweep must bring its share, and the shares must fit the budget together."""
    from bench.experiments import registry

    plans = plan.make()
    for item in plans:
        assert item.estimate_s <= item.experiment.cost.share_s, (item.experiment.name, item.estimate_s)
    assert plan.STARTUP_S + sum(experiment.cost.share_s for experiment in registry().values()) <= plan.DEFAULT_BUDGET_S


def _committed_default_sweeps() -> list[tuple[dict, list[dict]]]:
    """The committed results (the files under results/ outside its ``_`` folders: logs, references, partial and older
    runs) that are complete default sweeps of one H200 (the model is of an H200) whose kernels were compiled before
    the experiments ran (their metadata has ``warm_s``: the model is of warm kernel caches; earlier sweeps compiled in
    each experiment's process): each one's metadata and rows."""
    from pathlib import Path

    from bench.results import store
    from bench.experiments import registry

    schema, runs = store.suite_schema(registry()), []
    for path in store.results_files(Path(__file__).resolve().parents[1] / "results"):
        run = store.read_metadata(path)
        if (run.get("mode") == "default" and run.get("complete") and "warm_s" in run
                and len(run.get("devices", [0])) == 1 and "H200" in run.get("environment", {}).get("gpu_name", "")):
            runs.append((run, store.records(store.read(path, schema))))
    return runs


def _model_and_measured(item: Plan, run: dict, rows: list[dict]) -> tuple[float, float] | None:
    """What the model expects and what ``run`` took for the configurations of ``item`` that both have: the plan's
    estimate of them (a process start and setup per process, and each configuration under the rules it ran at: the
    plan's scaled by the row's ``stop_scale`` where the sweep paced it), against the experiment's wall time in the
    run (its processes' start included) less that of the configurations the plan no longer has. None where the run
    did not measure the experiment, or measured it under other stop rules than the plan's."""
    name, axes = item.experiment.name, list(item.experiment.axes)
    rules = {purpose: dataclasses.asdict(rule) for purpose, rule in item.rules.items()}
    mine = [row for row in rows if row["experiment"] == name]
    if not mine or name not in run.get("wall_s", {}) or run["stop_rules"].get(name) != rules:
        return None
    planned = {config_key(name, config, axes): config for config in item.configs}
    shared = [(planned[config_key(name, row, axes)], row) for row in mine if config_key(name, row, axes) in planned]
    dropped_s = sum(row["wall_s"] for row in mine if config_key(name, row, axes) not in planned)
    if not shared:
        return None
    part = dataclasses.replace(item, configs=[config for config, _ in shared])
    processes_s = part.estimate_s - sum(part.seconds(config) for config in part.configs)
    configs_s = sum(part.scaled(row["stop_scale"] if row.get("stop_scale") is not None else 1.0).seconds(config)
                    for config, row in shared)
    return processes_s + configs_s, run["wall_s"][name] - dropped_s


def test_the_time_model_predicts_the_committed_default_sweep():
    """The model's claim: for each experiment of the default plan that a committed warm H200 default sweep
    (:func:`_committed_default_sweeps`) ran under the plan's stop rules, the model's estimate of the configurations
    both have is within 25% of what the sweeps took for them (summed over the sweeps; :func:`_model_and_measured`),
    so the plan, the ETA and --budget mean something. The plan may have gained or lost configurations since: only
    those both have count. An experiment whose stop rules changed since is not held to a sweep measured under other
    rules, but the experiments held to it carry most of the plan's time, or a new sweep is due."""
    runs = _committed_default_sweeps()
    assert runs, "no complete, warm default sweep of one H200 in results/ (outside its _ folders)"
    plans = plan.make()
    compared, off = {}, {}
    for item in plans:
        found = [pair for run, rows in runs if (pair := _model_and_measured(item, run, rows))]
        if found:
            model_s, measured_s = (sum(values) for values in zip(*found))
            compared[item.experiment.name] = item.estimate_s
            if abs(model_s / measured_s - 1) >= 0.25:
                off[item.experiment.name] = (round(model_s, 2), round(measured_s, 2))
    assert not off, f"the model against the committed sweeps (model s, measured s): {off}"
    planned_s = sum(item.estimate_s for item in plans)
    assert sum(compared.values()) > planned_s / 2, (
        f"the committed sweeps were measured under other stop rules than most of the plan's: only {sorted(compared)} "
        f"({sum(compared.values()):.0f} of {planned_s:.0f} s) could be held to them")


def _paced_run(planned_s, slowness, allowance_s, bound_part=1.0):
    """Simulate a process whose configurations each take ``slowness`` × planned seconds, ``bound_part`` of them
    in sampling loops whose length the stop rule decides (which the pace's scale shortens)."""
    pace = plan.Pace(planned_s, allowance_s)
    elapsed = bound = 0.0
    scale, scales = 1.0, []
    for seconds in planned_s:
        scales.append(scale)
        bound_now = slowness * seconds * bound_part * scale
        elapsed += slowness * seconds * (1 - bound_part) + bound_now
        bound += bound_now
        scale = pace.finished(elapsed, bound)
    return elapsed, scales


def test_pace_keeps_a_slower_machine_to_the_plan():
    planned = [0.5] * 20
    elapsed, scales = _paced_run(planned, slowness=2.0, allowance_s=sum(planned), bound_part=0.8)
    assert elapsed <= 1.1 * sum(planned)  # unpaced it would take 20 s
    assert scales[0] == 1.0 and min(scales) < 0.6


def test_pace_leaves_a_machine_as_fast_as_the_model_alone():
    planned = [0.5] * 20
    elapsed, scales = _paced_run(planned, slowness=0.8, allowance_s=sum(planned))
    assert scales == [1.0] * 20
    assert elapsed == pytest.approx(0.8 * sum(planned))


def test_pace_never_scales_for_time_no_rule_bounds():
    """A slow experiment whose time goes to compiling, allocating or sampling that converged keeps its rules:
    smaller ones would save nothing and measure worse."""
    planned = [0.5] * 20
    _, scales = _paced_run(planned, slowness=3.0, allowance_s=sum(planned), bound_part=0.0)
    assert scales == [1.0] * 20


def test_pace_does_not_project_the_first_configurations_setup():
    """The first configuration also pays the process's setup (1.6 s for bandwidth's first on an H100, planned at a
    few ms): the rest, running as planned, keeps the plan's rules."""
    planned = [0.01] * 20
    pace = plan.Pace(planned, allowance_s=5.0)
    elapsed, scales = 1.6, []
    scales.append(pace.finished(elapsed, 0.0))
    for _ in planned[1:]:
        elapsed += 0.01
        scales.append(pace.finished(elapsed, elapsed - 1.6))
    assert scales == [1.0] * 20


def test_pace_never_scales_below_the_smallest_scale():
    planned = [1.0] * 5
    _, scales = _paced_run(planned, slowness=100.0, allowance_s=5.0)
    assert min(scales) == plan.SMALLEST_SCALE


def test_fitting_scale():
    unbudgeted = make(["launch", "alloc"])
    total = estimate_s(unbudgeted)
    assert plan.fitting_scale(unbudgeted, total + 1) == 1.0
    scale = plan.fitting_scale(unbudgeted, 0.7 * total)
    assert plan.SMALLEST_SCALE < scale < 1.0
    assert estimate_s([item.scaled(scale) for item in unbudgeted]) <= 0.7 * total
    assert plan.fitting_scale(unbudgeted, 0.0) == plan.SMALLEST_SCALE
