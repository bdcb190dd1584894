"""Every registered experiment keeps the contract the harness and the analysis commands rely on (checked for each,
so a new experiment module is checked as soon as it exists); then each experiment's pure logic."""

import math
import pickle
import subprocess
import sys
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

import synthetic
from bench.analysis import noise, numbers, selection
from bench.results import store
from bench.catalogs import DOCS_HOST, documented_waits
from bench.catalogs import measured as catalog_module
from bench.catalogs.runtime import catalog, documented_serializes
from bench.experiments import Cost, Experiment, Sweeps, alloc, graphs, overlap, registry
from bench.experiments import bandwidth as bandwidth_module
from bench.measure import pipeline, verdicts
from bench.results.schema import RowCheck, schema_of, suite_columns
from bench.sweep import plan
from bench.views import views
from bench.platform.vocabulary import PLACEMENTS

SRC = Path(__file__).resolve().parents[1] / "src"
NAMES = list(registry())


def test_the_registry_finds_every_experiment_module():
    modules = {path.stem for path in (SRC / "bench" / "experiments").glob("*.py") if path.stem != "__init__"}
    defining = {name for name in modules if "\nEXPERIMENT = " in (SRC / "bench" / "experiments" /
                                                                  f"{name}.py").read_text()}
    assert set(NAMES) == {"bandwidth", "launch", "overlap", "blocking", "serialization", "library", "alloc",
                          "graphs", "zerocopy", "latency", "roundtrip", "waitmodes", "connections", "firstcall",
                          "batched", "hostmemory", "managed", "peer", "hostlinks", "crossgpu"}
    assert len(defining) == len(NAMES)
    assert NAMES == [e.name for e in sorted(registry().values(), key=lambda e: (e.order, e.name))]
    assert registry() is registry()


def test_every_experiment_has_a_view_and_every_view_an_experiment():
    assert list(views()) == sorted(registry())  # found by module name
    assert all(name == view.name for name, view in views().items())
    assert all(not view.split_axis or view.split_axis in registry()[name].axes for name, view in views().items())


def test_importing_the_registry_imports_no_cuda_library():
    script = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "from bench.experiments import registry\n"
        "registry()\n"
        "import bench.results.store, bench.sweep.plan, bench.results.schema, bench.timing, bench.catalogs.runtime\n"
        "new = sorted(m for m in set(sys.modules) - before\n"
        "             if m.split('.')[0] in ('cupy', 'cupyx', 'numba', 'numba_cuda', 'cuda', 'cupy_backends'))\n"
        "print(new)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_experiment_modules_leave_clocks_events_and_statistics_to_the_timing_core():
    forbidden = ("eventCreate", "eventRecord", "perf_counter", "time.time", "monotonic", "statistics.",
                 "import statistics")
    offences = []
    for path in sorted((SRC / "bench" / "experiments").glob("*.py")):
        text = path.read_text()
        offences += [f"{path.name}: {word}" for word in forbidden if word in text]
    assert offences == []


def test_an_experiment_must_declare_its_axes():
    with pytest.raises(ValueError, match="axes \\['n'\\] have no column"):
        Experiment(name="x", description="", axes={"n": (1,)}, columns=(), measure=None, cost=Cost(None))
    from bench.results.schema import INT, column

    with pytest.raises(ValueError, match="quick/full name an axis the default sweep lacks"):
        Experiment(name="x", description="", axes={"n": (1,)}, columns=(column("n", INT), column("m", INT)),
                   measure=None, cost=Cost(None), sweeps=Sweeps(quick={"m": (1,)}))


# --- the contract, experiment by experiment ---------------------------------------------------------------------


@pytest.fixture(params=NAMES)
def experiment(request):
    return registry()[request.param]


def test_experiment_pickles(experiment):
    restored = pickle.loads(pickle.dumps(experiment))
    assert restored.name == experiment.name and restored.axes == experiment.axes
    assert restored.columns == experiment.columns and restored.order == experiment.order
    assert restored.cost.seconds is experiment.cost.seconds  # by reference


def test_every_axis_has_a_column_and_every_value_fits_it(experiment):
    schema = synthetic.suite()
    check = RowCheck(schema)
    declared = {item.name: item for item in experiment.columns}
    for mode in plan.MODES:
        for axis, values in experiment.axes_for(mode).items():
            assert axis in declared, (experiment.name, axis)
            assert values, (experiment.name, mode, axis)
            for value in values:
                check({"experiment": experiment.name, axis: value})
    assert experiment.sweeps.size_axis == "" or experiment.sweeps.size_axis in experiment.axes
    for name in experiment.outcome:
        assert name in declared or name in schema.names
    for table, columns in experiment.tables.items():
        assert store.table_schema(table, registry()).names


