"""Copy bandwidth with cudaMemcpyAsync: direction × host memory kind × size.

``H2D``, ``D2H`` and ``D2D`` are one copy stream each; ``BIDIR`` runs H2D and D2H at once on two streams and
reports their sum (``gbps``: both directions' bytes over the makespan) and each direction (``h2d_gbps``,
``d2h_gbps``: its bytes over the time from the common start to that stream's end). D2D counts each byte once,
as nvbandwidth does (device memory traffic is twice that). Pinned and registered copies are timed behind the gate;
pageable copies cannot be (see ``bench.timing``), and their time includes the host's staging work, which is the
point: that is what a pageable copy costs.

Every configuration is verified once before it is timed: the destination is poisoned with a byte the random source
never contains, one copy runs, and the destination must equal the source byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from bench.experiments import Accuracy, Config, Cost, Experiment, Row, Sweeps
from bench.measure import columns
from bench.measure.copies import FILL_CHUNK, CopyBuffers, by_host_memory, verified_and_timed
from bench.measure.memory import HOST_MEMORY
from bench.results.schema import FLOAT, TEXT, column
from bench.timing import Context, Samples, StopRule
from bench.platform.vocabulary import Clock, Direction, Status, Unit, values

DIRECTIONS = values(Direction)
HOST_KINDS = (*HOST_MEMORY, "device")  # a D2D copy touches no host memory: its host_memory is "device"
PAGEABLE_TIME_CAP_S = 0.12  # pageable copies vary run to run by far more than longer sampling would pin down
_TYPICAL_GBPS = {"pinned": 50.0, "registered": 50.0, "pageable": 10.0, "device": 1500.0}  # for the time estimate

COLUMNS = (
    column("host_memory", TEXT, "pinned (cudaHostAlloc), pageable, registered (cudaHostRegister), or device for "
                                "D2D", HOST_KINDS),
    column("direction", TEXT, "H2D, D2H, D2D, or BIDIR (H2D and D2H at once on two streams)", DIRECTIONS),
    columns.BYTES_PER_COPY,
    column("gbps", FLOAT, "GB/s (1e9 bytes/s) at the median; BIDIR: both directions' bytes over the makespan"),
    column("h2d_gbps", FLOAT, "BIDIR: the H2D stream's bytes over its own time"),
    column("d2h_gbps", FLOAT, "BIDIR: the D2H stream's bytes over its own time"),
    columns.VERIFIED_COPY,
)


# --- description ---------------------------------------------------------------------------------------------

def valid(config: Config) -> bool:
    return (config["direction"] == "D2D") == (config["host_memory"] == "device")


def lean(config: Config) -> bool:
    """The default sweep leaves 1 GiB pageable copies (a second or two each, no new answer) to --full."""
    return not (config["host_memory"] == "pageable" and config["bytes"] >= 1 << 30)


def seconds(config: Config, rule: StopRule) -> float:
    """Expected wall time: verification and two sizing copies, a warm-up batch, then ``min_samples`` batches of
    about ``batch_ms`` (or of one copy, for longer copies); pageable copies are noisy and sample longer."""
    copies = 2 if config["direction"] == "BIDIR" else 1
    copy_s = copies * config["bytes"] / (_TYPICAL_GBPS[config["host_memory"]] * 1e9)
    batch_s = max(copy_s, rule.batch_ms / 1e3)
    sampling_s = rule.min_samples * batch_s
    if config["host_memory"] == "pageable":  # noisy: several times the minimum, up to the time cap
        sampling_s = max(sampling_s, min(rule.time_cap_s, PAGEABLE_TIME_CAP_S, 8 * sampling_s))
    # poisoning and comparing a host destination runs at a few GB/s
    checking_s = config["bytes"] / 1.5e9 if config["direction"] in ("D2H", "BIDIR") else 0.0
    return 0.01 + 3 * copy_s + checking_s + (1 + rule.warmup_batches) * batch_s + sampling_s


def memory_needed(configs: Sequence[Config]) -> tuple[int, int]:
    largest = max(config["bytes"] for config in configs)
    on_host = any(config["host_memory"] != "device" for config in configs)
    return 2 * largest + 4 * FILL_CHUNK, 2 * largest if on_host else 0


# --- measuring code --------------------------------------------------------------------------------------------

def _metric(direction: str) -> str:
    return "GPU time per pair of copies (H2D and D2H at once)" if direction == "BIDIR" else "GPU time per copy"


def _measure(config: Config, buffers: CopyBuffers, context: Context) -> Row:
    nbytes, direction = config["bytes"], config["direction"]
    gated = config["host_memory"] != "pageable"
    row = {**config, **Samples.missing(Unit.MS, Clock.GPU, _metric(direction), gated), "gbps": np.nan, "h2d_gbps": np.nan,
           "d2h_gbps": np.nan, "verified": False, "status": Status.FAILED, "error": ""}
    timing = verified_and_timed(row, buffers.copies(direction), nbytes, context.timer("default" if gated else "pageable"),
                                _metric(direction), gated)
    if timing is not None and direction == "BIDIR":
        row["h2d_gbps"] = nbytes / (timing.stream_median_ms(0) * 1e6)
        row["d2h_gbps"] = nbytes / (timing.stream_median_ms(1) * 1e6)
    return row


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    """One row per configuration, one host memory kind at a time so its buffers are allocated once."""
    return by_host_memory(configs, CopyBuffers, lambda config, buffers: _measure(config, buffers, context))


EXPERIMENT = Experiment(
    name="bandwidth",
    description="cudaMemcpyAsync bandwidth: H2D, D2H, D2D, BIDIR × pinned/pageable/registered × size",
    axes={"host_memory": HOST_KINDS, "direction": DIRECTIONS, "bytes": tuple(1 << p for p in range(12, 31, 2))},
    columns=COLUMNS,
    measure=measure,
    order=10,
    sweeps=Sweeps(
        quick={"bytes": (64 << 10, 16 << 20)},
        full={"bytes": tuple(1 << p for p in range(12, 31))},
        valid=valid,
        lean=lean,
    ),
    cost=Cost(seconds, memory_needed=memory_needed, share_s=15),
    accuracy=Accuracy(stop_rules={"pageable": {"time_cap_s": PAGEABLE_TIME_CAP_S}}),
)
