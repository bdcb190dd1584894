"""The timing core's CUDA C++ kernels on a real GPU: the hold's watchdog, the clock pair, and a hold, gate and spin
that import neither numba nor CuPy once their cubin is kept. Skipped (with the reason) where no GPU is visible."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from paths import with_path

pytestmark = pytest.mark.gpu
SRC = str(Path(__file__).resolve().parents[1] / "src")

LIGHT = """
import sys
from bench.timing import Gate, SpinWatch
from bench.measure.memory import OwnedStream
from bench.usercode.hold import device_hold
hold = device_hold()
hold.launch(5.0)
hold.wait_full()
hold.finish()
stream = OwnedStream(blocking=False)
gate = Gate(5.0)
gate.close(stream)
gate.open()
watch = SpinWatch()
watch.launch(stream, 0, 1.0)
watch.wait_started(0)
from bench.platform.cuda import runtime
runtime.deviceSynchronize()
gate.check()
print(sorted(name for name in ("numba", "cupy") if name in sys.modules))
"""


def test_the_hold_the_gate_and_the_spin_need_neither_numba_nor_cupy_once_compiled():
    env = {**os.environ, "PYTHONPATH": with_path(SRC)}
    runs = [subprocess.run([sys.executable, "-c", LIGHT], env=env, capture_output=True, text=True, timeout=120)
            for _ in range(2)]
    assert all(run.returncode == 0 for run in runs), runs[-1].stderr
    assert runs[1].stdout.strip().splitlines()[-1] == "[]", runs[1].stdout  # the second loads the kept cubin


@pytest.mark.usefixtures("whole_gpu")
def test_a_hold_nobody_beats_ends_by_its_watchdog_and_a_released_one_at_once():
    from bench.usercode.hold import device_hold

    hold = device_hold()
    started = time.perf_counter()
    hold.launch(0.05)
    hold.wait_full()
    while not hold.ended():  # a hold that never ends would stop here: its cap is 60 s
        assert time.perf_counter() - started < 120, "the hold's watchdog did not end it"
    assert hold.expired() and not hold.holding()
    hold.finish()
    hold.launch(30.0)
    hold.wait_full()
    hold.finish()  # released by the host: returns without waiting for the watchdog
    assert hold.ended() and not hold.expired()


def test_the_clock_pair_places_the_gpus_timer_on_the_hosts():
    from bench.measure.memory import OwnedStream
    from bench.timing import ClockPair, SpinWatch

    stream = OwnedStream(blocking=False)
    try:
        clock = ClockPair(stream, reads=2000)
        watch = SpinWatch()
        before = time.perf_counter_ns()
        watch.launch(stream, 0, 1.0)
        watch.wait_started(0)
        after = time.perf_counter_ns()
        from bench.platform.cuda import runtime

        runtime.streamSynchronize(stream.ptr)
        started = clock.host_ns(int(watch.stamps[0]))
        assert before <= started <= after + 1_000_000  # seen by the host after it started (plus the write's trip)
    finally:
        stream.close()
