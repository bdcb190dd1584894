"""Round-trip latency of a small copy: ``cudaMemcpyAsync`` + ``cudaEventRecord`` + ``cudaEventSynchronize``.

What a program pays to move a few bytes and know they arrived: the host time (``samples``, µs) from issuing a
pinned copy of ``bytes`` on a non-blocking stream until ``cudaEventSynchronize`` on an event recorded after it
returns, three CuPy runtime calls from Python included (the C++ reference in ``scripts/reference_paths.cu`` gives
the same loop without Python). ``gpu_us`` is the copy's own time on the GPU (CUDA events around it, behind the
gate): the part of the round trip the copy engine and the link take. The copy is verified once per configuration.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from bench.platform.cuda import cupy
from bench.experiments import Accuracy, Config, Cost, Experiment, Row, Sweeps
from bench.measure import columns
from bench.measure.copies import verified_copy
from bench.results.schema import FLOAT, TEXT, column
from bench.timing import Context, Event, MeasurementFailed, Samples, StopRule
from bench.platform.vocabulary import Clock, Status, Unit

DIRECTIONS = ("H2D", "D2H")
METRIC = "host time of copy + event record + event synchronize"

COLUMNS = (
    column("direction", TEXT, "H2D or D2H, pinned host memory", DIRECTIONS),
    columns.BYTES_PER_COPY,
    column("gpu_us", FLOAT, "median GPU time of the copy alone (events, behind the gate), µs"),
    columns.VERIFIED_COPY,
)


def seconds(config: Config, rule: StopRule) -> float:
    return 0.02 + 1.3 * rule.time_cap_s  # the host samples run to the cap, the GPU ones converge sooner


# --- measuring code --------------------------------------------------------------------------------------------

def _measure(config: Config, stream, event: Event, context: Context) -> Row:
    row = {**config, **Samples.missing(Unit.US, Clock.HOST, METRIC), "gpu_us": np.nan, "verified": False,
           "status": Status.FAILED, "error": ""}
    try:
        with verified_copy(config["direction"], "pinned", config["bytes"], stream) as enqueue:
            row["verified"] = True

            def round_trip() -> None:
                enqueue()
                event.record(stream)
                event.synchronize()

            host = context.host(round_trip, metric=METRIC, unit=Unit.US, warmup=20)

            def copies(ops: int) -> None:
                for _ in range(ops):
                    enqueue()

            gpu = context.timer().measure(copies, [stream], metric="GPU time per copy", ops_per_batch=1)
    except MeasurementFailed as error:
        row["error"] = str(error)
        return row
    return {**row, **host.columns(), "gpu_us": gpu.median_ms * 1e3, "status": Status.OK}


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    stream = cupy.cuda.Stream(non_blocking=True)
    with Event() as event:
        for config in configs:
            yield _measure(config, stream, event, context)


EXPERIMENT = Experiment(
    name="roundtrip",
    description="small-copy round trip: cudaMemcpyAsync + event record + event synchronize, host µs, 4 B – 64 KiB",
    axes={"direction": DIRECTIONS, "bytes": (4, 256, 4096, 65536)},
    columns=COLUMNS,
    measure=measure,
    order=16,
    sweeps=Sweeps(quick={"bytes": (4,)}, full={"bytes": (4, 64, 256, 1024, 4096, 16384, 65536)}),
    cost=Cost(seconds, share_s=2),
    accuracy=Accuracy(stop_rules={"default": {"time_cap_s": 0.1, "min_samples": 20}}),
)
