"""Which CUDA calls block the host: each call in :mod:`bench.catalogs.runtime`, made while a spin kernel runs.

A one-thread kernel busy-waits ``spin_ms`` on the *spinning* stream (``blocking`` or ``non-blocking``); once the host
sees it running, the call is made on its placement stream and timed on the host, and the host reads whether the spin
still runs (:meth:`bench.timing.SpinWatch.call_during_spin`). Repeated until the verdicts agree
(:mod:`bench.measure.verdicts`), and made once with no spin (``idle_host_ms``); ``docs_waits`` and ``matches_docs``
say what the documentation says and whether the call did. The method in full: docs/methodology.md.
"""

from __future__ import annotations

from functools import partial

from bench.catalogs import DOCS_HOST, documented_waits
from bench.catalogs.measured import (QUICK_CALLS, catalog_axes, catalog_row, idle_ms, kit_memory, on_fresh_streams,
                                     run_each, takes_placement)
from bench.catalogs.runtime import Kit, catalog
from bench.experiments import Accuracy, Config, Cost, Experiment, Processes, Row, Sweeps
from bench.measure import columns
from bench.measure.verdicts import (HOST_VERDICTS, MIN_REPEATS, SPIN_METRIC, SPIN_MS, host_columns, host_verdict,
                                    repeat_until_settled, spin_for)
from bench.results.schema import TEXT, column
from bench.timing import Floor, SpinWatch, StopRule
from bench.platform.vocabulary import Clock, HostVerdict, Unit

VERDICTS = HOST_VERDICTS
METRIC = SPIN_METRIC

COLUMNS = (
    *columns.CATALOG_COLUMNS,
    columns.SPIN_LEFT_MS,
    columns.IDLE_HOST_MS,
    *columns.verdict_columns(VERDICTS),
    column("docs_host", TEXT, "what the docs say the call waits for on the host", DOCS_HOST),
    columns.DOCS_WAITS,
)


def seconds(config: Config, rule: StopRule) -> float:
    return 0.012 + MIN_REPEATS * SPIN_MS / 1e3  # fresh streams, the idle call and the repeats


# --- measuring code --------------------------------------------------------------------------------------------

def _measure(config: Config, kit: Kit, watch: SpinWatch) -> Row:
    call = catalog()[config["call"]]
    spin_blocking = config["spin_stream"] == "blocking"
    idle = on_fresh_streams(config, kit, idle_ms)
    spin_ms = spin_for(idle)
    repeats = repeat_until_settled(lambda: on_fresh_streams(config, kit, lambda streams, prepared: (
        watch.call_during_spin(streams.spinning, spin_ms, prepared.call, prepared.arm))), host_verdict)
    docs_waits = documented_waits(call, config["placement"], spin_blocking)
    samples = repeats.samples([seen.host_ms for seen in repeats.seen], Unit.MS, Clock.HOST, METRIC)
    return {**catalog_row(config, call, samples), **host_columns(repeats), "idle_host_ms": idle, "spin_ms": spin_ms,
            "docs_host": call.docs_host, "docs_waits": docs_waits,
            "matches_docs": None if docs_waits is None
            else docs_waits == (repeats.verdict == HostVerdict.WAITS_FOR_DEVICE)}


EXPERIMENT = Experiment(
    name="blocking",
    description="which CUDA calls block the host while a kernel runs, by placement, against the documentation",
    axes=catalog_axes(),
    columns=COLUMNS,
    measure=partial(run_each, measure_one=_measure),
    outcome=("verdict",),
    order=40,
    sweeps=Sweeps(quick=QUICK_CALLS, valid=takes_placement, size_axis=""),
    cost=Cost(seconds, memory_needed=kit_memory, share_s=7),
    accuracy=Accuracy(
        floor=Floor(min_samples=MIN_REPEATS),  # its verdict's repeats: the host times are what they agreed on
    ),
    processes=Processes(own_gpu=True),
)
