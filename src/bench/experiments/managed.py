"""Managed memory (``cudaMallocManaged``): what a kernel pays when its pages start on the host, with and without
``cudaMemPrefetchAsync``, against the same kernel on pages already on the GPU.

One managed buffer of ``bytes`` per size and a memory-bound kernel over it
(:class:`bench.measure.kernels.MixKernel`, one round). ``case``: ``first-touch`` (the CPU touches every page before
each sample; the kernel's faults and migration are timed), ``prefetch-then-kernel`` (the same, then
``cudaMemPrefetchAsync`` and the kernel, not gated) and ``resident`` (the reference). Verified once per configuration
on :data:`SPOT_CHECKS` words gathered on the GPU; a size above half the free device memory is skipped
(:func:`too_large`). The method, the API's change in CUDA 13 and the caveats: docs/methodology.md.
"""

from __future__ import annotations

import ctypes
import mmap
from collections.abc import Callable, Iterator, Sequence
from itertools import groupby

import numpy as np

from bench.platform.cuda import cupy, runtime
from bench.measure import kernels
from bench.experiments import Accuracy, Config, Cost, Experiment, Row, Sweeps
from bench.results.schema import FLAG, FLOAT, INT, TEXT, column
from bench.timing import Context, Floor, GpuTiming, MeasurementFailed, Samples, StopRule, Summary, Timeline
from bench.platform.units import format_size
from bench.platform.vocabulary import Clock, ManagedCase, Status, Unit, values

CASES = values(ManagedCase)
ROUNDS = 1  # mix rounds per word: memory-bound
SPOT_CHECKS = 4096
MIN_BYTES = 4096  # a page
MIGRATE_PURPOSE = "migrate"  # the stop rule of the cases that move every page before every sample
MIGRATE_RULE = {"min_samples": 5, "time_cap_s": 0.2, "warmup_batches": 0}  # verification is the warm-up
# For the time estimate only (GB/s), a little below what an H200 (PCIe Gen5, driver 580) did: the CPU's touch that
# brings every page back (3.9), the kernel's page faults (9 to 12), a prefetch (48), the kernel on resident pages (1400;
# bytes, not traffic).
_CPU_TOUCH_GBPS = 4.5
_FAULT_GBPS = 10.0
_PREFETCH_GBPS = 40.0
_KERNEL_GBPS = 1000.0
METRICS = {"first-touch": "GPU time of the kernel, its page faults and migration included",
           "prefetch-then-kernel": "GPU time of cudaMemPrefetchAsync to the GPU and the kernel (ungated: the call's "
                                   "host work included)",
           "resident": "GPU time of the kernel over resident pages"}

COLUMNS = (
    column("bytes", INT, "bytes of managed memory the kernel touches (every 4-byte word)"),
    column("case", TEXT, "first-touch: the kernel faults the pages over from the host; prefetch-then-kernel: "
                         "cudaMemPrefetchAsync then the kernel; resident: the kernel on pages already on the GPU",
           CASES),
    column("gbps", FLOAT, "bytes / median GPU time of the timed operation, GB/s (1e9 bytes/s)"),
    column("kernel_ms", FLOAT, "the kernel's part of the time: the whole of it for first-touch and resident, the "
                               "part after the prefetch for prefetch-then-kernel (median)"),
    column("prefetch_ms", FLOAT, "prefetch-then-kernel: median time from the cudaMemPrefetchAsync call to the pages' "
                                 "arrival on the GPU"),
    column("prefetch_gbps", FLOAT, "prefetch-then-kernel: bytes / prefetch_ms, the host → device migration rate"),
    column("free_bytes", INT, "device memory free before the managed buffer was allocated (cudaMemGetInfo)"),
    column("verified", FLAG, "a sample of words held the kernel's result of what the CPU wrote, checked once"),
)


# --- description ---------------------------------------------------------------------------------------------

def valid(config: Config) -> bool:
    """At least a page of managed memory."""
    return config["bytes"] >= MIN_BYTES


