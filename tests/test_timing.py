import math

import pytest

from bench import timing
from bench.timing import MeasurementFailed, StopRule, Summary, Timer


def test_summary_statistics():
    summary = Summary.of([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (summary.n, summary.median_ms, summary.min_ms, summary.max_ms) == (5, 3.0, 1.0, 100.0)
    assert summary.stdrel == pytest.approx(43.3 / 22.0, rel=1e-2)
    # MAD = 1 (deviations 2,1,0,1,97): robust to the outlier
    assert summary.median_relerr == pytest.approx(1.2533 * 1.4826 * 1.0 / math.sqrt(5) / 3.0, rel=1e-6)


def test_summary_of_one_sample_has_unknown_spread():
    summary = Summary.of([2.0])
    assert summary.median_ms == 2.0 and math.isinf(summary.stdrel) and math.isinf(summary.median_relerr)
    with pytest.raises(ValueError):
        Summary.of([])


def test_stop_rule():
    rule = StopRule(min_samples=3, max_samples=6, target_relerr=0.01, time_cap_s=1.0)
    assert rule.stop_reason([1.0, 1.0], 0.0) is None  # below min_samples, however quiet
    assert rule.stop_reason([1.0, 1.0, 1.0], 0.0) == "converged"
    noisy = [1.0, 2.0, 3.0, 1.0]
    assert rule.stop_reason(noisy, 0.5) is None
    assert rule.stop_reason(noisy, 1.5) == "time_cap"
    assert rule.stop_reason(noisy + [2.0, 3.0], 0.0) == "max_samples"


def test_stop_rule_converges_as_samples_accumulate():
    rule = StopRule(min_samples=2, target_relerr=0.005, time_cap_s=1e9)
    samples = [1.0 + 0.02 * ((i * 7) % 5 - 2) for i in range(2000)]  # ±4% noise
    stops = [n for n in range(2, 2000) if rule.stop_reason(samples[:n], 0.0) == "converged"]
    assert stops and 20 < stops[0] < 1000


def test_stop_rule_validation_and_batch_sizing():
    with pytest.raises(ValueError):
        StopRule(min_samples=0)
    with pytest.raises(ValueError):
        StopRule(min_samples=5, max_samples=4)
    rule = StopRule(batch_ms=1.0, max_ops_per_batch=64)
    assert rule.ops_per_batch(0.3) == 4
    assert rule.ops_per_batch(5.0) == 1
    assert rule.ops_per_batch(0.001) == 64
    assert rule.ops_per_batch(0.0) == 64


class FakeRuntime:
    """Events whose elapsed time is 0.25 ms per enqueued op (stream 0) and 0.5 ms per op (stream 1)."""

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
        pass

    def eventElapsedTime(self, start, end):
        per_op = 0.25 if end == start + 1 else 0.5
        return self.ops * per_op


class FakeStream:
    def __init__(self, ptr):
        self.ptr = ptr


class FakeGate:
    def __init__(self, log, expire=False):
        self.log, self.expire = log, expire

    def close(self, stream):
        self.log.append(("close", stream.ptr))

    def open(self):
        self.log.append(("open",))

    def check(self):
        if self.expire:
            raise MeasurementFailed("gate watchdog expired")


@pytest.fixture
def fake(monkeypatch):
    log = []
    runtime = FakeRuntime(log)
    monkeypatch.setattr(timing, "runtime", runtime)
    return log, runtime


def test_timer_batches_and_stops(fake):
    log, runtime = fake
    timer = Timer(StopRule(min_samples=4, max_samples=50, batch_ms=1.0, warmup_batches=1))
    timer._gate = FakeGate(log)

    def enqueue(ops):
        runtime.ops = ops
        log.append(("enqueue", ops))

    result = timer.measure(enqueue, [FakeStream(10), FakeStream(20)])
    assert result.ops_per_sample == 2  # sized from the single-op batch: 1.0 ms / 0.5 ms
    assert result.samples_ms == [0.5] * 4 and result.stop_reason == "converged"
    assert result.stream_samples_ms == [[0.25] * 4, [0.5] * 4]
    assert [entry[1] for entry in log if entry[0] == "enqueue"] == [1, 1, 2, 2, 2, 2, 2]  # 2 sizing, 1 warm-up
    assert runtime.created == runtime.destroyed == 3
    # Every batch: gate closed, start recorded, second stream waits, work, both end events, then the gate opens.
    first_batch = log[: log.index(("open",)) + 1]
    assert [entry[0] for entry in first_batch] == ["close", "record", "wait", "enqueue", "record", "record", "open"]


def test_timer_ungated_never_touches_the_gate(fake):
    log, runtime = fake
    timer = Timer(StopRule(min_samples=2))
    timer._gate = FakeGate(log)
    timer.measure(lambda ops: setattr(runtime, "ops", ops), [FakeStream(1)], gated=False)
    assert not any(entry[0] in {"close", "open"} for entry in log)


def test_timer_reports_an_expired_gate(fake):
    log, runtime = fake
    timer = Timer(StopRule())
    timer._gate = FakeGate(log, expire=True)
    with pytest.raises(MeasurementFailed, match="expired"):
        timer.measure(lambda ops: setattr(runtime, "ops", ops), [FakeStream(1)])
    assert runtime.created == runtime.destroyed


def test_timer_opens_the_gate_when_enqueue_fails(fake):
    log, runtime = fake
    timer = Timer(StopRule())
    timer._gate = FakeGate(log)

    def broken(ops):
        raise RuntimeError("enqueue failed")

    with pytest.raises(RuntimeError):
        timer.measure(broken, [FakeStream(1)])
    assert log[-1] == ("open",)


def test_timer_fixed_batch_size_and_host_enqueue_time(fake):
    log, runtime = fake
    timer = Timer(StopRule(min_samples=3, warmup_batches=1))
    timer._gate = FakeGate(log)
    result = timer.measure(lambda ops: setattr(runtime, "ops", ops), [FakeStream(1)], ops_per_batch=1)
    assert result.ops_per_sample == 1 and len(result.enqueue_ms) == 3
    columns = result.columns()
    assert columns["host_enqueue_ms"] >= 0 and columns["median_ms"] == 0.25 and columns["n_samples"] == 3
    assert timer.run_once(lambda ops: setattr(runtime, "ops", ops), [FakeStream(1)]) == [0.25]


class _ClockRuntime:
    """Events on a simulated GPU clock: each record stamps the time the work enqueued before it finishes."""

    def __init__(self, log):
        self.log, self.stamps, self.gpu_ms, self.next_event = log, {}, 0.0, 0

    def eventCreate(self):
        self.next_event += 1
        return self.next_event

    def eventRecord(self, event, stream):
        self.stamps[event] = self.gpu_ms
        self.log.append(("record", event))

    def eventSynchronize(self, event):
        pass

    def eventElapsedTime(self, start, end):
        return self.stamps[end] - self.stamps[start]


class _ClockGate:
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
    fake = _ClockRuntime(log)
    monkeypatch.setattr(timing, "runtime", fake)
    clock = timing.GpuClock()
    clock._stream, clock._events, clock._gate = type("S", (), {"ptr": 7})(), (1, 2), _ClockGate(log)
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