@pytest.mark.parametrize("mode", plan.MODES)
def test_descriptions_accept_every_configuration(experiment, mode):
    every = plan.expand(experiment.axes_for(mode))
    valid = [config for config in every if _is_bool(experiment.sweeps.valid(config))]
    kept = [config for config in valid if mode == "full" or _is_bool(experiment.sweeps.lean(config))]
    assert kept, (experiment.name, mode)
    for rule in plan.rules_for(experiment, mode).values():
        for config in kept:
            seconds = experiment.cost.seconds(config, rule)
            assert 0 < seconds < math.inf, (experiment.name, config, seconds)
    device, host = experiment.cost.memory_needed(kept)
    assert isinstance(device, int) and isinstance(host, int) and device >= 0 and host >= 0
    for config in kept:
        assert all(value >= 0 for value in experiment.cost.memory_needed([config]))


def _is_bool(value):
    assert isinstance(value, bool), value
    return value


def test_seconds_grow_with_the_stop_rule(experiment):
    item = plan.make([experiment.name], mode="quick", devices=(0, 1))[0]
    quick = sum(item.seconds(config) for config in item.configs)
    full_rules = plan.rules_for(experiment, "default")
    default = sum(experiment.cost.seconds(config, full_rules["default"]) for config in item.configs)
    assert quick <= default


def test_synthetic_rows_fit_the_schema_and_cover_the_experiments_columns(experiment):
    schema = synthetic.suite()
    own = schema_of(suite_columns([experiment.columns]))  # what this experiment declares, and no other
    rows = synthetic.records(experiment.name)
    assert rows
    checks = RowCheck(schema), RowCheck(own)
    for row in rows + synthetic.failed_records(experiment.name):
        for check in checks:
            check(row)
    present = {name for row in rows for name, value in row.items() if value is not None}
    missing = {item.name for item in experiment.columns} - present
    assert not missing, f"tests/synthetic.py lacks {experiment.name} columns {sorted(missing)}"


def test_headline_of_synthetic_rows(experiment):
    rows = synthetic.frame(synthetic.records(experiment.name))
    table = views()[experiment.name].headline(rows)
    assert isinstance(table, pd.DataFrame) and len(table) and len(table.columns)
    assert not table.isna().all(axis=None)


def test_headline_shows_only_rows_that_finished(experiment):
    """Rows whose status is not ok are not headline numbers, whatever values they still carry."""
    rows = synthetic.frame(synthetic.tagged(synthetic.records(experiment.name), status="failed", error="broken"))
    table = views()[experiment.name].headline(rows)
    assert isinstance(table, pd.DataFrame) and len(table) == 0


def test_headline_of_rows_that_all_failed(experiment):
    """What a sweep summarises when the experiment's process died before measuring anything."""
    rows = synthetic.frame(synthetic.failed_records(experiment.name))
    table = views()[experiment.name].headline(rows)
    assert isinstance(table, pd.DataFrame) and len(table) == 0


def test_figures_of_failed_rows(experiment):
    """Of failed rows, each figure function of the experiment's view draws none, or a figure that says its
    configurations failed. Its figures of every experiment's rows are checked in test_columns, which draws each
    once of every column and once of the columns the view declares."""
    from bench.analysis.plots import pyplot

    failed = synthetic.frame(synthetic.failed_records(experiment.name))
    for draw in views()[experiment.name].figures:
        of_failed = draw(failed, {})
        try:
            for stem, figure in of_failed:  # nothing measured: nothing drawn, or a figure that says so
                texts = [text.get_text() for text in figure.texts] + [axes.get_title() for axes in figure.axes]
                assert any("failed, not shown" in text for text in texts), (stem, texts)
        finally:
            for _, figure in of_failed:
                pyplot().close(figure)


def test_default_figure_backend_writes_files():
    from bench.analysis.plots import pyplot

    pyplot()
    assert matplotlib.get_backend().lower() == "agg"


# --- each experiment's logic ------------------------------------------------------------------------------------

REQUIRED_APIS = {
    "cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync", "cudaHostAlloc", "cudaFreeHost", "cudaHostRegister",
    "cudaHostUnregister", "cudaMemcpyAsync", "cudaMemcpy", "cudaMemset", "cudaMemsetAsync", "cudaStreamCreate",
    "cudaStreamDestroy", "cudaEventRecord", "cudaEventQuery", "cudaStreamQuery", "cudaGetLastError", "kernel<<<>>>",
    "cudaStreamSynchronize", "cudaDeviceSynchronize",
}