def too_large(nbytes: int, free_bytes: int) -> str | None:
    """Why ``nbytes`` of managed memory must not be asked for when the GPU has ``free_bytes`` free, or None: more
    than half of what is free is refused (managed memory can oversubscribe the GPU, and that can hang it)."""
    if nbytes > free_bytes // 2:
        return (f"{format_size(nbytes)} of managed memory is more than half of the {format_size(free_bytes)} the GPU "
                "has free: not allocated (oversubscribing managed memory can hang the GPU)")
    return None


def migrate_rule(rule: StopRule) -> StopRule:
    """The stop rule of the migrating cases, given the default one (the harness caps every purpose alike for
    --quick and --budget, so this bounds what it will use)."""
    return rule.capped(time_cap_s=MIGRATE_RULE["time_cap_s"], min_samples=MIGRATE_RULE["min_samples"]).replace(
        warmup_batches=MIGRATE_RULE["warmup_batches"])


def seconds(config: Config, rule: StopRule) -> float:
    """Expected wall time: verification (the CPU touches every page, the case runs once), then the samples.
    first-touch and prefetch-then-kernel pay the CPU's touch before every sample and sample until the ``migrate``
    time cap, at least ``min_samples`` of them (one may overrun the cap); resident runs the kernel in batches."""
    nbytes, case = config["bytes"], config["case"]
    touch_s = nbytes / (_CPU_TOUCH_GBPS * 1e9)
    kernel_s = nbytes / (_KERNEL_GBPS * 1e9)
    prefetch_s = nbytes / (_PREFETCH_GBPS * 1e9)
    operation_s = {"first-touch": nbytes / (_FAULT_GBPS * 1e9), "prefetch-then-kernel": prefetch_s + kernel_s,
                   "resident": prefetch_s + kernel_s}[case]
    verify_s = 0.01 + touch_s + operation_s
    if case == "resident":
        batch_s = max(kernel_s, rule.batch_ms / 1e3)
        return verify_s + prefetch_s + 2 * kernel_s + (rule.warmup_batches + rule.min_samples) * batch_s
    migrate = migrate_rule(rule)
    sample_s = touch_s + operation_s
    return verify_s + migrate.warmup_batches * sample_s + max(migrate.min_samples * sample_s,
                                                              migrate.time_cap_s + sample_s)


def memory_needed(configs: Sequence[Config]) -> tuple[int, int]:
    """The largest managed buffer, as device bytes (and as host bytes: its pages live on the host between samples)."""
    largest = max(config["bytes"] for config in configs)
    return largest, largest


# --- measuring code --------------------------------------------------------------------------------------------

class ManagedBuffer:
    """``nbytes`` of managed memory (``cudaMallocManaged``, attached globally); ``words`` is a uint32 numpy view of
    its whole 4-byte words (the CPU's access), ``ptr`` its address (the GPU's)."""

    def __init__(self, nbytes: int) -> None:
        if nbytes < 4:
            raise ValueError("need at least one 4-byte word")
        self.nbytes = nbytes
        self.ptr = runtime.mallocManaged(nbytes, runtime.cudaMemAttachGlobal)
        self.count = nbytes // 4
        self.words = np.frombuffer((ctypes.c_uint32 * self.count).from_address(self.ptr), dtype=np.uint32)

    def close(self) -> None:
        self.words = None  # the view goes before the memory behind it
        if self.ptr:
            runtime.free(self.ptr)
            self.ptr = 0

    def __enter__(self) -> ManagedBuffer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def spots(count: int) -> np.ndarray:
    """Indices of the words to check: SPOT_CHECKS of them evenly spread, the first and last included."""
    return np.unique(np.linspace(0, count - 1, min(count, SPOT_CHECKS)).round().astype(np.int64))


def index_words(indices) -> np.ndarray:
    """Each word's index as uint32 (wrapping past 2**32): what the CPU writes into it before a verification."""
    return (np.asarray(indices, dtype=np.int64) & 0xFFFFFFFF).astype(np.uint32)


