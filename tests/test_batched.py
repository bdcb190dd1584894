"""The batched-copy experiment without a GPU: its description, its plan, headline and figure on synthetic rows, the
driver lookup against a fake libcuda, the call's arguments, and the rows it writes where the driver has no batched
copy."""

import ctypes
import math
import re

import numpy as np
import pandas as pd
import pytest

import synthetic
from blank_figures import texts
from bench.experiments import batched, registry
from bench.results.schema import RowCheck, check_row, schema_of, suite_columns
from bench.sweep import plan, resume
from bench.timing import Context
from bench.views import views
from bench.views.batched import batched_figure

EXPERIMENT = batched.EXPERIMENT


# --- synthetic rows (shaped like an H200's default sweep) --------------------------------------------------------

def failed_records() -> list[dict]:
    return [{"experiment": "batched", **{axis: row[axis] for axis in EXPERIMENT.axes}, "status": "failed",
             "error": "not measured: the process ended", **synthetic.RUN, **synthetic.ENV}
            for row in synthetic.batched_records()]


@pytest.fixture
def rows():
    return synthetic.frame(synthetic.batched_records())


# --- description ---------------------------------------------------------------------------------------------

def test_the_experiment_is_registered_with_typed_axes():
    assert registry()["batched"] is EXPERIMENT
    assert list(EXPERIMENT.axes) == ["host_memory", "access_order", "issue", "copies", "bytes"]
    assert EXPERIMENT.sweeps.size_axis == "bytes" and EXPERIMENT.cost.share_s == 3
    check = RowCheck(synthetic.suite())
    for mode in plan.MODES:
        for axis, values in EXPERIMENT.axes_for(mode).items():
            assert values
            for value in values:
                check({"experiment": "batched", axis: value})
    assert EXPERIMENT.sweeps.quick and set(EXPERIMENT.sweeps.full) == {"copies", "bytes"}
    assert "cudaMemcpyBatchAsync" in EXPERIMENT.description and batched.__doc__.startswith("Batched copies")


@pytest.mark.parametrize("issue, order, kept", [
    ("batch", "stream", True), ("batch", "during-call", True), ("batch", "any", True),
    ("one-by-one", "stream", True), ("one-by-one", "during-call", False), ("one-by-one", "any", False),
])
def test_the_loop_runs_once_as_stream(issue, order, kept):
    assert batched.valid({"host_memory": "pinned", "access_order": order, "issue": issue, "copies": 64,
                          "bytes": 4096}) is kept


def test_plans_of_each_sweep():
    default = plan.make(["batched"])[0].configs
    assert len(default) == 2 * 4 * 2 * 2  # host memory × (3 orders of the batch + the loop) × copies × bytes
    assert {(c["issue"], c["access_order"]) for c in default} == {
        ("batch", "stream"), ("batch", "during-call"), ("batch", "any"), ("one-by-one", "stream")}
    assert {c["copies"] for c in default} == {64, 1024} and {c["bytes"] for c in default} == {4096, 65536}
    quick = plan.make(["batched"], mode="quick")[0].configs
    assert len(quick) == 8 and {c["bytes"] for c in quick} == {4096}
    full = plan.make(["batched"], mode="full")[0].configs
    assert len(full) == 2 * 4 * 5 * 5
    assert plan.make(["batched"], sizes=[1024])[0].configs[0]["bytes"] == 1024  # --sizes replaces bytes


def test_the_default_plan_fits_its_share():
    item = plan.make(["batched"])[0]
    assert item.estimate_s <= EXPERIMENT.cost.share_s
    assert item.rules["default"].time_cap_s == 0.05


def test_seconds_and_memory():
    rule = plan.rules_for(EXPERIMENT, "default")["default"]
    small = {"host_memory": "pinned", "access_order": "stream", "issue": "batch", "copies": 64, "bytes": 4096}
    many = {**small, "copies": 1024}
    loop = {**many, "issue": "one-by-one"}
    pageable = {**many, "host_memory": "pageable", "bytes": 65536}
    assert 0 < batched.seconds(small, rule) < batched.seconds(many, rule) < batched.seconds(loop, rule)
    assert batched.seconds(pageable, rule) > batched.seconds({**pageable, "host_memory": "pinned"}, rule)
    quick = plan.rules_for(EXPERIMENT, "quick")["default"]
    assert batched.seconds(many, quick) <= batched.seconds(many, rule)
    device, host = batched.memory_needed([small, pageable])
    span = 1024 * (65536 + batched.GAP)
    assert host == span and device == 2 * span + batched._FILL_BYTES
    assert isinstance(device, int) and isinstance(host, int)