def test_catalog_is_complete_and_documented():
    calls = catalog()
    assert REQUIRED_APIS <= {call.api for call in calls.values()}
    copies = {name for name in calls if name.startswith("cudaMemcpyAsync")}
    assert len(copies) == 8  # H2D/D2H × pinned/pageable × small/large
    for call in calls.values():
        assert call.docs_host in DOCS_HOST and call.docs
        assert call.api == "(nothing)" or call.source.startswith("https://docs.nvidia.com/cuda/")
        assert call.placements and set(call.placements) <= set(PLACEMENTS)
    assert calls["kernel launch"].placements == ("same", "other", "legacy", "per-thread")


def test_documented_expectations_follow_stream_semantics():
    calls = catalog()
    sync = calls["cudaStreamSynchronize"]
    assert documented_waits(sync, "same", spin_blocking=False) is True
    assert documented_waits(sync, "other", spin_blocking=True) is False
    assert documented_waits(sync, "legacy", spin_blocking=True) is True  # the NULL stream waits for blocking ones
    assert documented_waits(sync, "legacy", spin_blocking=False) is False
    assert documented_waits(calls["cudaDeviceSynchronize"], "none", False) is True
    assert documented_waits(calls["kernel launch"], "same", True) is False
    assert documented_waits(calls["cudaGetLastError"], "none", True) is None
    assert documented_waits(calls["cudaMemcpyAsync H2D pageable 64 MiB"], "same", True) is None  # "might"
    assert documented_serializes(calls["cudaMalloc"], "none", False) is True
    assert documented_serializes(calls["kernel launch"], "legacy", True) is True
    assert documented_serializes(calls["kernel launch"], "legacy", False) is None
    assert documented_serializes(calls["kernel launch"], "other", True) is None


@pytest.mark.parametrize("host_ms, running, left, verdict", [
    (19.5, False, 19.9, "waits-for-device"),
    (9.95, False, 19.9, "waits-for-device"),
    (0.004, True, 19.9, "returns"),
    (3.0, True, 19.9, "own-work"),
    (1.0, True, 19.9, "own-work"),
    (0.3, True, 19.9, "returns"),
    (0.2, False, 19.9, "unclear"),
    (5.0, False, 19.9, "unclear"),  # the spin ended, but the call took far less than was left of it
])
def test_host_verdict(host_ms, running, left, verdict):
    assert verdicts.classify(host_ms, running, left) == verdict


def test_consensus_prefers_the_majority_then_the_more_blocking():
    assert verdicts.consensus(["returns", "returns", "own-work"]) == ("returns", False)
    assert verdicts.consensus(["returns", "waits-for-device"]) == ("waits-for-device", False)
    assert verdicts.consensus(["own-work"] * 3) == ("own-work", True)
    assert verdicts.consensus(["unclear", "returns"]) == ("returns", False)
    assert verdicts.consensus(["overlaps", "serializes"], verdicts.DEVICE_VERDICTS) == ("serializes", False)


def test_repeats_settle_when_they_agree_or_at_the_limit():
    assert not verdicts.settled([]) and not verdicts.settled(["returns"] * (verdicts.MIN_REPEATS - 1))
    assert verdicts.settled(["returns"] * verdicts.MIN_REPEATS)
    mixed = ["returns", "own-work"] * verdicts.MAX_REPEATS
    assert not verdicts.settled(mixed[:verdicts.MAX_REPEATS - 1])
    assert verdicts.settled(mixed[:verdicts.MAX_REPEATS])
    assert verdicts.settled(["overlaps"] * 2, minimum=2) and not verdicts.settled(["overlaps"], minimum=2)


@pytest.mark.parametrize("second, verdict", [((0.05, 20.05), "overlaps"), ((10.0, 30.0), "overlaps"),
                                             ((20.1, 40.1), "serializes"), ((19.9, 39.9), "serializes"),
                                             ((15.0, 35.0), "partial")])
def test_serialization_verdict(second, verdict):
    assert verdicts.classify_pair((0.0, 20.0), second, 20.0) == verdict


