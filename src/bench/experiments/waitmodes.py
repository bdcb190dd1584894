"""How the host waits for the GPU: spin, yield or blocking sync, and what each costs in wake-up time and CPU.

Each ``schedule`` runs in a process of its own whose primary context is created with that flag
(``schedule_in_effect``: what the driver reports). For each ``wait`` (``stream``, ``event``,
``event-blocking-sync``) a one-thread kernel spins ``SPIN_MS`` and stamps its end; the sample, ``wake_us``, is the
time from that stamp to the host's return from the wait, the clocks paired by :class:`bench.timing.ClockPair`, and
``cpu_fraction`` the process's CPU time over the wait's wall time. The method in full: docs/methodology.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from bench.platform.cuda import cupy, runtime
from bench.experiments import Accuracy, Config, Cost, Experiment, Processes, Row, Sweeps
from bench.results.schema import FLOAT, TEXT, column
from bench.timing import (ClockPair, Context, Event, MeasurementFailed, Samples, SpinWatch, StopRule, Summary,
                          host_wait, wait_samples)
from bench.platform.vocabulary import Clock, Status, Unit, WAIT_SPIN_MS

SCHEDULES = ("auto", "spin", "yield", "blocking-sync")
WAITS = ("stream", "event", "event-blocking-sync")
SPIN_MS = WAIT_SPIN_MS  # the views name it too
METRIC = "host return after the kernel's end"

COLUMNS = (
    column("schedule", TEXT, "the context's scheduling flag, set before it was created (one process each)",
           SCHEDULES),
    column("wait", TEXT, "stream: cudaStreamSynchronize; event: cudaEventSynchronize; event-blocking-sync: on an "
                         "event created with cudaEventBlockingSync", WAITS),
    column("schedule_in_effect", TEXT, "the flag the driver reports for the context"),
    column("cpu_fraction", FLOAT, "median process CPU time over wall time during the wait"),
    column("wait_ms", FLOAT, "median host time of the wait"),
)


def before_cuda(schedule: str, device: int) -> None:
    from bench.platform import driver

    driver.set_schedule(device, schedule)


def seconds(config: Config, rule: StopRule) -> float:
    return max(rule.time_cap_s, (2 + rule.min_samples) * SPIN_MS / 1e3 * 1.5)  # wake-ups run to the cap


# --- measuring code --------------------------------------------------------------------------------------------

def _measure(config: Config, watch: SpinWatch, stream, clock: ClockPair, context: Context,
             in_effect: str) -> Row:
    row = {**config, **Samples.missing(Unit.US, Clock.HOST, METRIC), "schedule_in_effect": in_effect,
           "cpu_fraction": float("nan"), "wait_ms": float("nan"), "status": Status.FAILED, "error": ""}
    try:
        with Event(blocking_sync=config["wait"] == "event-blocking-sync") as event:
            if config["wait"] == "stream":
                def once():
                    return host_wait(watch, stream, SPIN_MS, clock, lambda: runtime.streamSynchronize(stream.ptr))
            else:
                def once():
                    return host_wait(watch, stream, SPIN_MS, clock, event.synchronize,
                                     after_launch=lambda: event.record(stream))
            samples, waits = wait_samples(once, context.rule())
    except MeasurementFailed as error:
        row["error"] = str(error)
        return row
    return {**row, **samples.columns(), "status": Status.OK,
            "cpu_fraction": Summary.of([wait.cpu_ms / wait.wall_ms for wait in waits]).median,
            "wait_ms": Summary.of([wait.wall_ms for wait in waits]).median}


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    from bench.platform import driver

    stream = cupy.cuda.Stream(non_blocking=True)
    watch = SpinWatch()
    in_effect = driver.schedule_in_effect(runtime.getDevice())
    clock = ClockPair(stream)
    for config in configs:
        yield _measure(config, watch, stream, clock, context, in_effect)


EXPERIMENT = Experiment(
    name="waitmodes",
    description="host wait modes (spin, yield, blocking sync): wake-up after a kernel's end and CPU burnt waiting",
    axes={"schedule": SCHEDULES, "wait": WAITS},
    columns=COLUMNS,
    measure=measure,
    order=17,
    sweeps=Sweeps(quick={"schedule": ("blocking-sync",), "wait": ("stream", "event")}, size_axis=""),
    cost=Cost(
        seconds,
        setup_s=0.1,  # pairing the clocks
        share_s=5,
    ),
    accuracy=Accuracy(stop_rules={"default": {"time_cap_s": 0.1}}),
    processes=Processes(process_axis="schedule", before_cuda=before_cuda),
)
