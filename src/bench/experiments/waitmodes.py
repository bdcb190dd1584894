"""How the host waits for the GPU: spin, yield or blocking sync, and what each costs in wake-up time and CPU.

Each ``schedule`` runs in a process of its own whose primary context is created with that flag
(``cuDevicePrimaryCtxSetFlags`` before the first CUDA call: what ``cudaSetDeviceFlags(cudaDeviceScheduleSpin |
...Yield | ...BlockingSync)`` does; ``auto``, the default, lets the driver choose by the number of active contexts and
CPUs); ``schedule_in_effect`` is what the driver reports afterwards. For each ``wait``:
``stream`` (``cudaStreamSynchronize``), ``event`` (``cudaEventSynchronize`` on an event recorded after the kernel) and
``event-blocking-sync`` (the same on an event created with ``cudaEventBlockingSync``, which blocks whatever the
schedule), a one-thread kernel spins ``SPIN_MS`` and stamps its end with the GPU's global timer. The sample,
``wake_us``, is the time from that stamp to the host's return from the wait, with the GPU's clock placed on the host's
by :class:`bench.timing.ClockPair` (accurate to under a microsecond, the GPU-to-host write latency, by which it may
read short). ``cpu_fraction`` is the process CPU time (every thread) over the wait's wall time: about 1 for a spinning
host thread, near 0 for one that sleeps.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pandas as pd

from bench.cuda import cupy, runtime
from bench.experiments import Config, Experiment, Row, numbers, span
from bench.schema import FLOAT, TEXT, column
from bench.timing import (ClockPair, Context, Event, MeasurementFailed, Samples, SpinWatch, StopRule, Summary, host_wait,
                          wait_samples)

SCHEDULES = ("auto", "spin", "yield", "blocking-sync")
WAITS = ("stream", "event", "event-blocking-sync")
SPIN_MS = 2.0
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
    from bench import driver

    driver.set_schedule(device, schedule)


def seconds(config: Config, rule: StopRule) -> float:
    return max(rule.time_cap_s, (2 + rule.min_samples) * SPIN_MS / 1e3 * 1.5)  # wake-ups run to the cap


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    ok = rows[rows["status"] == "ok"]
    return pd.DataFrame([{"schedule": row["schedule"], "wait": row["wait"],
                          "wake-up µs": f"{row['median']:.1f}", "CPU busy": f"{row['cpu_fraction']:.0%}"}
                         for _, row in ok.iterrows()])


def answer(rows: pd.DataFrame) -> str | None:
    """How soon waits that spin and waits that sleep wake up after a kernel, and how busy they keep the CPU."""
    table = headline(rows)
    if not len(table):
        return None
    wake, busy = numbers(table["wake-up µs"]), numbers(table["CPU busy"])
    parts = [f"{kind} waits wake up in {span(wake[chosen])} µs, the CPU {span(busy[chosen])}% busy"
             for kind, chosen in (("spinning", busy >= 50), ("sleeping", busy < 50)) if chosen.any()]
    return "; ".join(parts)


def waitmodes_figure(rows: pd.DataFrame, tables: dict) -> list:
    from bench.plots import gpu_label, pyplot

    ok = rows[(rows["experiment"] == "waitmodes") & (rows["status"] == "ok")]
    if not len(ok):
        return []
    plt = pyplot()
    figure, (wake_ax, cpu_ax) = plt.subplots(1, 2, figsize=(12, 4.5), constrained_layout=True, sharey=True)
    labels = [f"{row['schedule']} / {row['wait']}" for _, row in ok.iterrows()]
    wake_ax.barh(labels, ok["median"], xerr=[ok["median"] - ok["min"], ok["max"] - ok["median"]], capsize=3,
                 color="#1f77b4")
    for y, value in enumerate(ok["median"]):
        wake_ax.text(value, y, f" {value:.1f}", va="bottom", fontsize=8)
    wake_ax.set_title("µs from the kernel's end to the host's return\n(median; whiskers: min–max)", fontsize=9)
    cpu_ax.barh(labels, ok["cpu_fraction"] * 100, color="#d62728")
    cpu_ax.set_title("CPU busy while waiting, % of one core\n(process CPU time / wall time)", fontsize=9)
    wake_ax.invert_yaxis()
    figure.suptitle(f"How the host waits, on {gpu_label(ok)} (a {SPIN_MS:g} ms kernel)")
    return [("waitmodes", figure)]


# --- measuring code --------------------------------------------------------------------------------------------

def _measure(config: Config, watch: SpinWatch, stream, clock: ClockPair, context: Context,
             in_effect: str) -> Row:
    row = {**config, **Samples.missing("us", "host", METRIC), "schedule_in_effect": in_effect,
           "cpu_fraction": float("nan"), "wait_ms": float("nan"), "status": "failed", "error": ""}
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
    return {**row, **samples.columns(), "status": "ok",
            "cpu_fraction": Summary.of([wait.cpu_ms / wait.wall_ms for wait in waits]).median,
            "wait_ms": Summary.of([wait.wall_ms for wait in waits]).median}


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    from bench import driver

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
    quick={"schedule": ("blocking-sync",), "wait": ("stream", "event")},
    columns=COLUMNS,
    measure=measure,
    headline=headline,
    answer=answer,
    seconds=seconds,
    process_axis="schedule",
    before_cuda=before_cuda,
    size_axis="",
    figures=(waitmodes_figure,),
    order=17,
    stop_rules={"default": {"time_cap_s": 0.1}},
    setup_s=0.1,  # pairing the clocks
    share_s=5,
)