def test_catalog_plans_cover_each_call_in_its_placements():
    configs = plan.make(["blocking"])[0].configs
    assert len(configs) == 2 * sum(len(call.placements) for call in catalog().values())
    assert {c["placement"] for c in configs if c["call"] == "cudaMalloc"} == {"none"}
    assert plan.make(["serialization"])[0].configs == configs
    quick = plan.make(["blocking"], mode="quick")[0].configs
    assert {c["call"] for c in quick} == set(catalog_module.QUICK_CALLS["call"]) and len(quick) < len(configs)
    assert all(catalog_module.takes_placement(config) for config in configs)


def test_catalog_contradictions_in_the_headline():
    rows = synthetic.blocking_rows()
    host = views()["blocking"].headline(rows[rows["experiment"] == "blocking"])
    assert set(host["finding"]) == {"waits for the device", "contradicts the docs"}
    assert set(host.loc[host["finding"] == "waits for the device", "call"]) >= {"cudaDeviceSynchronize", "cudaFree"}
    device = views()["serialization"].headline(rows[rows["experiment"] == "serialization"])
    assert set(device["call"]) >= {"cudaMalloc", "cudaDeviceSynchronize"}
    assert set(device["verdict"]) == {"serializes"} and set(device["cause"]) == {"host waited", "device"}
    assert selection.contradicts_docs({"matches_docs": False}) and not selection.contradicts_docs(
        {"matches_docs": pd.NA}) and not selection.contradicts_docs({"matches_docs": None}) and not \
        selection.contradicts_docs({"matches_docs": True})
    assert [numbers.short_ms(v) for v in (19.9, 0.5, 0.004)] == ["20", "0.50", "4µs"]


def test_bandwidth_description():
    valid = bandwidth_module.valid
    assert valid({"direction": "D2D", "host_memory": "device"}) and not valid({"direction": "D2D",
                                                                               "host_memory": "pinned"})
    assert not valid({"direction": "H2D", "host_memory": "device"}) and valid({"direction": "H2D",
                                                                               "host_memory": "pageable"})
    rule = plan.rules_for(bandwidth_module.EXPERIMENT, "default")["default"]
    small, large = ({"direction": "H2D", "host_memory": "pinned", "bytes": n} for n in (4096, 1 << 30))
    assert bandwidth_module.seconds(large, rule) > bandwidth_module.seconds(small, rule)
    device, host = bandwidth_module.memory_needed([large, {**small, "direction": "D2D", "host_memory": "device"}])
    assert device >= 2 << 30 and host == 2 << 30
    assert bandwidth_module.memory_needed([{"direction": "D2D", "host_memory": "device", "bytes": 1 << 20}])[1] == 0


def test_bandwidth_headline():
    table = views()["bandwidth"].headline(synthetic.bandwidth_rows(failed=2))
    pinned_h2d = table[(table["direction"] == "H2D") & (table["host memory"] == "pinned")].iloc[0]
    assert pinned_h2d["peak at"] == "1 GiB" and float(pinned_h2d["peak GB/s"]) > 54
    assert float(pinned_h2d["GB/s at 16 MiB"]) < float(pinned_h2d["peak GB/s"])
    assert len(table) == 10


def test_overlap_bound_model():
    # two or more copy engines: copies in opposite directions overlap each other and the kernel, at duplex rates
    assert pipeline.bound_ms(kernel_ms=3, h2d_ms=5, d2h_ms=5, h2d_duplex_ms=5.4, d2h_duplex_ms=5.5,
                            copy_engines=2) == 5.5
    assert pipeline.bound_ms(kernel_ms=20, h2d_ms=5, d2h_ms=5, h2d_duplex_ms=5.4, d2h_duplex_ms=5.5,
                            copy_engines=3) == 20
    # one copy engine: the copies serialize
    assert pipeline.bound_ms(kernel_ms=3, h2d_ms=5, d2h_ms=5, h2d_duplex_ms=5.4, d2h_duplex_ms=5.5,
                            copy_engines=1) == 10


def test_overlap_calibration_fits_a_line_through_two_measurements():
    # 0.1 ms launch overhead + 0.01 ms per round: 5 ms needs 490 rounds
    assert pipeline.rounds_for(5.0, (16, 0.26), (256, 2.66)) == 490
    assert pipeline.rounds_for(0.0001, (16, 0.26), (256, 2.66)) == 1  # never below one round
    with pytest.raises(ValueError):
        pipeline.rounds_for(5.0, (16, 1.0), (256, 1.0))