class _Managed:
    """One managed buffer and what the cases do with it: the CPU's touch, the prefetch, the kernel."""

    def __init__(self, buffer: ManagedBuffer, stream, kernel) -> None:
        self.buffer, self.stream, self.kernel = buffer, stream, kernel
        self.device = runtime.getDevice()
        self.page_words = max(1, mmap.PAGESIZE // 4)

    def touch(self) -> None:
        """The CPU writes one word in every page: every page moves to the host and leaves the GPU."""
        self.buffer.words[:: self.page_words] = 0

    def gather(self, indices: np.ndarray) -> np.ndarray:
        """The words at ``indices``, read by the GPU (pages on the GPU stay there) on the stream."""
        memory = cupy.cuda.UnownedMemory(self.buffer.ptr, self.buffer.nbytes, self.buffer)
        device_words = cupy.ndarray((self.buffer.count,), dtype=cupy.uint32, memptr=cupy.cuda.MemoryPointer(memory, 0))
        with self.stream:
            got = device_words[cupy.asarray(indices)].get()
        self.stream.synchronize()
        return got

    def prefetch(self) -> None:
        """cudaMemPrefetchAsync of the whole buffer to this GPU, on the stream (CuPy builds the CUDA 13 location)."""
        runtime.memPrefetchAsync(self.buffer.ptr, self.buffer.nbytes, self.device, self.stream.ptr)

    def run_kernel(self) -> None:
        self.kernel.launch(self.stream, self.buffer.ptr, self.buffer.count, ROUNDS)

    def problem(self, case: str) -> str | None:
        """Touch every page, write a sample of words' index into them, run the case once, check those words; None
        if right, else what went wrong."""
        checked = spots(self.buffer.count)
        self.touch()
        self.buffer.words[checked] = index_words(checked)
        if case != "first-touch":
            self.prefetch()
            if case == "resident":
                self.stream.synchronize()
        self.run_kernel()
        self.stream.synchronize()
        got = self.gather(checked)
        expected = kernels.mix_reference(index_words(checked), ROUNDS)
        wrong = np.flatnonzero(got != expected)
        if wrong.size:
            index = int(checked[wrong[0]])
            return (f"kernel result wrong in {wrong.size} of {checked.size} words checked (word {index}: "
                    f"{int(got[wrong[0]]):#x}, expected {int(expected[wrong[0]]):#x})")
        return None


def _first_touch(managed: _Managed, context: Context) -> tuple[GpuTiming, dict]:
    def enqueue(ops: int) -> None:
        for _ in range(ops):
            managed.run_kernel()

    timing = context.timer(MIGRATE_PURPOSE).each(managed.touch, enqueue, [managed.stream],
                                                 metric=METRICS["first-touch"], gated=True)
    return timing, {"kernel_ms": timing.median_ms}


def _prefetch_then_kernel(managed: _Managed, context: Context) -> tuple[GpuTiming, dict]:
    """Timed ungated, with events around the prefetch and the kernel; each run's timeline is read in the next
    run's untimed preparation (its batch has finished by then), and the last after sampling."""
    timeline = Timeline()
    parts: list[dict[str, float]] = []
    pending = [False]

    def collect() -> None:
        if pending[0]:
            parts.append({op["op"]: op["end_ms"] - op["start_ms"] for op in timeline.read()})
            pending[0] = False

    def prepare() -> None:
        collect()
        managed.touch()

    def enqueue(ops: int) -> None:
        for _ in range(ops):
            timeline.start(managed.stream)
            with timeline.op(managed.stream, {"op": "prefetch"}):
                managed.prefetch()
            with timeline.op(managed.stream, {"op": "kernel"}):
                managed.run_kernel()
            pending[0] = True

    try:
        timing = context.timer(MIGRATE_PURPOSE).each(prepare, enqueue, [managed.stream],
                                                     metric=METRICS["prefetch-then-kernel"], gated=False)
        collect()
    finally:
        timeline.close()
    sampled = parts[-len(timing.samples.values):]  # the warm-up runs came first
    prefetch_ms = Summary.of([part["prefetch"] for part in sampled]).median
    return timing, {"prefetch_ms": prefetch_ms, "prefetch_gbps": managed.buffer.nbytes / (prefetch_ms * 1e6),
                    "kernel_ms": Summary.of([part["kernel"] for part in sampled]).median}


def _resident(managed: _Managed, context: Context) -> tuple[GpuTiming, dict]:
    managed.prefetch()
    managed.stream.synchronize()

    def enqueue(ops: int) -> None:
        for _ in range(ops):
            managed.run_kernel()

    timing = context.timer().measure(enqueue, [managed.stream], metric=METRICS["resident"], gated=True)
    return timing, {"kernel_ms": timing.median_ms}


TIMED: dict[str, Callable[[_Managed, Context], tuple[GpuTiming, dict]]] = {
    "first-touch": _first_touch, "prefetch-then-kernel": _prefetch_then_kernel, "resident": _resident}


def _measure(config: Config, managed: _Managed, free_bytes: int, context: Context) -> Row:
    case = config["case"]
    row = {**config, **Samples.missing(Unit.MS, Clock.GPU, METRICS[case], case != "prefetch-then-kernel"), "gbps": np.nan,
           "kernel_ms": np.nan, "prefetch_ms": np.nan, "prefetch_gbps": np.nan, "free_bytes": free_bytes,
           "verified": False, "status": Status.FAILED, "error": ""}
    wrong = managed.problem(case)
    if wrong:
        row["error"] = wrong
        return row
    row["verified"] = True
    try:
        timing, extra = TIMED[case](managed, context)
    except MeasurementFailed as error:
        row["error"] = str(error)
        return row
    row.update(timing.samples.columns(), **extra, status=Status.OK,
               gbps=managed.buffer.nbytes / (timing.median_ms * 1e6))
    return row


def _not_measured(configs: Sequence[Config], status: str, reason: str, free_bytes: int | None) -> Iterator[Row]:
    for config in configs:
        yield {**config, "status": status, "error": reason, "free_bytes": free_bytes}


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    """One managed buffer per run of configurations of one size, allocated only if it fits (see too_large)."""
    device = runtime.getDevice()
    if not runtime.deviceGetAttribute(runtime.cudaDevAttrConcurrentManagedAccess, device):
        yield from _not_measured(configs, Status.UNSUPPORTED, "the device lacks concurrent managed access "
                                 "(cudaDevAttrConcurrentManagedAccess is 0): no page faults, no prefetch to it", None)
        return
    stream = cupy.cuda.Stream(non_blocking=True)
    kernel = kernels.MixKernel()
    for nbytes, group in groupby(configs, key=lambda config: config["bytes"]):
        group = list(group)
        cupy.get_default_memory_pool().free_all_blocks()
        free_bytes = int(runtime.memGetInfo()[0])
        reason = too_large(nbytes, free_bytes)
        if reason:
            yield from _not_measured(group, Status.SKIPPED, reason, free_bytes)
            continue
        with ManagedBuffer(nbytes) as buffer:
            managed = _Managed(buffer, stream, kernel)
            try:
                for config in group:
                    yield _measure(config, managed, free_bytes, context)
            finally:
                stream.synchronize()


EXPERIMENT = Experiment(
    name="managed",
    description="cudaMallocManaged: a kernel over pages on the host (first touch), after cudaMemPrefetchAsync, "
                "or resident",
    axes={"bytes": (64 << 20, 256 << 20), "case": CASES},
    columns=COLUMNS,
    measure=measure,
    order=14,
    sweeps=Sweeps(
        quick={"bytes": (16 << 20,)},
        full={"bytes": (4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30, 4 << 30)},
        valid=valid,
    ),
    cost=Cost(seconds, memory_needed=memory_needed, share_s=3),
    accuracy=Accuracy(
        stop_rules={MIGRATE_PURPOSE: MIGRATE_RULE},
        floor=Floor(min_samples=MIGRATE_RULE["min_samples"]),  # migrations: each a fresh page-in
    ),
)
