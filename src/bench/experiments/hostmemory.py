"""Write-combined pinned host memory against ordinary pinned memory: what the GPU's copies gain, what the CPU pays.

``host_memory`` is ``pinned`` (``cudaHostAlloc(flags=0)``) or ``write-combined``
(``cudaHostAlloc(flags=cudaHostAllocWriteCombined)``); ``operation`` is a copy (``H2D``, ``D2H``: timed on the GPU
behind the gate, verified on the device) or one CPU thread's pass over the buffer (``cpu-read``: numpy's ``sum``;
``cpu-write``: ``fill``), sampled by :func:`bench.timing.host_samples`. Write-combined memory is read only up to
:data:`WC_READ_LEAN_BYTES` in the default and quick sweeps, and up to :data:`WC_READ_MAX_BYTES` in ``--full``. The
method and its caveats (CPU caches, virtual machines): docs/methodology.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

from bench.platform.cuda import cupy, runtime
from bench.experiments import Accuracy, Config, Cost, Experiment, Row, Sweeps
from bench.measure import columns
from bench.measure.copies import POISON, CopyBuffers, by_host_memory, fill_pattern
from bench.measure.memory import WRITE_COMBINED
from bench.results.schema import FLAG, INT, TEXT, column
from bench.timing import Context, MeasurementFailed, Samples, StopRule
from bench.platform.vocabulary import Clock, HostOperation, Status, Unit, values

HOST_KINDS = ("pinned", WRITE_COMBINED)
OPERATIONS = values(HostOperation)
COPIES = ("H2D", "D2H")
WC_READ_LEAN_BYTES = 1 << 20  # the default and quick sweeps read write-combined memory up to this size...
WC_READ_MAX_BYTES = 64 << 20  # ...and --full up to this one: at ~0.1 GB/s a 64 MiB pass is most of a second
FILL_BYTE = 0x5A  # what cpu-write stores
CPU_PURPOSE = "cpu"  # the stop rule of host passes
CPU_TIME_CAP_S = 0.1
_ROW_S = 0.03  # per row: allocations, the first gated batch's kernel load, the harness's own work, spread over rows
# For the time estimate only (GB/s): a little below what the H200 machine did (copies 48-55; one thread read and
# wrote 27-56), except the write-combined read, a guess on the slow side for hosts where write-combining is real.
_TYPICAL_GBPS = {("pinned", "H2D"): 45.0, ("pinned", "D2H"): 45.0, ("write-combined", "H2D"): 45.0,
                 ("write-combined", "D2H"): 45.0, ("pinned", "cpu-read"): 20.0, ("write-combined", "cpu-read"): 0.2,
                 ("pinned", "cpu-write"): 20.0, ("write-combined", "cpu-write"): 20.0}

COLUMNS = (
    column("host_memory", TEXT, "pinned (cudaHostAlloc), or write-combined (cudaHostAlloc with "
                                "cudaHostAllocWriteCombined)", HOST_KINDS),
    column("operation", TEXT, "H2D or D2H (cudaMemcpyAsync, GPU time), cpu-read (numpy sum over the buffer) or "
                              "cpu-write (numpy fill), host time", OPERATIONS),
    column("bytes", INT, "bytes per copy or per pass over the buffer"),
    columns.GBPS,
    column("verified", FLAG, "the copy's destination equalled its source, or the CPU pass read or wrote the right "
                             "bytes, checked once before timing"),
)


# --- description ---------------------------------------------------------------------------------------------

def valid(config: Config) -> bool:
    """Reading write-combined memory with the CPU stops at WC_READ_MAX_BYTES, even in --full."""
    return not (_slow_read(config) and config["bytes"] > WC_READ_MAX_BYTES)


def lean(config: Config) -> bool:
    """The default and quick sweeps read write-combined memory with the CPU only up to WC_READ_LEAN_BYTES."""
    return not (_slow_read(config) and config["bytes"] > WC_READ_LEAN_BYTES)


def _slow_read(config: Config) -> bool:
    return config["host_memory"] == "write-combined" and config["operation"] == "cpu-read"


def cpu_rule(rule: StopRule) -> StopRule:
    """The stop rule of host passes, given the default one: the time cap of the ``cpu`` purpose (the harness caps
    every purpose alike for --quick and --budget, so this bounds what it will use)."""
    return rule.capped(time_cap_s=CPU_TIME_CAP_S, min_samples=rule.min_samples)


def seconds(config: Config, rule: StopRule) -> float:
    """Expected wall time. Copies: verification (a few copies), two sizing batches, a warm-up batch, then
    ``min_samples`` batches of about ``batch_ms`` (pinned copies converge fast). Host passes: a verification pass,
    two warm-up passes, then passes until the median converges (about twice ``min_samples`` of them, seen on the
    H200 machine) or the ``cpu`` time cap, which one pass may overrun."""
    nbytes, operation = config["bytes"], config["operation"]
    pass_s = nbytes / (_TYPICAL_GBPS[(config["host_memory"], operation)] * 1e9)
    if operation in COPIES:
        batch_s = max(pass_s, rule.batch_ms / 1e3)
        return _ROW_S + 4 * pass_s + nbytes / 5e9 + (1 + rule.warmup_batches) * batch_s + rule.min_samples * batch_s
    cpu = cpu_rule(rule)
    sampling_s = min(2 * cpu.min_samples * pass_s, cpu.time_cap_s + pass_s)
    return _ROW_S + 2 * nbytes / 45e9 + 3 * pass_s + sampling_s


def memory_needed(configs: Sequence[Config]) -> tuple[int, int]:
    """Two device buffers; one host buffer of one kind at a time."""
    largest = max(config["bytes"] for config in configs)
    return 2 * largest, largest


# --- measuring code --------------------------------------------------------------------------------------------

def checksum(xp, data, nbytes: int) -> int:
    """The sum of the first ``nbytes`` as 64-bit words (wrapping), plus the bytes after the last whole word; ``xp``
    is numpy for host memory (one read pass) or cupy for device memory."""
    whole = nbytes // 8 * 8
    total = int(data[:whole].view(xp.uint64).sum()) if whole else 0
    if nbytes > whole:
        total += int(data[whole:nbytes].astype(xp.uint64).sum())
    return total % (1 << 64)


def make_buffers(host_memory: str, nbytes: int, seed: int = 0) -> CopyBuffers:
    """A device source of pseudo-random bytes, a device destination, and one host buffer of ``host_memory``
    (``host_src``, which is also ``host_dst``) holding the source's bytes; one stream."""
    if host_memory not in HOST_KINDS:
        raise ValueError(f"unknown host memory kind {host_memory!r}; choose from {', '.join(HOST_KINDS)}")
    return CopyBuffers(host_memory, nbytes, seed, streams=1, host_buffers=1, fill=fill_pattern)


