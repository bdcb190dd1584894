"""The hostmemory and managed experiments without a GPU: descriptions, plans, the pure logic (the skip rule, the
checksum, the spot checks), and headlines and figures of synthetic rows shaped like a sweep's."""


import numpy as np
import pandas as pd
import pytest

import synthetic
from bench.results import store
from bench.experiments import hostmemory, managed, registry
from bench.results.schema import RowCheck, check_row, schema_of, suite_columns
from bench.sweep import plan
from bench.timing import StopRule
from bench.views import views
from bench.views.managed import managed_figure

MiB = 1 << 20


RECORDS = {"hostmemory": synthetic.hostmemory_records, "managed": synthetic.managed_records}


@pytest.fixture(params=sorted(RECORDS))
def name(request):
    return request.param


# --- descriptions and plans -----------------------------------------------------------------------------------

def test_both_are_registered_after_bandwidth():
    found = registry()
    assert {"hostmemory", "managed"} <= set(found)
    names = list(found)
    assert names.index("bandwidth") < names.index("hostmemory") < names.index("managed")
    assert found["hostmemory"].cost.share_s == 3 and found["managed"].cost.share_s == 3


def test_hostmemory_axes_and_validity():
    experiment = registry()["hostmemory"]
    assert experiment.axes["host_memory"] == ("pinned", "write-combined")
    assert experiment.axes["operation"] == ("H2D", "D2H", "cpu-read", "cpu-write")
    assert experiment.axes["bytes"] == (MiB, 64 * MiB) and len(experiment.sweeps.quick["bytes"]) == 1
    assert len(experiment.sweeps.full["bytes"]) > len(experiment.axes["bytes"])
    slow = {"host_memory": "write-combined", "operation": "cpu-read"}
    assert hostmemory.lean({**slow, "bytes": MiB}) and not hostmemory.lean({**slow, "bytes": 64 * MiB})
    assert hostmemory.valid({**slow, "bytes": 64 * MiB}) and not hostmemory.valid({**slow, "bytes": 256 * MiB})
    for operation in hostmemory.OPERATIONS:  # everything else at every size
        for kind in hostmemory.HOST_KINDS:
            config = {"host_memory": kind, "operation": operation, "bytes": 1 << 30}
            if (kind, operation) != ("write-combined", "cpu-read"):
                assert hostmemory.valid(config) and hostmemory.lean(config)


def test_managed_axes_and_validity():
    experiment = registry()["managed"]
    assert experiment.axes["case"] == ("first-touch", "prefetch-then-kernel", "resident")
    assert experiment.axes["bytes"] == (64 * MiB, 256 * MiB) and len(experiment.sweeps.quick["bytes"]) == 1
    assert managed.valid({"bytes": 4096, "case": "resident"}) and not managed.valid({"bytes": 4000, "case": "resident"})
    configs = plan.make(["managed"])[0].configs
    assert [config["bytes"] for config in configs] == sorted(config["bytes"] for config in configs)  # size by size


def test_managed_memory_is_declared_as_device_memory():
    configs = [{"bytes": 64 * MiB, "case": case} for case in managed.CASES] + [{"bytes": 256 * MiB, "case": "resident"}]
    device, host = managed.memory_needed(configs)
    assert device == 256 * MiB and host >= 256 * MiB
    device, host = hostmemory.memory_needed([{"host_memory": "pinned", "operation": "H2D", "bytes": 64 * MiB}])
    assert device >= 2 * 64 * MiB and host == 64 * MiB


@pytest.mark.parametrize("experiment_name", ["hostmemory", "managed"])
def test_default_plan_fits_its_share(experiment_name):
    (item,) = plan.make([experiment_name])
    assert item.estimate_s <= item.experiment.cost.share_s, item.estimate_s
    (quick,) = plan.make([experiment_name], mode="quick")
    assert len({config["bytes"] for config in quick.configs}) == 1 and quick.estimate_s < item.estimate_s
    (full,) = plan.make([experiment_name], mode="full")
    assert len(full.configs) > len(item.configs)