def test_overlap_split_covers_the_payload_in_whole_words():
    pieces = pipeline.split(1000, 3)
    assert pieces == [(0, 332), (332, 332), (664, 336)]
    for total, chunks in ((256 << 20, 128), (4096, 7), (40, 10)):
        pieces = pipeline.split(total, chunks)
        assert len(pieces) == chunks and sum(size for _, size in pieces) == total
        assert all(offset % 4 == 0 and size % 4 == 0 for offset, size in pieces)
        assert max(size for _, size in pieces) - min(size for _, size in pieces) <= 4
        assert all(a[0] + a[1] == b[0] for a, b in zip(pieces, pieces[1:]))


def test_overlap_lean_keeps_a_few_pageable_pipelines():
    base = {"host_memory": "pageable", "allocator": "malloc", "launch": "eager", "chunks_per_stream": 4,
            "streams": 4}
    assert overlap.lean({**base, "host_memory": "pinned", "allocator": "mallocAsync", "streams": 32})
    assert overlap.lean(base) and overlap.lean({**base, "streams": 1})
    assert not overlap.lean({**base, "streams": 8}) and not overlap.lean({**base, "launch": "graph"})
    assert not overlap.lean({**base, "allocator": "mallocAsync"}) and not overlap.lean({**base,
                                                                                       "chunks_per_stream": 1})


def test_overlap_headline_picks_the_most_efficient_configuration():
    table = views()["overlap"].headline(synthetic.overlap_rows())
    pinned = table[(table["host memory"] == "pinned") & (table["compute ratio"] == "1")].iloc[0]
    assert pinned["best configuration"] == "4 streams × 4 chunks, malloc, eager"  # first to reach 95%
    assert pinned["1-stream speedup"] == "1.00" and pinned["efficiency"] == "95.0%"


def test_alloc_description():
    def config(api, threshold="none", pattern="single", nbytes=1 << 20):
        return {"api": api, "release_threshold": threshold, "pattern": pattern, "bytes": nbytes}

    assert alloc.valid(config("cudaMalloc")) and alloc.valid(config("cudaMallocAsync", "0", "loop"))
    assert not alloc.valid(config("cudaMalloc", "max")) and not alloc.valid(config("cudaMallocAsync", "none"))
    assert not alloc.valid(config("cudaHostAlloc", pattern="loop"))
    assert not alloc.valid(config("cudaHostRegister", nbytes=4 << 30)) and alloc.valid(config("cudaHostAlloc"))
    assert alloc.lean(config("cudaMalloc", nbytes=1 << 30)) and not alloc.lean(config("cudaHostAlloc",
                                                                                     nbytes=1 << 30))
    assert not alloc.lean(config("cudaMalloc", pattern="loop", nbytes=1 << 30))
    assert alloc.memory_needed([config("cudaMalloc", nbytes=1 << 30), config("cudaHostAlloc", nbytes=1 << 20)]) == (
        1 << 30, 1 << 20)
    configs = plan.make(["alloc"])[0].configs
    assert {c["release_threshold"] for c in configs if c["api"] == "cudaMallocAsync"} == {"0", "max"}
    assert not [c for c in configs if c["api"].startswith("cudaHost") and c["pattern"] == "loop"]
    assert len(views()["alloc"].headline(synthetic.frame(synthetic.alloc_records()))) == 8


def test_graphs_description():
    assert [graphs.rounds_of(i) for i in range(6)] == [1, 2, 3, 4, 1, 2]
    configs = plan.make(["graphs"])[0].configs
    assert sum(c["case"] == "sync-in-capture" for c in configs) == 1
    assert {c["launch"] for c in configs if c["case"] == "stream-order"} == {"eager"}
    assert {c["launch"] for c in configs if c["case"] == "malloc-loop"} == {"eager", "graph"}
    assert graphs.memory_needed([{"bytes": 1 << 20, "iterations": 100}]) == (3 * 100 << 20, 0)
    table = views()["graphs"].headline(synthetic.frame(synthetic.graphs_records(wrong_results=2)))
    assert "2 wrong of 100 trials" in set(table["outcome"])
    assert any("cudaErrorStreamCaptureUnsupported" in text for text in table["outcome"])


def test_by_host_memory_allocates_each_kind_once_for_its_largest_configuration():
    from bench.measure.copies import by_host_memory

    made = []

    class Buffers:
        def __init__(self, host_memory, nbytes):
            made.append(("made", host_memory, nbytes))
            self.host_memory = host_memory

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            made.append(("freed", self.host_memory))

    configs = [{"host_memory": "pinned", "bytes": 4}, {"host_memory": "pageable", "bytes": 8},
               {"host_memory": "pinned", "bytes": 16}]
    rows = list(by_host_memory(configs, Buffers, lambda config, buffers: (config["bytes"], buffers.host_memory)))
    assert rows == [(4, "pinned"), (16, "pinned"), (8, "pageable")]
    assert made == [("made", "pinned", 16), ("freed", "pinned"), ("made", "pageable", 8), ("freed", "pageable")]