def copy(buffers: CopyBuffers, operation: str, nbytes: int) -> None:
    """Enqueue one H2D (host → device_dst) or D2H (device_src → host) copy."""
    stream = buffers.streams[0]
    if operation == "H2D":
        runtime.memcpyAsync(buffers.device_dst.ptr, buffers.host_src.ptr, nbytes, runtime.memcpyHostToDevice,
                            stream.ptr)
    else:
        runtime.memcpyAsync(buffers.host_src.ptr, buffers.device_src.ptr, nbytes, runtime.memcpyDeviceToHost,
                            stream.ptr)


def host_to_device_dst(buffers: CopyBuffers, nbytes: int) -> None:
    """Poison device_dst, then copy the host buffer's first ``nbytes`` into it (and wait)."""
    stream = buffers.streams[0]
    with stream:
        buffers.device_dst.array[:nbytes].fill(POISON)
    runtime.memcpyAsync(buffers.device_dst.ptr, buffers.host_src.ptr, nbytes, runtime.memcpyHostToDevice, stream.ptr)
    stream.synchronize()


def differ(buffers: CopyBuffers, expected, nbytes: int, what: str) -> str | None:
    """None if device_dst's first ``nbytes`` equal ``expected`` (a device array or a byte value); else why not."""
    with buffers.streams[0]:
        wrong = cupy.flatnonzero(buffers.device_dst.array[:nbytes] != expected)
        count = int(wrong.size)
        first = int(wrong[0]) if count else -1
    if count:
        return f"data mismatch after {what}: {count} of {nbytes} bytes differ (first at offset {first})"
    return None


