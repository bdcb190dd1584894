"""Which CUDA calls keep kernels on different streams from overlapping (implicit synchronization on the device).

Each call of :mod:`bench.catalogs.runtime` is made between two spin kernels of ``spin_ms`` on two streams (both
``blocking`` or both ``non-blocking``: :meth:`bench.timing.SpinWatch.call_between_spins`). The kernels' global-timer
stamps give ``overlap_ms``, the samples (the makespan) and the verdict: ``overlaps``, ``partial`` or ``serializes``;
``host_waited`` says the call itself held the host, and ``docs_serializes`` is the Programming Guide's list. The
method in full: docs/methodology.md.
"""

from __future__ import annotations

from functools import partial

from bench.catalogs.measured import (QUICK_CALLS, catalog_axes, catalog_row, idle_ms, kit_memory, on_fresh_streams,
                                     run_each, takes_placement)
from bench.catalogs.runtime import GUIDE_IMPLICIT, Kit, catalog, documented_serializes
from bench.experiments import Accuracy, Config, Cost, Experiment, Processes, Row, Sweeps
from bench.measure import columns
from bench.measure.verdicts import (DEVICE_MIN_REPEATS, DEVICE_VERDICTS, SPIN_MS, pair_columns, repeat_between_spins,
                                    spin_for)
from bench.results.schema import FLAG, FLOAT, FLOATS, column
from bench.timing import Floor, SpinWatch, StopRule
from bench.platform.vocabulary import Clock, DeviceVerdict, Unit

VERDICTS = DEVICE_VERDICTS
MIN_REPEATS = DEVICE_MIN_REPEATS
METRIC = "makespan of the two kernels (GPU clock)"

COLUMNS = (
    *columns.CATALOG_COLUMNS,
    column("idle_host_ms", FLOAT, "the call's host time with nothing running"),
    column("overlap_ms", FLOAT, "median time both kernels ran at once"),
    column("overlap_ms_samples", FLOATS, "each repeat's overlap"),
    column("makespan_ms", FLOAT, "median time from the first kernel's start to the last one's end"),
    column("host_waited", FLAG, "the call held the host until the first kernel ended (in most repeats)"),
    *columns.verdict_columns(VERDICTS),
    column("docs_serializes", FLAG, "the Programming Guide says the call keeps the kernels apart (empty: silent)"),
)


def seconds(config: Config, rule: StopRule) -> float:
    return 0.013 + MIN_REPEATS * 1.25 * SPIN_MS / 1e3  # two spins: 1× when they overlap, 2× when serialized


# --- measuring code --------------------------------------------------------------------------------------------

def _measure(config: Config, kit: Kit, watch: SpinWatch) -> Row:
    call = catalog()[config["call"]]
    spin_blocking = config["spin_stream"] == "blocking"
    idle = on_fresh_streams(config, kit, idle_ms)
    spin_ms = spin_for(idle)  # a slow call (a pageable upload) must not eat the spin it is judged against
    repeats = repeat_between_spins(lambda: on_fresh_streams(config, kit, lambda streams, prepared: (
        watch.call_between_spins(streams.spinning, streams.second, spin_ms, prepared.call, prepared.arm))), spin_ms)
    documented = documented_serializes(call, config["placement"], spin_blocking)
    samples = repeats.samples([pair.makespan_ms for pair in repeats.seen], Unit.MS, Clock.GPU, METRIC)
    return {**catalog_row(config, call, samples), **pair_columns(repeats), "spin_ms": spin_ms,
            "docs": call.docs if call.guide_serializes else "", "source": GUIDE_IMPLICIT if documented else "",
            "overlap_ms_samples": [pair.overlap_ms for pair in repeats.seen], "makespan_ms": samples.median,
            "idle_host_ms": idle,
            "docs_serializes": documented,
            "matches_docs": None if documented is None else repeats.verdict == DeviceVerdict.SERIALIZES}


EXPERIMENT = Experiment(
    name="serialization",
    description="which CUDA calls, issued between two kernels on two streams, keep them from overlapping",
    axes=catalog_axes(),
    columns=COLUMNS,
    measure=partial(run_each, measure_one=_measure),
    outcome=("verdict",),
    order=50,
    sweeps=Sweeps(quick=QUICK_CALLS, valid=takes_placement, size_axis=""),
    cost=Cost(seconds, memory_needed=kit_memory, share_s=6),
    accuracy=Accuracy(floor=Floor(min_samples=MIN_REPEATS)),  # its verdict's repeats
    processes=Processes(own_gpu=True),
)
