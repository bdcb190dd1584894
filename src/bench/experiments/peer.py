"""Copies between two GPUs: copy engines (``cudaMemcpyPeerAsync``) with peer access enabled or disabled, SM copies
(a kernel reading or writing the other GPU's memory), and peer access latency (a pointer chase).

For every ordered pair of the sweep's GPUs (``src`` → ``dst``), by ``method`` (``ce``, ``sm``, ``chase``), ``side``
(``read``: issued by the destination GPU; ``write``: by the source), ``peer_access`` (``enabled``, ``disabled``) and
``direction`` (``uni``, ``bidir``). Every copy is verified once per configuration; times are CUDA events behind a gate
on each GPU (the gates open together), but for copies staged through the host. The method in full, and what
``gbps``, ``forward_gbps`` and ``backward_gbps`` are: docs/methodology.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from bench.platform.cuda import cupy, on_device, runtime
from bench.measure import kernels
from bench.platform.env import gpu_uuid
from bench.experiments import Config, Cost, Experiment, Processes, Row, Sweeps
from bench.measure.chase import CHASE_METRIC, STEPS, chain_end, pointer_chain, timed_chase
from bench.measure.copies import POISON, fill_random, timed
from bench.measure.memory import DeviceBuffer
from bench.results.schema import FLAG, FLOAT, INT, TEXT, column
from bench.timing import Context, Samples, StopRule
from bench.platform.vocabulary import Clock, Status, Unit

METHODS = ("ce", "sm", "chase")
SIDES = ("read", "write")
ACCESS = ("enabled", "disabled")
DIRECTIONS = ("uni", "bidir")
_ALREADY_ENABLED, _NOT_ENABLED = 704, 705  # cudaErrorPeerAccessAlreadyEnabled, cudaErrorPeerAccessNotEnabled
_TYPICAL_GBPS = {("ce", "enabled"): 350.0, ("sm", "enabled"): 350.0, ("ce", "disabled"): 20.0}

COLUMNS = (
    column("src", INT, "the GPU (CUDA ordinal) the data comes from"),
    column("dst", INT, "the GPU the data goes to (chase: the GPU whose kernel reads src's memory)"),
    column("method", TEXT, "ce (cudaMemcpyPeerAsync), sm (a kernel moves the data), chase (pointer-chase latency)",
           METHODS),
    column("side", TEXT, "read: the destination GPU issues the copy; write: the source GPU does", SIDES),
    column("peer_access", TEXT, "enabled: cudaDeviceEnablePeerAccess both ways; disabled: staged through the host",
           ACCESS),
    column("direction", TEXT, "uni: src → dst; bidir: src → dst and dst → src at once", DIRECTIONS),
    column("bytes", INT, "bytes per copy, each way (chase: the working set)"),
    column("gbps", FLOAT, "GB/s at the median: bidir, both directions' bytes over the slower direction's time"),
    column("forward_gbps", FLOAT, "bidir: src → dst bytes over that copy's own time"),
    column("backward_gbps", FLOAT, "bidir: dst → src bytes over that copy's own time"),
    column("ns_per_access", FLOAT, "chase: median GPU time per dependent load of src's memory, ns"),
    column("src_uuid", TEXT, "the source GPU's UUID"),
    column("dst_uuid", TEXT, "the destination GPU's UUID"),
    column("verified", FLAG, "every copy's destination equalled its source byte for byte (chase: the kernel ended "
                             "where the host said) before timing"),
)


# --- description ---------------------------------------------------------------------------------------------

def valid(config: Config) -> bool:
    if config["src"] == config["dst"]:
        return False
    if config["method"] == "chase":
        return (config["side"], config["peer_access"], config["direction"]) == ("read", "enabled", "uni")
    return config["method"] == "ce" or config["peer_access"] == "enabled"


def seconds(config: Config, rule: StopRule) -> float:
    if config["method"] == "chase":
        kernel_s = STEPS * 1.5e-6
        return 0.02 + config["bytes"] / 1e9 + (3 + rule.warmup_batches + rule.min_samples) * max(
            kernel_s, rule.batch_ms / 1e3)
    copies = 2 if config["direction"] == "bidir" else 1
    copy_s = config["bytes"] / (_TYPICAL_GBPS[(config["method"], config["peer_access"])] * 1e9)
    batch_s = max(copy_s, rule.batch_ms / 1e3)
    return 0.01 + copies * config["bytes"] / 20e9 + (3 + rule.warmup_batches + rule.min_samples) * batch_s


def memory_needed(configs: Sequence[Config]) -> tuple[int, int]:
    """Per GPU: a source, a destination and a reference copy of the other GPU's source."""
    largest = max(config["bytes"] for config in configs)
    return 3 * largest + (256 << 20), 2 * largest