def test_copies_never_touch():
    assert batched.stride(4096) == 4096 + batched.GAP and batched.GAP >= 1


# --- headline and figure -------------------------------------------------------------------------------------

def test_synthetic_rows_fit_the_schema_and_cover_the_columns():
    checks = RowCheck(synthetic.suite()), RowCheck(schema_of(suite_columns([EXPERIMENT.columns])))
    records = synthetic.batched_records()
    for row in records + failed_records():
        for check in checks:
            check(row)
    present = {name for row in records for name, value in row.items() if value is not None}
    assert {item.name for item in EXPERIMENT.columns} <= present


def test_headline_compares_the_batch_with_the_loop(rows):
    table = views()["batched"].headline(rows)
    assert list(table["host memory"]) == ["pinned"] * 3 + ["pageable"] * 3
    assert list(table["access order"]) == ["stream", "during-call", "any"] * 2
    assert set(table["copies"]) == {"1024 × 4 KiB"}  # the most copies, the smallest
    pinned = table.iloc[0]
    assert pinned["batch host ms"] == "0.512" and pinned["one-by-one host ms"] == "2.56"
    assert pinned["host time saved"] == "5.0×"
    assert float(pinned["batch GB/s"]) > float(pinned["one-by-one GB/s"])
    assert not table.isna().all(axis=None)


def test_headline_without_the_loop_or_without_the_batch(rows):
    no_loop = views()["batched"].headline(rows[rows["issue"] == "batch"])
    assert len(no_loop) == 6 and set(no_loop["one-by-one host ms"]) == {"—"} and set(no_loop["host time saved"]) == \
        {"—"}
    only_loop = views()["batched"].headline(rows[rows["issue"] == "one-by-one"])
    assert list(only_loop["access order"]) == ["—", "—"] and set(only_loop["batch host ms"]) == {"—"}


def test_headline_shows_only_rows_that_finished(rows):
    assert len(views()["batched"].headline(synthetic.frame(synthetic.tagged(synthetic.batched_records(), status="failed")))) == 0
    assert len(views()["batched"].headline(synthetic.frame(failed_records()))) == 0
    unsupported = synthetic.tagged(synthetic.batched_records(), status="unsupported", error="the driver supports CUDA 12.4")
    assert len(views()["batched"].headline(synthetic.frame(unsupported))) == 0


def test_figure_of_synthetic_rows(rows):
    from matplotlib.figure import Figure

    from bench.analysis.plots import pyplot

    drawn = batched_figure(rows, {})
    try:
        (stem, figure), = drawn
        assert stem == "batched" and re.fullmatch(r"[a-z0-9_]+", stem)
        assert isinstance(figure, Figure) and len(figure.axes) == 4
        words = texts(figure, "svg").decode()
        assert "one by one (cudaMemcpyAsync), 4 KiB each" in words and "batch, source order during-call" in words
        assert "pageable source" in words and "not timed behind the gate" in words
    finally:
        for _, figure in drawn:
            pyplot().close(figure)


def test_figure_says_what_it_leaves_out(rows):
    from bench.analysis.plots import pyplot

    records = synthetic.batched_records()
    records[0] = {**records[0], "status": "failed", "error": "data mismatch"}
    records[1] = {**records[1], "status": "unsupported", "error": "CUDA_ERROR_NOT_SUPPORTED (801)"}
    (_, figure), = batched_figure(synthetic.frame(records), {})
    try:
        assert "1 failed, 1 unsupported, not shown" in texts(figure, "svg").decode()
    finally:
        pyplot().close(figure)


def test_figure_of_nothing_measured_and_of_other_experiments():
    assert batched_figure(synthetic.frame(failed_records()), {}) == []
    assert batched_figure(synthetic.bandwidth_rows(), {}) == []
    only_pinned = synthetic.frame([row for row in synthetic.batched_records() if row["host_memory"] == "pinned"])
    (_, figure), = batched_figure(only_pinned, {})
    try:
        assert len(figure.axes) == 2
    finally:
        from bench.analysis.plots import pyplot

        pyplot().close(figure)


# --- where the driver has no batched copy ------------------------------------------------------------------------

class _NoCuda:
    """Stands in for the CUDA libraries: any use fails the test."""

    def __getattr__(self, name):
        raise AssertionError(f"CUDA was touched: {name}")


