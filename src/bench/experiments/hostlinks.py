"""Host links under load: every GPU copying to (or from) pinned host memory at once, against one GPU at a time.

Each GPU copies between its own pinned host buffer and its own memory with ``cudaMemcpyAsync`` on its own stream.
``alone``: one GPU copies while the others idle (the bandwidth experiment's number). ``together``: all the
sweep's GPUs copy at once; each GPU's stream sits behind a gate of its own, the gates open together, and each GPU's
copies are timed by its own CUDA events, so ``gbps`` is what that GPU got while the others copied too.
``total_gbps`` is every GPU's bytes over the slowest GPU's time (for ``alone``: the GPU's own rate). Host links
that share a PCIe switch, a root port or the host's memory bandwidth show up as ``together`` below ``alone``.

Every copy is verified once per configuration: destination poisoned, one copy, compared byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from bench.platform.cuda import on_device
from bench.experiments import Config, Cost, Experiment, Processes, Row, Sweeps
from bench.measure import columns
from bench.measure.copies import CopyBuffers, mismatch
from bench.results.schema import FLOAT, INT, TEXT, column
from bench.timing import Context, MeasurementFailed, Samples, StopRule
from bench.platform.vocabulary import Clock, Status, Unit

DIRECTIONS = ("H2D", "D2H")
LOADS = ("alone", "together")
METRIC = "GPU time per copy (this GPU's stream)"

COLUMNS = (
    column("direction", TEXT, "H2D or D2H, each GPU with its own pinned host buffer", DIRECTIONS),
    columns.BYTES_PER_COPY,
    column("load", TEXT, "alone: only this GPU copies; together: every GPU of the sweep copies at once", LOADS),
    column("device", INT, "the GPU (CUDA ordinal) this row's bandwidth is of"),
    column("gbps", FLOAT, "this GPU's GB/s at the median"),
    column("total_gbps", FLOAT, "together: all GPUs' bytes over the median of each sample's slowest GPU time; "
                                "alone: gbps"),
    column("gpus_copying", INT, "how many GPUs copied at once"),
    columns.VERIFIED_COPY,
)


def seconds(config: Config, rule: StopRule) -> float:
    copy_s = config["bytes"] / 50e9
    batch_s = max(copy_s, rule.batch_ms / 1e3)
    share = 0.5 if config["load"] == "together" else 1.0  # one measurement serves every GPU's row
    return 0.02 + config["bytes"] / 2e9 + share * (3 + rule.warmup_batches + rule.min_samples) * batch_s


def memory_needed(configs: Sequence[Config]) -> tuple[int, int]:
    largest = max(config["bytes"] for config in configs)
    gpus = len({config["device"] for config in configs})
    return 2 * largest + (256 << 20), 2 * largest * gpus


# --- measuring code --------------------------------------------------------------------------------------------

class _Link:
    """One GPU's side: the bandwidth experiment's pinned buffers of random bytes and their copies, made and used with
    that GPU current."""

    def __init__(self, device: int, nbytes: int) -> None:
        self.device = device
        with on_device(device):
            self.buffers = CopyBuffers("pinned", nbytes, seed=device)
        self.copies = {direction: self.buffers.copies(direction)[0] for direction in DIRECTIONS}

    def enqueue(self, direction: str, nbytes: int) -> None:
        with on_device(self.device):
            self.copies[direction].enqueue(nbytes)

    def mismatch(self, direction: str, nbytes: int) -> str | None:
        with on_device(self.device):
            problem = mismatch([self.copies[direction]], nbytes)
        return f"GPU {self.device}: {problem}" if problem else None

    def close(self) -> None:
        with on_device(self.device):
            self.buffers.close()


def _timed(links: Sequence[_Link], direction: str, nbytes: int, context: Context):
    """Verify every link's copy, then time them all at once: (GpuTiming, None) or (None, why not)."""
    for link in links:
        problem = link.mismatch(direction, nbytes)
        if problem:
            return None, problem

    def enqueue(ops: int) -> None:
        for _ in range(ops):
            for link in links:
                link.enqueue(direction, nbytes)

    try:
        return context.timer().measure(enqueue, [link.copies[direction].stream for link in links], metric=METRIC,
                                       devices=[link.device for link in links]), None
    except MeasurementFailed as error:
        return None, str(error)


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    """Each ``alone`` configuration measured by itself; a ``together`` measurement once per direction and size,
    its rows (one per GPU) taken from it."""
    devices = sorted({config["device"] for config in configs})
    largest = max(config["bytes"] for config in configs)
    links: dict[int, _Link] = {}
    together: dict[tuple[str, int], tuple] = {}
    try:
        for device in devices:
            links[device] = _Link(device, largest)
        for config in configs:
            direction, nbytes, device = config["direction"], config["bytes"], config["device"]
            row = {**config, **Samples.missing(Unit.MS, Clock.GPU, METRIC, True), "verified": False, "status": Status.FAILED,
                   "error": "", "gpus_copying": 1 if config["load"] == "alone" else len(devices)}
            if config["load"] == "alone":
                timing, problem = _timed([links[device]], direction, nbytes, context)
                index, copying = 0, [device]
            else:
                key = (direction, nbytes)
                if key not in together:
                    together[key] = _timed([links[d] for d in devices], direction, nbytes, context)
                timing, problem = together[key]
                index, copying = devices.index(device), devices
            if timing is None:
                yield {**row, "error": problem}
                continue
            samples = Samples(timing.stream_ms[index], Unit.MS, Clock.GPU, METRIC, timing.samples.stop_reason,
                              timing.samples.ops_per_sample, True)
            yield {**row, **samples.columns(), "verified": True, "status": Status.OK,
                   "gbps": nbytes / (timing.stream_median_ms(index) * 1e6),
                   "total_gbps": len(copying) * nbytes / (timing.median_ms * 1e6)}
    finally:
        for link in links.values():
            link.close()


EXPERIMENT = Experiment(
    name="hostlinks",
    description="host links under load: every GPU's pinned H2D/D2H at once against one GPU at a time",
    axes={"direction": DIRECTIONS, "bytes": (256 << 20,), "load": LOADS, "device": (0, 1)},
    columns=COLUMNS,
    measure=measure,
    order=91,
    sweeps=Sweeps(
        quick={"bytes": (64 << 20,)},
        full={"bytes": (16 << 20, 64 << 20, 256 << 20, 1 << 30)},
        device_axes=("device",),
    ),
    cost=Cost(
        seconds,
        memory_needed=memory_needed,
        setup_s=1.0,
        share_s=0,  # multi-GPU: not in a one-GPU sweep's budget
    ),
    processes=Processes(gpus=2),
)