def problem(operation: str, buffers: CopyBuffers, nbytes: int) -> str | None:
    """Run ``operation`` once and check what it did; None if right, else what went wrong. Leaves the host buffer
    holding the source's bytes (for the reads) or the fill (after cpu-write)."""
    source = buffers.device_src.array[:nbytes]
    if operation == "H2D":
        runtime.memcpy(buffers.host_src.ptr, buffers.device_src.ptr, nbytes, runtime.memcpyDeviceToHost)
        with buffers.streams[0]:
            buffers.device_dst.array[:nbytes].fill(POISON)
        copy(buffers, "H2D", nbytes)
        buffers.streams[0].synchronize()
        return differ(buffers, source, nbytes, "H2D copy")
    if operation == "D2H":
        buffers.host_src.array[:nbytes].fill(POISON)
        copy(buffers, "D2H", nbytes)
        buffers.streams[0].synchronize()
        host_to_device_dst(buffers, nbytes)  # compared on the device: the CPU never reads the host buffer
        return differ(buffers, source, nbytes, "D2H copy")
    if operation == "cpu-read":
        runtime.memcpy(buffers.host_src.ptr, buffers.device_src.ptr, nbytes, runtime.memcpyDeviceToHost)
        with buffers.streams[0]:
            expected = checksum(cupy, buffers.device_src.array, nbytes)
        got = checksum(np, buffers.host_src.array, nbytes)
        return None if got == expected else f"cpu-read summed {got:#x}; the bytes sum to {expected:#x}"
    buffers.host_src.array[:nbytes].fill(FILL_BYTE)
    host_to_device_dst(buffers, nbytes)
    return differ(buffers, FILL_BYTE, nbytes, "cpu-write")


def host_pass(operation: str, buffers: CopyBuffers, nbytes: int) -> Callable[[], None]:
    """The timed host call: one read (cpu-read) or write (cpu-write) pass over the first ``nbytes``."""
    array = buffers.host_src.array
    if operation == "cpu-read":
        return lambda: checksum(np, array, nbytes)
    return lambda: array[:nbytes].fill(FILL_BYTE)


def _measure(config: Config, buffers: CopyBuffers, context: Context) -> Row:
    nbytes, operation = config["bytes"], config["operation"]
    copying = operation in COPIES
    metric = "GPU time per copy" if copying else "host time of one pass over the buffer"
    row = {**config, **Samples.missing(Unit.MS, Clock.GPU if copying else "host", metric, True if copying else None),
           "gbps": np.nan, "verified": False, "status": Status.FAILED, "error": ""}
    wrong = problem(operation, buffers, nbytes)
    if wrong:
        row["error"] = wrong
        return row
    row["verified"] = True
    if copying:
        def enqueue(ops: int) -> None:
            for _ in range(ops):
                copy(buffers, operation, nbytes)

        try:
            samples = context.timer().measure(enqueue, [buffers.streams[0]], metric=metric, gated=True).samples
        except MeasurementFailed as error:
            row["error"] = str(error)
            return row
    else:
        samples = context.host(host_pass(operation, buffers, nbytes), metric=metric, unit=Unit.MS, purpose=CPU_PURPOSE)
    row.update(samples.columns(), status=Status.OK, gbps=nbytes / (samples.median * 1e6))
    return row


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    """One row per configuration, one host memory kind at a time so its buffers are allocated once."""
    return by_host_memory(configs, make_buffers, lambda config, buffers: _measure(config, buffers, context))


EXPERIMENT = Experiment(
    name="hostmemory",
    description="write-combined vs pinned host memory: H2D/D2H copies, and the CPU reading and writing it",
    axes={"host_memory": HOST_KINDS, "operation": OPERATIONS, "bytes": (1 << 20, 64 << 20)},
    columns=COLUMNS,
    measure=measure,
    order=12,
    sweeps=Sweeps(
        quick={"bytes": (1 << 20,)},
        full={"bytes": tuple(1 << p for p in range(16, 31, 2))},
        valid=valid,
        lean=lean,
    ),
    cost=Cost(seconds, memory_needed=memory_needed, share_s=3),
    accuracy=Accuracy(stop_rules={CPU_PURPOSE: {"time_cap_s": CPU_TIME_CAP_S}}),
)
