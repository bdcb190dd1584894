"""GPU access latency: one thread chasing pointers through mapped pinned host memory or device memory.

The working set (``bytes``) is cut into 256-byte slots; each slot's first 8 bytes hold the byte offset of the next
slot, in one random cyclic order, so every load depends on the one before and no prefetcher can guess the next
address. A one-thread kernel follows ``STEPS`` links with volatile loads (``ld.volatile.global``: from memory, never
from a register or L1), starting where the previous launch ended, so successive launches walk on through the chain
and a working set larger than the L2 cache is read from DRAM, not from slots the last launch left in L2. The sample is
the kernel's GPU time (CUDA events, behind the gate) divided by ``STEPS``: nanoseconds per dependent access, including
the loop's few instructions. The chain is checked once per configuration: from slot 0, the offset the kernel ends
at must be the one the host computes by following the same chain. ``host-mapped`` is what a kernel pays per access to
zero-copy memory across PCIe (nvbandwidth's ``host_device_latency_sm``); ``device`` is device memory (a working set
beyond the L2 cache: DRAM latency; within it: L2 latency).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from bench.platform.cuda import cupy, runtime
from bench.measure import kernels
from bench.experiments import Config, Cost, Experiment, Row, Sweeps
from bench.measure.chase import CHASE_METRIC, STEPS, chain_end, pointer_chain, timed_chase
from bench.measure.memory import DeviceBuffer, HostBuffer
from bench.results.schema import FLAG, FLOAT, INT, TEXT, column
from bench.timing import Context, Samples, StopRule
from bench.platform.vocabulary import Clock, Status, Unit

MEMORY = ("host-mapped", "device")
METRIC = CHASE_METRIC
_TYPICAL_NS = {"host-mapped": 1250.0, "device": 400.0}

COLUMNS = (
    column("memory", TEXT, "host-mapped (pinned host memory read by the kernel across PCIe) or device", MEMORY),
    column("bytes", INT, "working set: the chain's slots together"),
    column("steps", INT, "dependent loads per kernel"),
    column("ns_per_access", FLOAT, "median GPU time per dependent load, ns"),
    column("verified", FLAG, "the kernel ended at the offset the host computed for the chain"),
)


def seconds(config: Config, rule: StopRule) -> float:
    kernel_s = STEPS * _TYPICAL_NS[config["memory"]] * 1e-9
    building_s = config["bytes"] / 3e9  # numpy's permutation
    return 0.01 + building_s + (3 + rule.warmup_batches + rule.min_samples) * max(kernel_s, rule.batch_ms / 1e3)


def memory_needed(configs: Sequence[Config]) -> tuple[int, int]:
    largest = max(config["bytes"] for config in configs)
    return largest, 2 * largest


# --- measuring code --------------------------------------------------------------------------------------------

def _measure(config: Config, chase, stream, out, context: Context) -> Row:
    nbytes = config["bytes"]
    row = {**config, **Samples.missing(Unit.MS, Clock.GPU, METRIC, True), "steps": STEPS, "ns_per_access": np.nan,
           "verified": False, "status": Status.FAILED, "error": ""}
    words = pointer_chain(nbytes)
    expected = chain_end(words, STEPS)
    holder = HostBuffer("pinned", nbytes) if config["memory"] == "host-mapped" else DeviceBuffer("malloc", nbytes)
    with holder as memory:
        if config["memory"] == "host-mapped":
            memory.array.view(np.uint64)[:] = words
        else:
            runtime.memcpy(memory.ptr, words.ctypes.data, nbytes, runtime.memcpyHostToDevice)
        return timed_chase(row, chase, stream, memory.ptr, out, expected, context.timer())


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    chase = kernels.Chase()
    stream = cupy.cuda.Stream(non_blocking=True)
    out = cupy.zeros(1, dtype=cupy.uint64)
    for config in configs:
        yield _measure(config, chase, stream, out, context)


EXPERIMENT = Experiment(
    name="latency",
    description="GPU access latency: a one-thread pointer chase through mapped host memory or device memory",
    axes={"memory": MEMORY, "bytes": (1 << 20, 256 << 20)},
    columns=COLUMNS,
    measure=measure,
    order=15,
    sweeps=Sweeps(quick={"bytes": (1 << 20,)}, full={"bytes": (1 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30)}),
    cost=Cost(seconds, memory_needed=memory_needed, share_s=2),
)