def test_the_measuring_rules_are_declared_and_bounded():
    hostmemory_rules = plan.rules_for(registry()["hostmemory"], "default")
    assert hostmemory_rules["cpu"].time_cap_s == hostmemory.CPU_TIME_CAP_S
    assert hostmemory.cpu_rule(hostmemory_rules["default"]) == hostmemory_rules["cpu"]
    managed_rules = plan.rules_for(registry()["managed"], "default")
    assert managed_rules["migrate"] == managed.migrate_rule(managed_rules["default"])
    for mode in ("quick", "default"):
        for scale in (1.0, 0.3):
            for experiment, purpose, derive in ((registry()["hostmemory"], "cpu", hostmemory.cpu_rule),
                                                (registry()["managed"], "migrate", managed.migrate_rule)):
                rules = plan.rules_for(experiment, mode, scale)
                estimated = derive(rules["default"])  # what seconds() assumes: never less than what runs
                assert estimated.time_cap_s >= rules[purpose].time_cap_s
                assert estimated.min_samples >= rules[purpose].min_samples
                assert estimated.warmup_batches >= rules[purpose].warmup_batches


def test_seconds_grow_with_size_and_with_the_rule():
    loose, strict = StopRule(min_samples=3, time_cap_s=0.05), StopRule()
    for experiment, configs in (
            (hostmemory, [{"host_memory": kind, "operation": operation, "bytes": size}
                          for kind in hostmemory.HOST_KINDS for operation in hostmemory.OPERATIONS
                          for size in (MiB, 64 * MiB)]),
            (managed, [{"bytes": size, "case": case} for case in managed.CASES for size in (16 * MiB, 256 * MiB)])):
        for config in configs:
            assert 0 < experiment.seconds(config, loose) <= experiment.seconds(config, strict) < 10
        small, large = experiment.seconds(configs[0], strict), experiment.seconds({**configs[0], "bytes": 1 << 30},
                                                                                  strict)
        assert small < large


# --- the pure logic -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("nbytes, free, skipped", [
    (64 * MiB, 140 << 30, False),
    (70 << 30, 140 << 30, False),  # exactly half of what is free is allowed
    ((70 << 30) + 1, 140 << 30, True),
    (256 * MiB, 300 * MiB, True),
    (1, 0, True),
])
def test_managed_memory_above_half_of_what_is_free_is_refused(nbytes, free, skipped):
    reason = managed.too_large(nbytes, free)
    assert (reason is not None) == skipped
    if skipped:
        assert "more than half" in reason and "free" in reason and "hang" in reason


def test_rows_not_measured_fit_the_schema():
    schema = synthetic.suite()
    configs = [{"bytes": 1 << 40, "case": case} for case in managed.CASES]
    rows = list(managed._not_measured(configs, "skipped", managed.too_large(1 << 40, 80 << 30), 80 << 30))
    assert [row["case"] for row in rows] == list(managed.CASES)
    for row in rows:
        assert row["status"] == "skipped" and "more than half" in row["error"]
        check_row({"experiment": "managed", **row}, schema)
    (row,) = managed._not_measured(configs[:1], "unsupported", "no concurrent managed access", None)
    check_row({"experiment": "managed", **row}, schema)


@pytest.mark.parametrize("nbytes", [8, 13, 4096, 4099, MiB])
def test_checksum_sums_whole_words_and_the_tail(nbytes):
    data = np.random.default_rng(nbytes).integers(0, 256, nbytes + 5, dtype=np.uint8)  # beyond nbytes: ignored
    whole = nbytes // 8 * 8
    words = [int.from_bytes(bytes(data[i:i + 8]), "little") for i in range(0, whole, 8)]
    expected = (sum(words) + sum(int(b) for b in data[whole:nbytes])) % (1 << 64)
    assert hostmemory.checksum(np, data, nbytes) == expected


def test_checksum_wraps_like_the_device_sum():
    data = np.full(64, 0xFF, dtype=np.uint8)
    assert hostmemory.checksum(np, data, 64) == (8 * (2**64 - 1)) % 2**64


def test_spot_checks_cover_the_ends_without_repeats():
    for count in (1, 2, 1000, 4096, 1 << 24):
        checked = managed.spots(count)
        assert checked[0] == 0 and checked[-1] == count - 1
        assert len(checked) == min(count, managed.SPOT_CHECKS) and np.all(np.diff(checked) > 0)


def test_index_words_wrap_past_32_bits():
    assert managed.index_words([0, 5, 2**32 - 1, 2**32, 2**32 + 7]).tolist() == [0, 5, 2**32 - 1, 0, 7]
    assert managed.index_words(np.arange(3)).dtype == np.uint32


@pytest.mark.cuda_libs  # the kernels module imports numba-cuda
def test_the_verification_reference_is_the_kernel_arithmetic():
    from bench.measure.kernels import MIX_INCREMENT, MIX_MULTIPLIER, mix_reference

    indices = managed.index_words([0, 1, 2**31, 2**32 - 1])
    expected = [(int(value) * MIX_MULTIPLIER + MIX_INCREMENT) % 2**32 for value in indices]
    assert mix_reference(indices, managed.ROUNDS).tolist() == expected