# --- measuring code --------------------------------------------------------------------------------------------

class _Gpu:
    """One GPU's side of the pairs: a random source, a destination, a reference of each other GPU's source (to
    check what arrives without reading across GPUs), streams, and the copy and chase kernels."""

    def __init__(self, device: int, nbytes: int, seed: int) -> None:
        self.device, self.nbytes = device, nbytes
        with on_device(device):
            self.src = DeviceBuffer("malloc", nbytes)
            self.dst = DeviceBuffer("malloc", nbytes)
            fill_random(self.src.array, seed)
            self.streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(2)]
            self.copier = kernels.SmCopy()
            self.chase = kernels.Chase()
            self.out = cupy.zeros(1, dtype=cupy.uint64)  # where the chase's walk ended
            self.uuid = gpu_uuid(runtime.deviceGetPCIBusId(device))
        self.references: dict[int, DeviceBuffer] = {}

    def reference_of(self, other: _Gpu) -> DeviceBuffer:
        """``other``'s source bytes in this GPU's memory, copied through the host."""
        if other.device not in self.references:
            with on_device(other.device):
                host = cupy.asnumpy(other.src.array)
            with on_device(self.device):
                reference = DeviceBuffer("malloc", self.nbytes)
                reference.array.set(host)
                runtime.deviceSynchronize()
            self.references[other.device] = reference
        return self.references[other.device]

    def close(self) -> None:
        with on_device(self.device):
            runtime.deviceSynchronize()
            for buffer in (self.src, self.dst, *self.references.values()):
                buffer.close()


@dataclass(frozen=True)
class _PeerCopy:
    """One copy from ``source`` to ``target``, issued on ``device`` (the side's GPU) by a copy engine or a kernel."""

    source: _Gpu
    target: _Gpu
    device: int
    stream: object
    method: str

    def enqueue(self, nbytes: int) -> None:
        with on_device(self.device):
            if self.method == "ce":
                runtime.memcpyPeerAsync(self.target.dst.ptr, self.target.device, self.source.src.ptr,
                                        self.source.device, nbytes, self.stream.ptr)
            else:
                issuer = self.target if self.device == self.target.device else self.source
                issuer.copier.launch(self.stream, self.target.dst.ptr, self.source.src.ptr, nbytes)

    def mismatch(self, nbytes: int) -> str | None:
        """Poison the destination, copy once, compare with the source's bytes (None: they are equal)."""
        with on_device(self.target.device):
            self.target.dst.array[:nbytes].fill(POISON)
            runtime.deviceSynchronize()
        self.enqueue(nbytes)
        with on_device(self.device):
            self.stream.synchronize()
        with on_device(self.target.device):
            expected = self.target.reference_of(self.source).array[:nbytes]
            differ = int(cupy.count_nonzero(self.target.dst.array[:nbytes] != expected))
        if differ:
            return (f"data mismatch after the GPU {self.source.device} → GPU {self.target.device} copy: {differ} of "
                    f"{nbytes} bytes differ")
        return None


def _copy(source: _Gpu, target: _Gpu, side: str, method: str, slot: int) -> _PeerCopy:
    issuer = target if side == "read" else source
    return _PeerCopy(source, target, issuer.device, issuer.streams[slot], method)


class _PeerAccess:
    """Peer access between the GPUs as a configuration wants it, changed only when it must."""

    def __init__(self) -> None:
        self.enabled: set[tuple[int, int]] = set()

    def set(self, a: int, b: int, enabled: bool) -> None:
        for device, peer in ((a, b), (b, a)):
            if ((device, peer) in self.enabled) == enabled:
                continue
            with on_device(device):
                try:
                    (runtime.deviceEnablePeerAccess if enabled else runtime.deviceDisablePeerAccess)(peer)
                except runtime.CUDARuntimeError as error:  # already so (CuPy may have enabled it): fine
                    if error.status not in (_ALREADY_ENABLED, _NOT_ENABLED):
                        raise
            if enabled:
                self.enabled.add((device, peer))
            else:
                self.enabled.discard((device, peer))

    def close(self) -> None:
        for device, peer in list(self.enabled):
            self.set(device, peer, False)