def test_unsupported_rows_without_touching_cuda(monkeypatch):
    reason = "the driver supports CUDA 12.4; cudaMemcpyBatchAsync (cuMemcpyBatchAsync) needs CUDA 12.8"
    monkeypatch.setattr(batched, "find_batch_api", lambda: reason)
    monkeypatch.setattr(batched, "cupy", _NoCuda())
    monkeypatch.setattr(batched, "runtime", _NoCuda())
    configs = plan.make(["batched"])[0].configs
    rows = list(batched.measure(configs, Context()))
    assert len(rows) == len(configs)
    schema = synthetic.suite()
    for config, row in zip(configs, rows):
        assert {axis: row[axis] for axis in EXPERIMENT.axes} == config
        assert row["status"] == "unsupported" and row["error"] == reason
        assert row["verified"] is False and math.isnan(row["gbps"]) and math.isnan(row["host_ms"])
        assert row["n_samples"] == 0 and row["samples"] == []
        check_row({"experiment": "batched", **row}, schema)
    assert "unsupported" in resume.DONE_STATUSES  # a resumed sweep does not try them again


class _Function:
    """A fake ctypes function: records its calls, answers ``result``."""

    def __init__(self, result=0, effect=None):
        self.result, self.effect, self.calls = result, effect, []

    def __call__(self, *args):
        self.calls.append(args)
        if self.effect:
            self.effect(*args)
        return self.result


class _FakeDriver:
    """A libcuda with a driver version and some of the batched-copy symbols."""

    def __init__(self, version, symbols=("cuMemcpyBatchAsync_v2", "cuMemcpyBatchAsync"), version_result=0):
        def set_version(reference):
            reference._obj.value = version

        def set_name(result, reference):
            reference._obj.value = b"CUDA_ERROR_INVALID_VALUE" if result == 1 else None

        self.cuDriverGetVersion = _Function(version_result, set_version)
        self.cuGetErrorName = _Function(0, set_name)
        for symbol in symbols:
            setattr(self, symbol, _Function())


def _with_driver(monkeypatch, driver):
    def load(name):
        assert name == "libcuda.so.1"
        if isinstance(driver, Exception):
            raise driver
        return driver

    monkeypatch.setattr(batched.ctypes, "CDLL", load)
    return batched.find_batch_api()


def test_lookup_takes_the_cuda_13_entry_point(monkeypatch):
    driver = _FakeDriver(13000)
    api = _with_driver(monkeypatch, driver)
    assert api.name == "cuMemcpyBatchAsync_v2" and not api.fail_index and api.driver_version == 13000
    assert api.function is driver.cuMemcpyBatchAsync_v2
    assert len(api.function.argtypes) == 8 and api.function.restype is ctypes.c_int
    assert api.error_name(1) == "CUDA_ERROR_INVALID_VALUE (1)" and api.error_name(999) == "CUresult 999"


def test_lookup_takes_the_cuda_12_8_entry_point_with_fail_index(monkeypatch):
    api = _with_driver(monkeypatch, _FakeDriver(12080, symbols=("cuMemcpyBatchAsync",)))
    assert api.name == "cuMemcpyBatchAsync" and api.fail_index
    assert len(api.function.argtypes) == 9 and api.function.argtypes[3] is ctypes.c_size_t


@pytest.mark.parametrize("driver, message", [
    (OSError("libcuda.so.1: cannot open shared object file"), "libcuda.so.1 could not be loaded"),
    (_FakeDriver(12040), "the driver supports CUDA 12.4; cudaMemcpyBatchAsync (cuMemcpyBatchAsync) needs CUDA 12.8"),
    (_FakeDriver(12080, symbols=()), ("the driver (CUDA 12.8) exports neither cuMemcpyBatchAsync_v2 nor "
                                      "cuMemcpyBatchAsync")),
    (_FakeDriver(13000, version_result=3), "cuDriverGetVersion failed with CUresult 3"),
])
def test_lookup_says_why_there_is_no_batched_copy(monkeypatch, driver, message):
    reason = _with_driver(monkeypatch, driver)
    assert isinstance(reason, str) and message in reason


def _api(fail_index, result=0):
    function = _Function(result)
    name = "cuMemcpyBatchAsync" if fail_index else "cuMemcpyBatchAsync_v2"
    return batched.BatchApi(name, function, fail_index, 13000, lambda code: f"CUDA_ERROR_X ({code})"), function