def test_timed_copies_fill_the_row_and_hand_their_gpus_to_the_timer():
    """The step of verified_and_timed that peer copies (verified on their own GPUs) share with bandwidth's."""
    from bench.measure.copies import timed
    from bench.timing import GpuTiming, MeasurementFailed, Samples

    enqueued, asked = [], {}

    class Copy:
        def __init__(self, stream):
            self.stream = stream

        def enqueue(self, nbytes):
            enqueued.append((self.stream, nbytes))

    class Timer:
        def __init__(self, fail=False):
            self.fail = fail

        def measure(self, enqueue, streams, **options):
            if self.fail:
                raise MeasurementFailed("gate watchdog expired")
            asked.update(options, streams=streams)
            enqueue(2)
            return GpuTiming(Samples([1.0, 1.0, 1.0], "ms", "gpu", "m", "converged", 2), [[1.0] * 3] * 2, [], [])

    row = {"verified": False, "status": "failed", "error": ""}
    timing = timed(row, [Copy("s0"), Copy("s1")], 10**6, Timer(), "m", True, [0, 1])
    assert timing.median_ms == 1.0 and enqueued == [("s0", 10**6), ("s1", 10**6)] * 2
    assert asked == {"metric": "m", "gated": True, "devices": [0, 1], "streams": ["s0", "s1"]}
    assert row["verified"] and row["status"] == "ok" and row["gbps"] == pytest.approx(2.0)  # 2 MB in 1 ms
    failed = {"verified": False, "status": "failed", "error": ""}
    assert timed(failed, [Copy("s0")], 8, Timer(fail=True), "m") is None
    assert failed == {"verified": True, "status": "failed", "error": "gate watchdog expired"}


# --- accuracy floors ---------------------------------------------------------------------------------------------

RESULTS = Path(__file__).resolve().parents[1] / "results"
FULL_ACCURACY = RESULTS / "20261122T034221Z-NVIDIA-H200.parquet"  # a default sweep no pacer touched
PACED = RESULTS / "20261123T231801Z-2805-NVIDIA-H100-80GB-HBM3.parquet"  # a pacer cut rules to 3 samples here


def test_every_experiment_plans_at_least_its_floor():
    """A default sweep's rules ask each measurement for at least its experiment's floor of samples (the verdict
    experiments' floors are their agreeing repeats, which their own loops make)."""
    for experiment in registry().values():
        rules = plan.rules_for(experiment, "default")
        assert rules["default"].min_samples >= experiment.accuracy.floor.min_samples, experiment.name


def test_the_floors_pass_a_full_accuracy_sweep_and_catch_what_a_pacer_cut():
    """Every ok row of a committed default sweep at full accuracy meets its floor; of a committed sweep whose pacer
    scaled rules down to 3 samples, the rows it cut are below the floor, and no row it left whole is."""
    suite = store.suite_schema(registry())

    def below(rows: pd.DataFrame) -> pd.Series:
        measured = rows[(rows["status"] == "ok") & (rows["n_samples"].fillna(0) > 0)]
        floors = {name: experiment.accuracy.floor for name, experiment in registry().items()}
        return pd.Series([noise.below_floor(row, selection.samples_of(row), floors[row["experiment"]])
                          for row in measured.to_dict("records")], index=measured.index, dtype=bool)

    assert not below(store.read(FULL_ACCURACY, suite)).any()
    paced = store.read(PACED, suite)
    cut = below(paced)
    assert cut.sum() > 50 and (paced.loc[cut[cut].index, "stop_scale"] < 1).all()


def test_a_verdict_experiment_floors_at_its_repeats():
    """An experiment whose rows carry a verdict from repeats that must agree (verdicts.MIN_REPEATS, or
    DEVICE_MIN_REPEATS between two spins) needs no more samples than those repeats: its floor says so (the crossgpu
    rows of a two-GPU sweep at 942ae42 fell below a floor of 10 with their 3 agreeing repeats)."""
    for experiment in registry().values():
        if "verdict" in {column.name for column in experiment.columns}:
            assert experiment.accuracy.floor.min_samples <= verdicts.MIN_REPEATS, experiment.name
