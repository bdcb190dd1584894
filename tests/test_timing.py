"""The timing core without a GPU: statistics, stop rules, samples, host clocks (a fake clock), and the CUDA-event
batching of Timer, Timeline and GpuClock against a fake runtime (the ``runtime`` of bench.timing's GPU modules is a
lazy stand-in that tests replace). The gate and the spin watch need a GPU: tests/test_gpu.py."""

import math
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench.results.schema import SAMPLES, check_row, schema_of
from bench.timing import clock as clock_module
from bench.timing import gpu, host
from bench.timing import timeline as timeline_module
from bench.timing import (Context, Floor, GpuTiming, MeasurementFailed, Samples, StopRule, Stopwatch, Summary, Timeline,
                          Timer, concurrency, host_interval, host_samples, host_steps)
from paths import with_path

# --- statistics ------------------------------------------------------------------------------------------------


def test_summary_statistics():
    summary = Summary.of([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (summary.n, summary.median, summary.min, summary.max) == (5, 3.0, 1.0, 100.0)
    assert summary.stdrel == pytest.approx(43.3 / 22.0, rel=1e-2)
    # MAD = 1 (deviations 2,1,0,1,97): robust to the outlier
    assert summary.median_relerr == pytest.approx(1.2533 * 1.4826 * 1.0 / math.sqrt(5) / 3.0, rel=1e-6)


def test_summary_of_an_even_count_and_of_integers():
    summary = Summary.of([4, 1, 3, 2])
    assert summary.median == 2.5 and isinstance(summary.median, float) and (summary.min, summary.max) == (1, 4)
    # deviations from 2.5: 1.5, 1.5, 0.5, 0.5 -> MAD 1.0
    assert summary.median_relerr == pytest.approx(1.2533 * 1.4826 * 1.0 / 2 / 2.5, rel=1e-6)


def test_summary_of_one_sample_or_of_zeros_has_unknown_spread():
    one = Summary.of([2.0])
    assert one.median == 2.0 and math.isinf(one.stdrel) and math.isinf(one.median_relerr)
    zeros = Summary.of([0.0, 0.0, 0.0])
    assert math.isinf(zeros.stdrel) and math.isinf(zeros.median_relerr)
    with pytest.raises(ValueError):
        Summary.of([])


def test_stop_rule_reasons():
    rule = StopRule(min_samples=3, max_samples=6, target_relerr=0.01, time_cap_s=1.0)
    assert rule.stop_reason([1.0, 1.0], 99.0) is None  # below min_samples, however quiet or late
    assert rule.stop_reason([1.0, 1.0, 1.0], 0.0) == "converged"
    noisy = [1.0, 2.0, 3.0, 1.0]
    assert rule.stop_reason(noisy, 0.5) is None
    assert rule.stop_reason(noisy, 1.0) == "time_cap"
    assert rule.stop_reason(noisy + [2.0, 3.0], 0.0) == "max_samples"
    assert rule.stop_reason([1.0] * 6, 0.0) == "max_samples"  # the cap on samples is checked first


def test_stop_rule_converges_as_samples_accumulate():
    rule = StopRule(min_samples=2, max_samples=5000, target_relerr=0.005, time_cap_s=1e9)
    samples = [1.0 + 0.02 * ((i * 7) % 5 - 2) for i in range(2000)]  # ±4% noise
    first = next((n for n in range(2, 2000) if rule.stop_reason(samples[:n], 0.0) == "converged"), None)
    assert first is not None and 20 < first < 1000


@pytest.mark.parametrize("changes", [
    {"min_samples": 0}, {"min_samples": 5, "max_samples": 4}, {"target_relerr": 0}, {"time_cap_s": 0},
    {"batch_ms": -1}, {"gate_timeout_s": 0}, {"max_ops_per_batch": 0}, {"warmup_batches": -1},
])
def test_stop_rule_validation(changes):
    with pytest.raises(ValueError):
        StopRule(**changes)


def test_stop_rule_replace_capped_and_batch_sizing():
    rule = StopRule(batch_ms=1.0, max_ops_per_batch=64)
    assert rule.ops_per_batch(0.3) == 4
    assert rule.ops_per_batch(5.0) == 1
    assert rule.ops_per_batch(0.001) == 64
    assert rule.ops_per_batch(0.0) == 64
    changed = rule.replace(min_samples=3)
    assert changed.min_samples == 3 and rule.min_samples == 10 and changed.time_cap_s == rule.time_cap_s
    capped = StopRule(min_samples=20, time_cap_s=1.0).capped(time_cap_s=0.05, min_samples=5)
    assert (capped.time_cap_s, capped.min_samples) == (0.05, 5)
    loose = StopRule(min_samples=3, time_cap_s=0.01).capped(time_cap_s=0.05, min_samples=5)
    assert (loose.time_cap_s, loose.min_samples) == (0.01, 3)  # a cap never raises a rule


# --- samples ---------------------------------------------------------------------------------------------------


def test_sample_columns_are_the_schemas_sample_columns():
    names = {item.name for item in SAMPLES}
    samples = Samples([1.0, 3.0, 2.0], "ms", "gpu", "GPU time per copy", "converged", 4, True)
    columns = samples.columns()
    assert set(columns) == names and set(Samples.missing("us", "host", "x")) == names
    assert columns["samples"] == [1.0, 3.0, 2.0] and columns["samples"] is not samples.values
    assert (columns["median"], columns["min"], columns["max"], columns["n_samples"]) == (2.0, 1.0, 3.0, 3)
    assert (columns["unit"], columns["clock"], columns["metric"]) == ("ms", "gpu", "GPU time per copy")
    assert (columns["ops_per_sample"], columns["gated"], columns["stop_reason"]) == (4, True, "converged")
    assert columns["median_relerr"] == Summary.of([1.0, 3.0, 2.0]).median_relerr
    assert samples.median == 2.0 and samples.summary.n == 3
    schema = schema_of(SAMPLES)
    check_row(columns, schema)
    check_row(Samples.missing("us", "host", "x", gated=None), schema)


def test_missing_samples_are_empty():
    missing = Samples.missing("ms", "gpu", "GPU time per copy", gated=False)
    assert missing["samples"] == [] and missing["n_samples"] == 0 and missing["stop_reason"] is None
    assert all(math.isnan(missing[name]) for name in ("median", "min", "max", "stdrel", "median_relerr"))
    assert missing["gated"] is False and missing["unit"] == "ms"


def test_the_statistics_and_the_package_import_nothing_cuda():
    """bench.timing.stats (and the package, whose GPU modules load on first use) serve the planner, the schema and
    the analysis commands: importing them loads neither bench.platform.cuda nor CuPy nor numba."""
    script = ("import sys\nimport bench.timing.stats\nstats = sorted(sys.modules)\n"
              "from bench.timing import Samples, StopRule, Stopwatch, process_age_s\n"
              "cuda = lambda names: [m for m in names if m.split('.')[0] in ('cupy', 'numba') or m == 'bench.platform.cuda']\n"
              "print(cuda(stats), cuda(sys.modules))\n"
              "from bench.timing import Timer\nprint('bench.timing.gpu' in sys.modules, cuda(sys.modules))\n")
    source = str(Path(__file__).resolve().parents[1] / "src")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": with_path(source)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["[] []", "True ['bench.platform.cuda']"]  # the GPU modules: lazy stand-ins only


# --- host clocks (a fake perf_counter) -------------------------------------------------------------------------


class FakeTime:
    """``time`` as bench.timing.host uses it: a perf_counter that only moves when told to."""

    def __init__(self):
        self.now = 100.0

    def perf_counter(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(host, "time", fake)
    return fake


def test_host_samples_warm_up_divide_and_run_after(clock):
    calls, after = [], []

    def call():
        calls.append(1)
        clock.advance(0.004)  # 4 ms a call

    samples = host_samples(call, StopRule(min_samples=3, max_samples=3), metric="host time per launch", unit="us",
                           per_sample=4, warmup=2, after=lambda: after.append(clock.advance(1.0)))
    assert len(calls) == 5 and len(after) == 5  # two warm-up calls, untimed work after each call
    assert samples.values == pytest.approx([1000.0] * 3)  # 4000 µs / 4 operations; `after` is not in it
    assert (samples.unit, samples.clock, samples.metric, samples.ops_per_sample) == ("us", "host",
                                                                                     "host time per launch", 4)
    assert samples.stop_reason == "max_samples" and samples.gated is None


def test_host_samples_stop_at_the_time_cap(clock):
    durations = iter([0.0, 0.1, 0.3] * 100)  # noisy: never converges
    samples = host_samples(lambda: clock.advance(next(durations)), StopRule(min_samples=2, time_cap_s=1.0),
                           metric="m", unit="ms", warmup=0)
    assert samples.stop_reason == "time_cap"
    assert 1.0 <= sum(samples.values) / 1e3 < 1.0 + 0.3  # stopped at the first sample past the cap


def test_host_steps_time_each_step_and_the_round(clock):
    steps = [("alloc", lambda: clock.advance(0.001)), ("free", lambda: clock.advance(0.002))]
    per_step, reason = host_steps(steps, StopRule(min_samples=4, max_samples=4), unit="us", warmup=3)
    assert reason == "max_samples"
    assert per_step["alloc"] == pytest.approx([1000.0] * 4)  # the warm-up rounds are dropped
    assert per_step["free"] == pytest.approx([2000.0] * 4)
    assert per_step["total"] == pytest.approx([3000.0] * 4)


def test_host_interval_and_stopwatch(clock):
    def call():
        clock.advance(0.25)
        return "done"

    assert host_interval(call) == (pytest.approx(250.0), "done")
    assert host_interval(call, unit="us")[0] == pytest.approx(250_000.0)
    watch = Stopwatch()
    clock.advance(1.5)
    assert watch.seconds() == pytest.approx(1.5)


def test_context_picks_rules_by_purpose(clock):
    context = Context({"stage": StopRule(min_samples=2, max_samples=2)})
    assert context.rule() == StopRule() and context.rule("stage").max_samples == 2
    assert context.rule("unknown") is context.rule("default")
    assert context.timer("stage") is context.timer("stage") and context.timer("stage").rule.max_samples == 2
    assert context.timer() is not context.timer("stage") and context.timer().rule == StopRule()
    assert len(context.host(lambda: clock.advance(0.001), metric="m", purpose="stage").values) == 2
    per_step, _ = context.host_steps([("a", lambda: clock.advance(0.001))], purpose="stage")
    assert len(per_step["a"]) == 2
    quick = Context({"default": StopRule(min_samples=1, max_samples=1)})
    assert len(quick.host(lambda: None, metric="m", warmup=0).values) == 1
    assert Context().rules == {"default": StopRule()}


def test_concurrency_of_intervals():
    # 0-4 alone, 4-6 two ops, 6-8 three ops, 8-10 alone: 4 of 10 ms have two or more running
    assert concurrency([(0.0, 6.0), (4.0, 8.0), (6.0, 8.0), (8.0, 10.0)]) == pytest.approx(0.4)
    assert concurrency([(0.0, 1.0), (1.0, 2.0)]) == 0.0  # back to back is not overlap
    assert concurrency([(0.0, 2.0), (0.0, 2.0)]) == 1.0
    assert concurrency([(2.0, 4.0), (3.0, 4.0)]) == pytest.approx(0.25)  # the makespan starts at 0
    assert math.isnan(concurrency([]))
    assert math.isnan(concurrency([(0.0, 0.0)]))


# --- CUDA events, faked ----------------------------------------------------------------------------------------


class FakeRuntime:
    """Events whose elapsed time is 0.25 ms per enqueued op (first end event) and 0.5 ms per op (the others)."""

    def __init__(self, log):
        self.log, self.next_event, self.ops, self.created, self.destroyed = log, 1, 0, 0, 0

    def eventCreate(self):
        self.created += 1
        self.next_event += 1
        return self.next_event

    def eventDestroy(self, event):
        self.destroyed += 1

    def eventRecord(self, event, stream):
        self.log.append(("record", event, stream))

    def streamWaitEvent(self, stream, event, flags):
        self.log.append(("wait", stream, event))

    def eventSynchronize(self, event):
        self.log.append(("sync", event))

    def eventElapsedTime(self, start, end):
        per_op = 0.25 if end == start + 1 else 0.5
        return self.ops * per_op


class FakeStream:
    def __init__(self, ptr):
        self.ptr = ptr


class FakeGate:
    def __init__(self, log, expire=False, *label):
        self.log, self.expire, self.label = log, expire, label

    def close(self, stream):
        self.log.append(("close", stream.ptr))

    def open(self):
        self.log.append(("open", *self.label))

    def check(self):
        self.log.append(("check",))
        if self.expire:
            raise MeasurementFailed("gate watchdog expired")


@pytest.fixture
def fake(monkeypatch):
    log = []
    runtime = FakeRuntime(log)
    monkeypatch.setattr(gpu, "runtime", runtime)
    return log, runtime


def _enqueue(log, runtime):
    def enqueue(ops):
        runtime.ops = ops
        log.append(("enqueue", ops))

    return enqueue


def _kinds(log):
    return [entry[0] for entry in log]


def test_timer_batches_and_stops(fake):
    log, runtime = fake
    timer = Timer(StopRule(min_samples=4, max_samples=50, batch_ms=1.0, warmup_batches=1))
    timer._gates[None] = FakeGate(log)
    result = timer.measure(_enqueue(log, runtime), [FakeStream(10), FakeStream(20)], metric="GPU time per copy")
    assert isinstance(result, GpuTiming)
    samples = result.samples
    assert samples.ops_per_sample == 2  # sized from the single-op batch: 1.0 ms / 0.5 ms
    assert samples.values == [0.5] * 4 and samples.stop_reason == "converged"
    assert (samples.unit, samples.clock, samples.metric, samples.gated) == ("ms", "gpu", "GPU time per copy", True)
    assert result.stream_ms == [[0.25] * 4, [0.5] * 4]
    assert (result.median_ms, result.fastest_ms) == (0.5, 0.5)
    assert (result.stream_median_ms(0), result.stream_fastest_ms(1)) == (0.25, 0.5)
    assert len(result.enqueue_ms) == len(result.wall_ms) == 4
    assert all(wall >= enqueue >= 0 for wall, enqueue in zip(result.wall_ms, result.enqueue_ms))
    assert result.enqueue_median_ms >= 0
    assert [entry[1] for entry in log if entry[0] == "enqueue"] == [1, 1, 2, 2, 2, 2, 2]  # 2 sizing, 1 warm-up
    assert runtime.created == runtime.destroyed == 3
    # Every batch: gate closed, start recorded, the second stream waits on it, work, both end events recorded on
    # their own streams, then the gate opens; then the host waits for the end events, then checks the gate.
    start, first_end, second_end = 2, 3, 4
    first_batch = log[: log.index(("check",)) + 1]
    assert first_batch == [("close", 10), ("record", start, 10), ("wait", 20, start), ("enqueue", 1),
                           ("record", first_end, 10), ("record", second_end, 20), ("open",),
                           ("sync", first_end), ("sync", second_end), ("check",)]
    assert _kinds(log).count("close") == _kinds(log).count("open") == _kinds(log).count("check") == 7


def test_timer_ungated_never_touches_the_gate(fake):
    log, runtime = fake
    timer = Timer(StopRule(min_samples=2))
    timer._gates[None] = FakeGate(log)
    result = timer.measure(_enqueue(log, runtime), [FakeStream(1)], metric="m", gated=False)
    assert not {"close", "open", "check"} & set(_kinds(log))
    assert result.samples.gated is False


def test_timer_builds_its_gate_only_when_gated(fake, monkeypatch):
    log, runtime = fake
    built = []
    monkeypatch.setattr(gpu, "Gate", lambda timeout_s: built.append(timeout_s) or FakeGate(log))
    Timer(StopRule(min_samples=2)).measure(_enqueue(log, runtime), [FakeStream(1)], metric="m", gated=False)
    assert built == []
    Timer(StopRule(min_samples=2, gate_timeout_s=7.0)).measure(_enqueue(log, runtime), [FakeStream(1)], metric="m")
    assert built == [7.0]


def test_timer_reports_an_expired_gate_and_frees_its_events(fake):
    log, runtime = fake
    timer = Timer(StopRule())
    timer._gates[None] = FakeGate(log, expire=True)
    with pytest.raises(MeasurementFailed, match="expired"):
        timer.measure(_enqueue(log, runtime), [FakeStream(1)], metric="m")
    assert runtime.created == runtime.destroyed == 2


def test_timer_opens_the_gate_when_enqueue_fails(fake):
    log, runtime = fake
    timer = Timer(StopRule())
    timer._gates[None] = FakeGate(log)

    def broken(ops):
        raise RuntimeError("enqueue failed")

    with pytest.raises(RuntimeError, match="enqueue failed"):
        timer.measure(broken, [FakeStream(1)], metric="m")
    assert log[-1] == ("open",) and runtime.created == runtime.destroyed


def test_timer_fixed_batch_size_and_run_once(fake):
    log, runtime = fake
    timer = Timer(StopRule(min_samples=3, warmup_batches=2))
    timer._gates[None] = FakeGate(log)
    result = timer.measure(_enqueue(log, runtime), [FakeStream(1)], metric="m", ops_per_batch=5)
    assert [entry[1] for entry in log if entry[0] == "enqueue"] == [1, 5, 5, 5, 5, 5]  # no sizing batch
    assert result.samples.ops_per_sample == 5 and result.samples.values == [0.25] * 3
    log.clear()
    assert timer.run_once(_enqueue(log, runtime), [FakeStream(1), FakeStream(2)]) == [0.25, 0.5]
    assert [entry[1] for entry in log if entry[0] == "enqueue"] == [1]
    with pytest.raises(ValueError):
        timer.measure(_enqueue(log, runtime), [], metric="m")


def test_timer_over_two_gpus_times_each_stream_from_its_own_gpus_start(fake, monkeypatch):
    """Each GPU's first stream carries its gate and start event, made and recorded with that GPU current; the
    gates open last-closed first, so the first gate's hold outlasts the others' latches."""
    log, runtime = fake
    current = []

    @contextmanager
    def on_device(device):
        current.append(device)
        try:
            yield
        finally:
            current.pop()

    def record(event, stream):
        log.append(("record", event, stream, current[-1]))

    monkeypatch.setattr(gpu, "on_device", on_device)
    monkeypatch.setattr(runtime, "eventRecord", record)
    timer = Timer(StopRule(min_samples=3, warmup_batches=0))
    timer._gates = {0: FakeGate(log, False, 0), 1: FakeGate(log, False, 1)}
    result = timer.measure(_enqueue(log, runtime), [FakeStream(10), FakeStream(20), FakeStream(30)], metric="m",
                           ops_per_batch=1, devices=[0, 1, 0])
    start_0, end_10, start_1, end_20, end_30 = 2, 3, 4, 5, 6  # made in that order, each with its GPU current
    assert result.stream_ms == [[0.25] * 3, [0.25] * 3, [0.5] * 3]  # stream 30 from GPU 0's start event
    first_batch = [("close", 10), ("record", start_0, 10, 0), ("close", 20), ("record", start_1, 20, 1),
                   ("wait", 30, start_0), ("enqueue", 1), ("record", end_10, 10, 0), ("record", end_20, 20, 1),
                   ("record", end_30, 30, 0), ("open", 1), ("open", 0), ("sync", end_10), ("sync", end_20),
                   ("sync", end_30), ("check",), ("check",)]
    assert log[: len(first_batch)] == first_batch
    assert runtime.created == runtime.destroyed == 5 and current == []


def test_timer_each_prepares_every_sample_and_times_one_operation(fake):
    """Work that needs a fresh state: prepare() before every batch (warm-up included), one operation per sample."""
    log, runtime = fake
    timer = Timer(StopRule(min_samples=3, warmup_batches=2))
    timer._gates[None] = FakeGate(log)
    result = timer.each(lambda: log.append(("prepare",)), _enqueue(log, runtime), [FakeStream(1)], metric="m")
    kinds = [kind for kind in _kinds(log) if kind in ("prepare", "enqueue")]
    assert kinds == ["prepare", "enqueue"] * 5  # two warm-ups, three samples
    assert [entry[1] for entry in log if entry[0] == "enqueue"] == [1] * 5
    assert result.samples.values == [0.25] * 3 and result.samples.ops_per_sample == 1
    assert (result.samples.metric, result.samples.gated) == ("m", True) and result.stream_ms == [[0.25] * 3]
    assert runtime.created == runtime.destroyed == 2


class ClockRuntime:
    """Events on a simulated GPU clock: each record stamps the GPU time at which the work before it finishes."""

    def __init__(self, log):
        self.log, self.stamps, self.gpu_ms, self.next_event, self.destroyed = log, {}, 0.0, 0, []

    def eventCreate(self):
        self.next_event += 1
        return self.next_event

    def eventDestroy(self, event):
        self.destroyed.append(event)

    def eventRecord(self, event, stream):
        self.stamps[event] = self.gpu_ms
        self.log.append(("record", event))

    def eventSynchronize(self, event):
        pass

    def eventElapsedTime(self, start, end):
        return self.stamps[end] - self.stamps[start]


def test_timeline_reads_every_operation_relative_to_the_start(monkeypatch):
    fake = ClockRuntime([])
    monkeypatch.setattr(timeline_module, "runtime", fake)
    timeline, stream = Timeline(), FakeStream(5)
    fake.gpu_ms = 10.0
    timeline.start(stream)
    for chunk, (kind, length) in enumerate((("H2D", 1.0), ("kernel", 2.0))):
        with timeline.op(stream, {"chunk": chunk, "op": kind}):
            fake.gpu_ms += length
    assert timeline.read() == [{"chunk": 0, "op": "H2D", "start_ms": 0.0, "end_ms": 1.0},
                               {"chunk": 1, "op": "kernel", "start_ms": 1.0, "end_ms": 3.0}]
    created = fake.next_event
    timeline.start(stream)  # a second run reuses the pooled events and forgets the first run's operations
    with timeline.op(stream, {"op": "D2H"}):
        fake.gpu_ms += 0.5
    assert fake.next_event == created and [op["op"] for op in timeline.read()] == ["D2H"]
    timeline.close()
    assert sorted(fake.destroyed) == list(range(1, created + 1))


class ClockGate:
    def __init__(self, log):
        self.log = log

    def close(self, stream):
        self.log.append(("close",))

    def open(self):
        self.log.append(("open",))

    def check(self):
        self.log.append(("check",))


def test_gpu_clock_reads_gpu_time_between_calls_behind_a_gate(monkeypatch):
    log = []
    fake = ClockRuntime(log)
    monkeypatch.setattr(clock_module, "runtime", fake)
    clock = clock_module.GpuClock()
    clock._stream, clock._events, clock._gate = FakeStream(7), (1, 2), ClockGate(log)
    start = clock()
    assert log == [("record", 2), ("close",), ("record", 1)]  # start event recorded behind the closed gate
    fake.gpu_ms += 3.0  # the benchmarked work: 3 ms of GPU time
    log.clear()
    end = clock()
    assert log[:3] == [("record", 2), ("open",), ("check",)]  # end event recorded before the gate opens
    assert end - start == pytest.approx(3.0e-3)
    fake.gpu_ms += 0.5  # between rounds: not inside any start/end pair
    clock()
    fake.gpu_ms += 2.0
    assert clock() - end == pytest.approx(2.5e-3)
    assert repr(clock) == "GpuClock(gated=True)"


# --- the accuracy floor -----------------------------------------------------------------------------------------


def test_a_floor_is_met_by_enough_samples_or_a_narrow_interval():
    floor = Floor(min_samples=10, interval=0.01)
    assert floor.met([1.0, 1.5, 2.0] * 4)  # 12 samples, however spread
    assert floor.met([1.0, 1.001, 0.999, 1.0, 1.002, 0.998])  # 6 samples whose median is known to 0.2%
    assert not floor.met([1.0, 1.1, 0.9, 1.0, 1.05, 0.95])  # 6 samples, 5% apart
    assert not floor.met([1.0, 1.0, 1.0])  # 3 samples reach no 95% interval
    assert not floor.met([])
    with pytest.raises(ValueError):
        Floor(min_samples=0)
