"""What allocation costs: cudaMalloc vs cudaMallocAsync (pool release threshold 0, the default, or the maximum),
cudaHostAlloc vs cudaHostRegister, over sizes; and the loop real code runs.

``pattern=single``: host µs of each allocation and each free, round after round until the stop rule is met; the
samples are whole allocate-and-free round trips as code pays them: for cudaMallocAsync, mallocAsync + freeAsync +
the stream synchronization after which a pool with release threshold 0 hands its memory back to the driver, so the
next allocation maps memory again; with the maximum threshold the pool keeps it. ``pattern=loop``: ``LOOP``
iterations of (allocate, a kernel over the buffer, free) on one stream; the samples are host µs per iteration, from
the first call to the end of the stream's work, and ``gpu_us_per_iteration`` is the loop's GPU time from events
around it (not gated: cudaFree may wait on the host).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import nullcontext

from bench.platform.cuda import cupy, runtime
from bench.measure import kernels
from bench.experiments import Config, Cost, Experiment, Row, Sweeps
from bench.measure.memory import RELEASE_THRESHOLD_MAX, release_threshold, touched
from bench.results.schema import FLOAT, FLOATS, INT, TEXT, column
from bench.timing import Context, Samples, StopRule, Summary
from bench.platform.vocabulary import ALLOC_LOOP, Clock, Status, Unit

APIS = ("cudaMalloc", "cudaMallocAsync", "cudaHostAlloc", "cudaHostRegister")
DEVICE_APIS = ("cudaMalloc", "cudaMallocAsync")
THRESHOLDS = ("none", "0", "max")
PATTERNS = ("single", "loop")
LOOP = ALLOC_LOOP  # the views name it too
HOST_MAX_BYTES = 1 << 30
LEAN_MAX_BYTES = 32 << 20

COLUMNS = (
    column("api", TEXT, "the allocation function", APIS),
    column("release_threshold", TEXT, "cudaMallocAsync: the default pool's release threshold (0 or the maximum); "
                                      "none for the others", THRESHOLDS),
    column("pattern", TEXT, "single: allocate + free round trips; loop: (allocate, kernel, free) × LOOP", PATTERNS),
    column("bytes", INT, "bytes per allocation"),
    column("alloc_us", FLOAT, "single: median host µs of the allocation"),
    column("free_us", FLOAT, "single: median host µs of the free"),
    column("alloc_us_samples", FLOATS, "single: each allocation's host µs"),
    column("free_us_samples", FLOATS, "single: each free's host µs"),
    column("iterations", INT, "loop: iterations per sample"),
    column("gpu_us_per_iteration", FLOAT, "loop: median GPU µs per iteration (events around the loop)"),
    column("gpu_us_per_iteration_samples", FLOATS, "loop: each sample's GPU µs per iteration"),
)


def valid(config: Config) -> bool:
    if (config["release_threshold"] == "none") != (config["api"] != "cudaMallocAsync"):
        return False
    if config["api"] not in DEVICE_APIS:
        return config["pattern"] == "single" and config["bytes"] <= HOST_MAX_BYTES
    return True


def lean(config: Config) -> bool:
    """The default sweep leaves out the slow ends: pinned host allocations and loops above 32 MiB."""
    return config["bytes"] <= LEAN_MAX_BYTES or (config["api"] in DEVICE_APIS and config["pattern"] == "single")


def seconds(config: Config, rule: StopRule) -> float:
    """Expected wall time: the loop runs 2 + ``min_samples`` times; single round trips are noisy host times that
    take some tens of ms to converge, unless a round trip is so slow that ``min_samples`` of them take longer."""
    if config["pattern"] == "loop":
        per_iteration_s = (100e-6 if config["api"] == "cudaMalloc" else 25e-6) + config["bytes"] / 1e12
        return 0.01 + (2 + rule.min_samples) * LOOP * per_iteration_s
    round_s = 100e-6
    if config["api"] == "cudaHostAlloc":
        round_s += config["bytes"] / 2.4e9  # page-locking runs at a few GB/s
    elif config["api"] == "cudaHostRegister":
        round_s += config["bytes"] / 25e9
    return 0.01 + max((1 + rule.min_samples) * round_s, min(rule.time_cap_s, 0.08))


def memory_needed(configs: Sequence[Config]) -> tuple[int, int]:
    device = [config["bytes"] for config in configs if config["api"] in DEVICE_APIS]
    host = [config["bytes"] for config in configs if config["api"] not in DEVICE_APIS]
    return max(device, default=0), max(host, default=0)


# --- measuring code --------------------------------------------------------------------------------------------

def _single(api: str, nbytes: int, stream, context: Context) -> Row:
    """Host µs of each allocation and free, and whole round trips (the samples)."""
    made: list[int] = []
    memory = touched(nbytes) if api == "cudaHostRegister" else None
    if api == "cudaMalloc":
        steps = [("alloc", lambda: made.append(runtime.malloc(nbytes))), ("free", lambda: runtime.free(made.pop()))]
    elif api == "cudaMallocAsync":
        steps = [("alloc", lambda: made.append(runtime.mallocAsync(nbytes, stream.ptr))),
                 ("free", lambda: runtime.freeAsync(made.pop(), stream.ptr)), ("sync", stream.synchronize)]
    elif api == "cudaHostAlloc":
        steps = [("alloc", lambda: made.append(runtime.hostAlloc(nbytes, 0))),
                 ("free", lambda: runtime.freeHost(made.pop()))]
    else:
        steps = [("alloc", lambda: runtime.hostRegister(memory.ctypes.data, nbytes, 0)),
                 ("free", lambda: runtime.hostUnregister(memory.ctypes.data))]
    per_step, reason = context.host_steps(steps, unit=Unit.US)
    samples = Samples(per_step["total"], Unit.US, Clock.HOST, "host time of one allocate + free round trip", reason)
    return {**samples.columns(), "alloc_us": Summary.of(per_step["alloc"]).median,
            "free_us": Summary.of(per_step["free"]).median, "alloc_us_samples": per_step["alloc"],
            "free_us_samples": per_step["free"]}


def loop_once(api: str, nbytes: int, stream, kernel) -> None:
    """``LOOP`` iterations of (allocate ``nbytes``, a one-round kernel over it, free) with ``api``."""
    words = max(1, nbytes // 4)
    for _ in range(LOOP):
        if api == "cudaMalloc":
            ptr = runtime.malloc(nbytes)
            kernel.launch(stream, ptr, words, 1)
            runtime.free(ptr)
        else:
            ptr = runtime.mallocAsync(nbytes, stream.ptr)
            kernel.launch(stream, ptr, words, 1)
            runtime.freeAsync(ptr, stream.ptr)


def _loop(api: str, nbytes: int, stream, kernel, context: Context) -> Row:
    """Host µs per iteration (the samples) and GPU µs per iteration of the loop."""

    def enqueue(ops: int) -> None:
        for _ in range(ops):
            loop_once(api, nbytes, stream, kernel)

    timing = context.timer().measure(enqueue, [stream], metric="GPU time of the loop", gated=False,
                                     ops_per_batch=1)
    host = Samples([ms * 1e3 / LOOP for ms in timing.wall_ms], Unit.US, Clock.HOST,
                   "host time per (allocate, kernel, free) iteration", timing.samples.stop_reason)
    gpu = [ms * 1e3 / LOOP for ms in timing.samples.values]
    return {**host.columns(), "iterations": LOOP, "gpu_us_per_iteration": Summary.of(gpu).median,
            "gpu_us_per_iteration_samples": gpu}


def pool_threshold(name: str):
    """The context a ``release_threshold`` axis value asks for: the pool's threshold set (``"0"``, ``"max"``), or
    nothing (``"none"``: not a pool allocation)."""
    threshold = {"max": RELEASE_THRESHOLD_MAX, "0": 0}.get(name)
    return release_threshold(threshold) if threshold is not None else nullcontext()


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    stream = cupy.cuda.Stream(non_blocking=True)
    kernel = kernels.MixKernel()
    for config in configs:
        api, nbytes = config["api"], config["bytes"]
        try:
            with pool_threshold(config["release_threshold"]):
                if config["pattern"] == "single":
                    measured = _single(api, nbytes, stream, context)
                else:
                    measured = _loop(api, nbytes, stream, kernel, context)
            yield {**config, **measured, "status": Status.OK, "error": ""}
        except runtime.CUDARuntimeError as error:
            runtime.deviceSynchronize()
            status = Status.SKIPPED if "memory" in str(error).lower() else Status.FAILED
            yield {**config, "status": status, "error": f"{type(error).__name__}: {error}"}


EXPERIMENT = Experiment(
    name="alloc",
    description="allocation latency: cudaMalloc vs cudaMallocAsync (pool threshold 0 / max), pinned host memory",
    axes={"api": APIS, "release_threshold": THRESHOLDS, "pattern": PATTERNS,
          "bytes": (1 << 10, 1 << 20, 32 << 20, 1 << 30)},
    columns=COLUMNS,
    measure=measure,
    order=60,
    sweeps=Sweeps(
        quick={"bytes": (1 << 10, 1 << 20)},
        full={"bytes": (1 << 10, 32 << 10, 1 << 20, 32 << 20, 1 << 30, 4 << 30)},
        valid=valid,
        lean=lean,
    ),
    cost=Cost(seconds, memory_needed=memory_needed, share_s=5),
)