@pytest.mark.parametrize("fail_index", [False, True])
def test_the_call_passes_arrays_built_once(fail_index):
    api, function = _api(fail_index)
    dsts = np.array([0x7000, 0x8100], np.uint64)
    srcs = np.array([0x1000, 0x2100], np.uint64)
    call = batched._Batch(api, dsts, srcs, np.array([4096, 4096], np.uintp), batched.SRC_ACCESS_ORDER["any"], 0x55)
    call()
    call()
    first, second = function.calls
    assert first == second  # the same arguments, nothing rebuilt
    assert len(first) == (9 if fail_index else 8)
    assert first[0] == call.dsts.ctypes.data and first[1] == call.srcs.ctypes.data
    assert first[2] == call.sizes.ctypes.data and first[3] == 2 and first[6] == 1 and first[-1] == 0x55
    assert list(call.dsts) == [0x7000, 0x8100] and list(call.sizes) == [4096, 4096]
    attributes = batched._Attributes.from_address(first[4])
    assert attributes.srcAccessOrder == 3 and attributes.flags == 0 and attributes.srcLocHint.type == 0
    assert ctypes.c_size_t.from_address(first[5]).value == 0  # the attributes apply from copy 0 on
    assert ctypes.sizeof(batched._Attributes) == 24  # CUmemcpyAttributes: order, two CUmemLocation, flags
    if fail_index:
        assert first[7] == ctypes.addressof(call.fail_index)


def test_a_refused_call_raises_with_the_drivers_error():
    api, _ = _api(True, result=1)
    call = batched._Batch(api, np.zeros(3, np.uint64), np.zeros(3, np.uint64), np.ones(3, np.uintp), 1, 0x55)
    call.fail_index.value = 2
    with pytest.raises(batched.BatchCallFailed, match=r"cuMemcpyBatchAsync failed at copy 2: CUDA_ERROR_X \(1\)") \
            as raised:
        call()
    assert raised.value.result == 1
    call.fail_index.value = 2**64 - 1  # SIZE_MAX: not about one copy
    with pytest.raises(batched.BatchCallFailed, match=r"cuMemcpyBatchAsync failed: CUDA_ERROR_X"):
        call()


def test_access_orders_are_the_drivers_values():
    # CUmemcpySrcAccessOrder: INVALID 0, STREAM 1, DURING_API_CALL 2, ANY 3
    assert batched.SRC_ACCESS_ORDER == {"stream": 1, "during-call": 2, "any": 3}
    assert set(batched.SRC_ACCESS_ORDER) == set(batched.ACCESS_ORDERS)


def test_headline_is_the_most_copies_at_the_smallest_size_against_the_loop():
    """At the most copies and the smallest size of each host memory: each batch against the copies one by one; a
    failed row, fewer copies or larger copies are not in it."""
    def row(host, order, issue, copies, nbytes, host_ms, gbps, status="ok"):
        return {"experiment": "batched", "status": status, "host_memory": host, "access_order": order,
                "issue": issue, "copies": copies, "bytes": nbytes, "host_ms": host_ms, "gbps": gbps}

    frame = pd.DataFrame([
        row("pinned", "stream", "one-by-one", 64, 4096, 0.8, 2.0),
        row("pinned", "stream", "batch", 64, 4096, 0.2, 8.0),
        row("pinned", "any", "batch", 64, 4096, 0.1, 9.5),
        row("pinned", "any", "batch", 64, 4096, 0.05, 99.0, status="failed"),  # a failed row: not shown
        row("pinned", "stream", "batch", 8, 4096, 0.01, 1.0),  # fewer copies: not the headline's point
        row("pinned", "stream", "batch", 64, 65536, 0.3, 20.0),  # a larger size: neither
        row("pageable", "stream", "batch", 64, 4096, 0.4, 3.0),  # no loop measured: dashes
    ])
    table = views()["batched"].headline(frame)
    assert table.to_dict("records") == [
        {"host memory": "pinned", "access order": "stream", "copies": "64 × 4 KiB", "batch host ms": "0.2",
         "one-by-one host ms": "0.8", "host time saved": "4.0×", "batch GB/s": "8.0", "one-by-one GB/s": "2.0"},
        {"host memory": "pinned", "access order": "any", "copies": "64 × 4 KiB", "batch host ms": "0.1",
         "one-by-one host ms": "0.8", "host time saved": "8.0×", "batch GB/s": "9.5", "one-by-one GB/s": "2.0"},
        {"host memory": "pageable", "access order": "stream", "copies": "64 × 4 KiB", "batch host ms": "0.4",
         "one-by-one host ms": "—", "host time saved": "—", "batch GB/s": "3.0", "one-by-one GB/s": "—"}]