def _metric(direction: str) -> str:
    return "GPU time per pair of copies (both ways at once)" if direction == "bidir" else "GPU time per copy"


def _measure_copy(config: Config, gpus: dict[int, _Gpu], context: Context) -> Row:
    source, target, nbytes = gpus[config["src"]], gpus[config["dst"]], config["bytes"]
    gated = config["peer_access"] == "enabled"
    metric = _metric(config["direction"])
    row = {**config, **Samples.missing(Unit.MS, Clock.GPU, metric, gated), "verified": False, "status": Status.FAILED,
           "error": ""}
    copies = [_copy(source, target, config["side"], config["method"], 0)]
    if config["direction"] == "bidir":
        copies.append(_copy(target, source, config["side"], config["method"], 1))
    for copy in copies:
        problem = copy.mismatch(nbytes)
        if problem:
            return {**row, "error": problem}
    timing = timed(row, copies, nbytes, context.timer(), metric, gated, [copy.device for copy in copies])
    if timing is not None and config["direction"] == "bidir":
        row["forward_gbps"] = nbytes / (timing.stream_median_ms(0) * 1e6)
        row["backward_gbps"] = nbytes / (timing.stream_median_ms(1) * 1e6)
    return row


def _measure_chase(config: Config, gpus: dict[int, _Gpu], context: Context) -> Row:
    """One thread on ``dst`` chasing a chain laid out in ``src``'s memory."""
    owner, reader, nbytes = gpus[config["src"]], gpus[config["dst"]], config["bytes"]
    row = {**config, **Samples.missing(Unit.MS, Clock.GPU, CHASE_METRIC, True), "verified": False, "status": Status.FAILED,
           "error": ""}
    words = pointer_chain(nbytes)
    with on_device(owner.device):
        runtime.memcpy(owner.dst.ptr, words.ctypes.data, nbytes, runtime.memcpyHostToDevice)
    return timed_chase(row, reader.chase, reader.streams[0], owner.dst.ptr, reader.out, chain_end(words, STEPS),
                       context.timer(), reader.device)


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    """Buffers of the largest size on every GPU of the configurations, then each configuration with peer access set
    as it asks; a pair that cannot have peer access gets unsupported rows for what needs it."""
    devices = sorted({config["src"] for config in configs} | {config["dst"] for config in configs})
    largest = max(config["bytes"] for config in configs)
    gpus: dict[int, _Gpu] = {}
    access = _PeerAccess()
    try:
        for seed, device in enumerate(devices):
            gpus[device] = _Gpu(device, largest, seed)
        for config in configs:
            source, target = gpus[config["src"]], gpus[config["dst"]]
            uuids = {"src_uuid": source.uuid, "dst_uuid": target.uuid}
            wanted = config["peer_access"] == "enabled"
            possible = all(runtime.deviceCanAccessPeer(a, b) for a, b in ((source.device, target.device),
                                                                           (target.device, source.device)))
            if wanted and not possible:
                yield {**config, **uuids, "status": Status.UNSUPPORTED,
                       "error": f"GPU {source.device} and GPU {target.device} cannot access each other's memory "
                                "(cudaDeviceCanAccessPeer)"}
                continue
            if possible:
                access.set(source.device, target.device, wanted)
            measured = (_measure_chase if config["method"] == "chase" else _measure_copy)(config, gpus, context)
            yield {**measured, **uuids}
    finally:
        access.close()
        for gpu in gpus.values():
            gpu.close()


EXPERIMENT = Experiment(
    name="peer",
    description="GPU ↔ GPU: cudaMemcpyPeerAsync with and without peer access, SM copies, peer latency, every pair",
    axes={"src": (0, 1), "dst": (0, 1), "method": METHODS, "side": SIDES, "peer_access": ACCESS,
          "direction": DIRECTIONS, "bytes": (1 << 20, 16 << 20, 256 << 20)},
    columns=COLUMNS,
    measure=measure,
    order=90,
    sweeps=Sweeps(
        quick={"bytes": (16 << 20,)},
        full={"bytes": tuple(1 << p for p in range(12, 31, 2))},
        valid=valid,
        device_axes=("src", "dst"),
    ),
    cost=Cost(
        seconds,
        memory_needed=memory_needed,
        setup_s=1.5,
        share_s=0,  # multi-GPU: not in a one-GPU sweep's budget
    ),
    processes=Processes(gpus=2),
)
