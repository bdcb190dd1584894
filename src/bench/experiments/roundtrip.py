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
import pandas as pd

from bench.cuda import cupy
from bench.experiments import Config, Experiment, Row, numbers, span
from bench.measure import columns
from bench.measure.copies import verified_copy
from bench.schema import FLOAT, TEXT, column
from bench.timing import Context, Event, MeasurementFailed, Samples, StopRule
from bench.units import format_size

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


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    ok = rows[rows["status"] == "ok"]
    return pd.DataFrame([{"direction": row["direction"], "size": format_size(int(row["bytes"])),
                          "round trip µs (host)": f"{row['median']:.1f}", "copy µs (GPU)": f"{row['gpu_us']:.2f}"}
                         for _, row in ok.iterrows()])


def answer(rows: pd.DataFrame) -> str | None:
    """The host's round trip of a small copy, per direction, over the sizes measured."""
    table = headline(rows)
    if not len(table):
        return None
    parts = []
    for direction, group in table.groupby("direction", sort=False):
        host_us = numbers(group["round trip µs (host)"])
        parts.append(f"{direction} {span(host_us)}")
    return (f"host µs per round trip of a small copy ({table['size'].iloc[0]} – {table['size'].iloc[-1]}): "
            + ", ".join(parts))


def roundtrip_figure(rows: pd.DataFrame, tables: dict) -> list:
    from bench.plots import DIRECTION_COLORS, gpu_label, pyplot, size_axis

    ok = rows[(rows["experiment"] == "roundtrip") & (rows["status"] == "ok")]
    if not len(ok):
        return []
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(8, 4.5), constrained_layout=True)
    for direction, group in ok.groupby("direction", sort=False):
        group = group.sort_values("bytes")
        sizes = group["bytes"].astype(float)
        color = DIRECTION_COLORS.get(direction, "k")
        ax.plot(sizes, group["median"], "-o", color=color, label=f"{direction} round trip (host, from Python)")
        ax.fill_between(sizes, group["min"], group["max"], color=color, alpha=0.12, linewidth=0)
        ax.plot(sizes, group["gpu_us"], ":s", color=color, label=f"{direction} the copy alone (GPU)")
    size_axis(ax, ok["bytes"].to_numpy(dtype=float))
    ax.set_ylim(bottom=0)
    ax.set_ylabel("µs (median; band: min–max of samples)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"Small-copy round trip on {gpu_label(ok)}")
    return [("roundtrip", figure)]


# --- measuring code --------------------------------------------------------------------------------------------

def _measure(config: Config, stream, event: Event, context: Context) -> Row:
    row = {**config, **Samples.missing("us", "host", METRIC), "gpu_us": np.nan, "verified": False,
           "status": "failed", "error": ""}
    try:
        with verified_copy(config["direction"], "pinned", config["bytes"], stream) as enqueue:
            row["verified"] = True

            def round_trip() -> None:
                enqueue()
                event.record(stream)
                event.synchronize()

            host = context.host(round_trip, metric=METRIC, unit="us", warmup=20)

            def copies(ops: int) -> None:
                for _ in range(ops):
                    enqueue()

            gpu = context.timer().measure(copies, [stream], metric="GPU time per copy", ops_per_batch=1)
    except MeasurementFailed as error:
        row["error"] = str(error)
        return row
    return {**row, **host.columns(), "gpu_us": gpu.median_ms * 1e3, "status": "ok"}


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    stream = cupy.cuda.Stream(non_blocking=True)
    with Event() as event:
        for config in configs:
            yield _measure(config, stream, event, context)


EXPERIMENT = Experiment(
    name="roundtrip",
    description="small-copy round trip: cudaMemcpyAsync + event record + event synchronize, host µs, 4 B – 64 KiB",
    axes={"direction": DIRECTIONS, "bytes": (4, 256, 4096, 65536)},
    quick={"bytes": (4,)},
    full={"bytes": (4, 64, 256, 1024, 4096, 16384, 65536)},
    columns=COLUMNS,
    measure=measure,
    headline=headline,
    answer=answer,
    seconds=seconds,
    figures=(roundtrip_figure,),
    stop_rules={"default": {"time_cap_s": 0.1, "min_samples": 20}},
    order=16,
    share_s=2,
)
