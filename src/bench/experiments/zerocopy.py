"""Copies done by the SMs instead of the copy engines: a kernel reading or writing mapped pinned host memory.

``H2D``: a numba-cuda kernel reads pinned host memory (``cudaHostAlloc``, mapped into the GPU's address space) and
writes device memory; ``D2H`` reads device memory and writes the host. The kernel moves 8-byte words, a full wave of
resident blocks (``SmCopy`` in :mod:`bench.measure.kernels`) striding over them with four loads in flight per
thread, the shape of nvbandwidth's ``host_to_device_memcpy_sm`` / ``device_to_host_memcpy_sm`` tests. Timed with
CUDA events behind the gate like the copy-engine copies of the ``bandwidth`` experiment, which its figure shows
beside them; the data is verified once per configuration (random source, poisoned destination, byte for byte).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from bench.measure import kernels
from bench.experiments import Config, Cost, Experiment, Row, Sweeps
from bench.measure import columns
from bench.measure.copies import CopyBuffers, verified_and_timed
from bench.results.schema import TEXT, column
from bench.timing import Context, Samples, StopRule
from bench.platform.vocabulary import Clock, Status, Unit

DIRECTIONS = ("H2D", "D2H")
_TYPICAL_GBPS = 50.0
METRIC = "GPU time per SM copy"

COLUMNS = (
    column("direction", TEXT, "H2D (the kernel reads mapped host memory) or D2H (it writes it)", DIRECTIONS),
    columns.BYTES_PER_COPY,
    columns.GBPS,
    columns.VERIFIED_COPY,
)


def seconds(config: Config, rule: StopRule) -> float:
    copy_s = config["bytes"] / (_TYPICAL_GBPS * 1e9)
    batch_s = max(copy_s, rule.batch_ms / 1e3)
    checking_s = config["bytes"] / 1.5e9 if config["direction"] == "D2H" else 0.0
    return 0.01 + 3 * copy_s + checking_s + (1 + rule.warmup_batches + rule.min_samples) * batch_s


def memory_needed(configs: Sequence[Config]) -> tuple[int, int]:
    largest = max(config["bytes"] for config in configs)
    return 2 * largest + (256 << 20), 2 * largest


# --- measuring code --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _SmCopy:
    """A copy the kernel does, with what :func:`bench.measure.copies.mismatch` needs to check it."""

    stream: object
    dst_ptr: int
    src_ptr: int
    dst: object
    expected: object
    kernel: object

    def enqueue(self, nbytes: int) -> None:
        self.kernel.launch(self.stream, self.dst_ptr, self.src_ptr, nbytes)


def _copy(buffers: CopyBuffers, direction: str, kernel) -> _SmCopy:
    stream = buffers.streams[0]
    if direction == "H2D":
        return _SmCopy(stream, buffers.device_dst.ptr, buffers.host_src.ptr, buffers.device_dst.array,
                       buffers.device_src.array, kernel)
    return _SmCopy(stream, buffers.host_dst.ptr, buffers.device_src.ptr, buffers.host_dst.array,
                   buffers.host_src.array, kernel)


def _measure(config: Config, copy: _SmCopy, context: Context) -> Row:
    row = {**config, **Samples.missing(Unit.MS, Clock.GPU, METRIC, True), "gbps": np.nan, "verified": False,
           "status": Status.FAILED, "error": ""}
    verified_and_timed(row, [copy], config["bytes"], context.timer(), METRIC)
    return row


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    kernel = kernels.SmCopy()
    with CopyBuffers("pinned", max(config["bytes"] for config in configs)) as buffers:
        for config in configs:
            yield _measure(config, _copy(buffers, config["direction"], kernel), context)


EXPERIMENT = Experiment(
    name="zerocopy",
    description="SM copies: a kernel reading (H2D) or writing (D2H) mapped pinned host memory, × size",
    axes={"direction": DIRECTIONS, "bytes": tuple(1 << p for p in range(12, 31, 2))},
    columns=COLUMNS,
    measure=measure,
    order=11,
    sweeps=Sweeps(quick={"bytes": (64 << 10, 16 << 20)}, full={"bytes": tuple(1 << p for p in range(12, 31))}),
    cost=Cost(
        seconds,
        memory_needed=memory_needed,
        setup_s=1.2,  # compiling the copy kernel (a fresh machine has no cache), 1 GiB buffers filled
        share_s=4,
    ),
)