def test_host_kinds_are_refused_by_name():
    with pytest.raises(ValueError, match="unknown host memory kind 'pageable'"):
        hostmemory.make_buffers("pageable", 4096)


# --- rows, headlines, figures -----------------------------------------------------------------------------------

def test_synthetic_rows_fit_the_schema(name):
    checks = RowCheck(synthetic.suite()), RowCheck(schema_of(suite_columns([registry()[name].columns])))
    rows = RECORDS[name]()
    for row in rows:
        for check in checks:
            check(row)
    present = {key for row in rows for key, value in row.items() if value is not None}
    assert {item.name for item in registry()[name].columns} <= present


def test_hostmemory_headline():
    table = views()["hostmemory"].headline(synthetic.frame(synthetic.hostmemory_records()))
    assert list(table["operation"]) == list(hostmemory.OPERATIONS)
    by_operation = table.set_index("operation")
    assert by_operation.loc["cpu-read", "at"] == "1 MiB"  # the largest size both kinds were read at
    assert by_operation.loc["H2D", "at"] == "64 MiB"
    ratio = float(by_operation.loc["cpu-read", "write-combined / pinned"].rstrip("×"))
    assert ratio == pytest.approx(0.01, rel=1e-3)
    assert by_operation.loc["cpu-write", "pinned GB/s"] != "—"


def test_hostmemory_headline_with_one_kind_missing():
    rows = synthetic.frame([row for row in synthetic.hostmemory_records() if row["host_memory"] == "pinned"])
    table = views()["hostmemory"].headline(rows)
    assert len(table) == 4 and set(table["write-combined GB/s"]) == {"—"}
    assert set(table["write-combined / pinned"]) == {"—"}


def test_managed_headline():
    table = views()["managed"].headline(synthetic.frame(synthetic.managed_records(skipped=True)))
    assert len(table) == 6 and list(table["case"][:3]) == list(managed.CASES)
    first, prefetched, resident = (table.iloc[index] for index in range(3))
    assert float(resident["× resident"]) == pytest.approx(1.0)
    assert float(first["× resident"]) > float(prefetched["× resident"]) > 1
    assert prefetched["prefetch alone GB/s"] != "—" and first["prefetch alone GB/s"] == "—"


def test_headlines_show_only_finished_rows(name):
    experiment = registry()[name]
    rows = synthetic.frame(synthetic.tagged(RECORDS[name](), status="failed", error="broken"))
    assert len(views()[experiment.name].headline(rows)) == 0
    config_rows = [{"experiment": name, **{axis: row[axis] for axis in experiment.axes}, "status": "failed",
                    "error": "not measured: the process ended", **synthetic.RUN, **synthetic.ENV}
                   for row in RECORDS[name]()]
    assert len(views()[experiment.name].headline(synthetic.frame(config_rows))) == 0


def test_figures_of_synthetic_rows(name):
    from matplotlib.figure import Figure

    from bench.analysis.plots import pyplot

    experiment = registry()[name]
    rows = synthetic.frame(RECORDS[name]() + synthetic.all_records())  # among every other experiment's rows
    for draw in views()[experiment.name].figures:
        drawn = draw(rows, {})
        try:
            assert [stem for stem, _ in drawn] == [name]
            for _, figure in drawn:
                assert isinstance(figure, Figure) and figure.axes
        finally:
            for _, figure in drawn:
                pyplot().close(figure)
        failed = synthetic.frame(synthetic.tagged(RECORDS[name](), status="failed", error="broken"))
        assert draw(failed, {}) == []


def test_managed_figure_with_skipped_and_failed_rows():
    from bench.analysis.plots import pyplot

    rows = synthetic.managed_records(skipped=True)
    rows[0] = {**rows[0], "status": "failed", "error": "kernel result wrong"}
    drawn = managed_figure(synthetic.frame(rows), {})
    assert len(drawn) == 1
    assert "1 size(s) skipped" in drawn[0][1].get_suptitle()  # three skipped rows of one size
    pyplot().close(drawn[0][1])


def test_frames_of_both_read_like_a_sweep(tmp_path):
    path = synthetic.write(tmp_path / "run.parquet", synthetic.hostmemory_records(failed=1) + synthetic.managed_records(skipped=True))
    rows = store.read(path, synthetic.suite())
    assert set(rows["experiment"]) == {"hostmemory", "managed"}
    assert (rows["status"] == "skipped").sum() == 3 and (rows["status"] == "failed").sum() == 1
    assert isinstance(rows, pd.DataFrame)
