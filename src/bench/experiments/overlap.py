"""Copy/compute overlap: a payload split into chunks over N streams, each chunk H2D → kernel → D2H on its stream.

Chunks go round-robin over ``streams`` non-blocking streams, ``chunks_per_stream`` each. With ``allocator=malloc``
the chunks live in one device buffer allocated up front; with ``mallocAsync`` every chunk allocates its buffer on its
stream before the upload and frees it after the download, inside the timed loop, as real code does (the device's
default pool, release threshold untouched). ``launch=eager`` enqueues every operation from Python (kernels through
the precompiled path, see the ``launch`` experiment); ``launch=graph`` captures the whole multi-stream pipeline into a
CUDA graph once and times its replays. A combination the runtime will not capture is a row with status
``unsupported`` and the runtime's error text.

The kernel does ``compute_ratio`` × (the pinned one-direction transfer time of the whole payload) of work; its rounds
per element (``kernel_rounds``) are calibrated on the GPU at hand, and the ratio actually reached is recorded.

**The bound.** Each stage of the whole payload is timed alone on one stream, after untimed passes over the fresh
buffers: ``h2d_ms``, ``kernel_ms``, ``d2h_ms`` are medians and ``serial_ms`` is their sum. The bound takes each stage
at its fastest sample, since a lower bound must not inherit a slow moment, and the kernel stage at the faster of the
single whole-payload kernel and the same work split into four chunks per stream over 2, 4 or 8 streams
(``kernel_split_ms``): on the H200, concurrent chunk kernels finish the same work about 8% sooner than one kernel
(the next kernel fills the SMs a finishing one leaves idle), so the single kernel alone gives no lower bound.

With two or more copy engines (``asyncEngineCount``) an upload, a download and kernels can all run at once, but the
two copy directions share the PCIe link, so the copy stages are counted at the rate each direction keeps while the
other one runs (``h2d_duplex_ms``, ``d2h_duplex_ms``: the fastest sample of the whole payload copied both ways at
once). No schedule can finish sooner than ``bound_ms = max(kernel, h2d_duplex_ms, d2h_duplex_ms)``: splitting a
direction's bytes between "alone" and "together" periods only lengthens the copies, because the link moves more in
total when both directions run. With one copy engine the copies serialize: ``bound_ms = max(kernel, h2d_ms +
d2h_ms)``. The bound uses pinned copy times for every row, so pageable rows show what pageable memory costs against
what the hardware can do; their ``serial_ms`` (and so ``speedup``) uses their own pageable stage times. Filling and
draining the pipeline (the first upload and the last download overlap nothing) is not in the bound, so
``efficiency = bound_ms / makespan_ms`` approaches 1 only with enough, small enough chunks.

**Timing.** Pinned pipelines are enqueued behind the gate and timed from the start event to the last stream's end
(``makespan_ms``), so Python's enqueue speed is not in it; ``host_enqueue_ms`` is the host time the enqueue took.
Pageable copies cannot wait behind a closed gate, so those rows are timed from a start event recorded just before
the first enqueue (``gated`` False). Each configuration runs once first with an event before and after every
operation (the ``timeline`` side table, from which ``concurrency`` is computed: the share of the makespan during which
two or more operations run) and with its output checked against the kernel applied to the input.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, replace

import cupy
import numpy as np
import pandas as pd
from cupy.cuda import runtime

from bench.capture import capture
from bench.experiments import Config, Experiment, Row
from bench.experiments.launch import launch_costs_us
from bench.kernels import MixKernel, mix_reference
from bench.memory import BufferSet, DeviceBuffer, HostBuffer
from bench.timing import MeasurementFailed, Timeline, Timer, untimed_columns
from bench.units import format_size

POISON_WORD = 0xA5A5A5A5
_SPOT_CHECKS = 4096
_CALIBRATION_ROUNDS = (16, 256)
_KERNEL_SPLITS = (2, 4, 8)  # stream counts for the split kernel stage, four chunks per stream


def concurrency(intervals: Sequence[tuple[float, float]]) -> float:
    """Share of the makespan (0 to the last end) during which two or more intervals overlap."""
    if not intervals:
        return float("nan")
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    makespan = max(end for _, end in intervals)
    active, previous, overlapped = 0, 0.0, 0.0
    for time, change in edges:
        if active >= 2:
            overlapped += time - previous
        active += change
        previous = time
    return overlapped / makespan if makespan > 0 else float("nan")


def split(total_bytes: int, chunks: int) -> list[tuple[int, int]]:
    """(offset, bytes) of ``chunks`` pieces of whole 4-byte words covering ``total_bytes``, sizes within a word."""
    words = total_bytes // 4
    edges = [index * words // chunks * 4 for index in range(chunks + 1)]
    return [(start, end - start) for start, end in zip(edges, edges[1:])]


def bound_ms(kernel_ms: float, h2d_ms: float, d2h_ms: float, h2d_duplex_ms: float, d2h_duplex_ms: float,
             copy_engines: int) -> float:
    """The engine-aware lower bound on the pipeline's makespan (see the module docstring)."""
    if copy_engines >= 2:
        return max(kernel_ms, h2d_duplex_ms, d2h_duplex_ms)
    return max(kernel_ms, h2d_ms + d2h_ms)


def rounds_for(target_ms: float, low: tuple[int, float], high: tuple[int, float]) -> int:
    """Kernel rounds that should take ``target_ms``, from two (rounds, ms) measurements (time is linear in rounds)."""
    (rounds_low, ms_low), (rounds_high, ms_high) = low, high
    per_round = (ms_high - ms_low) / (rounds_high - rounds_low)
    if per_round <= 0:
        raise ValueError("kernel time did not grow with its rounds")
    return max(1, round(rounds_low + (target_ms - ms_low) / per_round))


@dataclass(frozen=True)
class _Stages:
    """Whole-payload stage times for one (total_bytes, compute_ratio, host_memory), and the bound."""

    h2d_ms: float
    kernel_ms: float
    d2h_ms: float
    h2d_duplex_ms: float
    d2h_duplex_ms: float
    kernel_split_ms: float  # fastest sample of the kernel work split into chunks over several streams
    bound_ms: float
    kernel_rounds: int
    compute_ratio_measured: float

    @property
    def serial_ms(self) -> float:
        return self.h2d_ms + self.kernel_ms + self.d2h_ms

    def columns(self) -> dict:
        return {**asdict(self), "serial_ms": self.serial_ms}


class _Payload(BufferSet):
    """Buffers for one total size: random input on the device and in each host memory kind, host outputs, a device
    work buffer (the malloc chunks), the expected output and a scratch buffer for checking."""

    def __init__(self, total_bytes: int, host_kinds: Sequence[str], stream_count: int, seed: int = 0) -> None:
        super().__init__(streams=max(2, stream_count))
        self.total_bytes = total_bytes
        with self.freed_on_failure():
            self.input = self.take(DeviceBuffer("malloc", total_bytes))
            self.work = self.take(DeviceBuffer("malloc", total_bytes))
            self.expected = self.take(DeviceBuffer("malloc", total_bytes))
            self.scratch = self.take(DeviceBuffer("malloc", total_bytes))
            words = self.input.array.view(cupy.uint32)
            words[:] = cupy.random.RandomState(seed).randint(0, 2**31, size=words.size, dtype=cupy.int64) * 2 + 1
            cupy.cuda.runtime.deviceSynchronize()
            cupy.get_default_memory_pool().free_all_blocks()  # the random draw's temporary
            self.host_in = {kind: self.take(HostBuffer(kind, total_bytes)) for kind in host_kinds}
            self.host_out = {kind: self.take(HostBuffer(kind, total_bytes)) for kind in host_kinds}
            for buffer in self.host_in.values():
                runtime.memcpy(buffer.ptr, self.input.ptr, total_bytes, runtime.memcpyDeviceToHost)
            for kind in host_kinds:  # untimed passes over fresh memory: first DMA to new pages can be slower
                for _ in range(2):
                    runtime.memcpy(self.work.ptr, self.host_in[kind].ptr, total_bytes, runtime.memcpyHostToDevice)
                    runtime.memcpy(self.host_out[kind].ptr, self.work.ptr, total_bytes, runtime.memcpyDeviceToHost)


class _Runner:
    """Everything one run of the experiment shares: the kernel, the timers, the calibrations and stage times."""

    def __init__(self, timer: Timer) -> None:
        self.timer = timer
        # Stage times feed every row's bound: sample them under the default rule, not the relaxed pipeline one.
        self.stage_timer = Timer(replace(timer.rule, min_samples=max(10, timer.rule.min_samples), time_cap_s=1.0))
        self.copy_engines = runtime.getDeviceProperties(runtime.getDevice())["asyncEngineCount"]
        self.kernel = MixKernel()
        self.timeline = Timeline()
        self._stages: dict[tuple, _Stages] = {}
        self._copies: dict[tuple, tuple[float, float]] = {}  # (median, fastest) ms; for "duplex", (H2D, D2H)
        self._rounds: dict[tuple, tuple[int, tuple[float, float]]] = {}
        self.launch_us: dict[str, float] = {}

    # -- stage measurements (whole payload, one stream) -----------------------------------------------------------
    def _copy_ms(self, payload: _Payload, host_memory: str, direction: str) -> tuple[float, float]:
        """Median and fastest time of the whole payload copied one way."""
        key = (payload.total_bytes, host_memory, direction)
        if key not in self._copies:
            stream, total = payload.streams[0], payload.total_bytes
            if direction == "H2D":
                dst, src, kind = payload.work.ptr, payload.host_in[host_memory].ptr, runtime.memcpyHostToDevice
            else:
                dst, src, kind = payload.host_out[host_memory].ptr, payload.input.ptr, runtime.memcpyDeviceToHost

            def enqueue(ops: int) -> None:
                for _ in range(ops):
                    runtime.memcpyAsync(dst, src, total, kind, stream.ptr)

            summary = self.stage_timer.measure(enqueue, [stream], gated=host_memory != "pageable",
                                               ops_per_batch=1).summary
            self._copies[key] = (summary.median_ms, summary.min_ms)
        return self._copies[key]

    def _duplex_ms(self, payload: _Payload) -> tuple[float, float]:
        """Fastest H2D and D2H times of the whole payload while both directions copy at once (pinned)."""
        key = (payload.total_bytes, "pinned", "duplex")
        if key not in self._copies:
            up, down, total = payload.streams[0], payload.streams[1], payload.total_bytes
            host_in, host_out = payload.host_in["pinned"].ptr, payload.host_out["pinned"].ptr

            def enqueue(ops: int) -> None:
                for _ in range(ops):
                    runtime.memcpyAsync(payload.work.ptr, host_in, total, runtime.memcpyHostToDevice, up.ptr)
                    runtime.memcpyAsync(host_out, payload.input.ptr, total, runtime.memcpyDeviceToHost, down.ptr)

            timing = self.stage_timer.measure(enqueue, [up, down], ops_per_batch=1)
            self._copies[key] = tuple(min(samples) for samples in timing.stream_samples_ms)
        return self._copies[key]

    def _kernel_ms(self, payload: _Payload, rounds: int) -> tuple[float, float]:
        """Median and fastest time of the kernel over the whole payload."""
        stream, words = payload.streams[0], payload.total_bytes // 4

        def enqueue(ops: int) -> None:
            for _ in range(ops):
                self.kernel.launch(stream, payload.work.ptr, words, rounds)

        summary = self.stage_timer.measure(enqueue, [stream], ops_per_batch=1).summary
        return summary.median_ms, summary.min_ms

    def _split_kernel_ms(self, payload: _Payload, rounds: int) -> float:
        """Fastest time of the whole payload's kernel work split into four chunks per stream, over each of
        ``_KERNEL_SPLITS`` streams (as many as the payload has), kernels only."""
        fastest = np.inf
        for stream_count in (count for count in _KERNEL_SPLITS if count <= len(payload.streams)):
            streams = payload.streams[:stream_count]
            chunks = split(payload.total_bytes, 4 * stream_count)

            def enqueue(ops: int) -> None:
                for _ in range(ops):
                    for chunk, (offset, size) in enumerate(chunks):
                        self.kernel.launch(streams[chunk % stream_count], payload.work.ptr + offset, size // 4,
                                           rounds)

            fastest = min(fastest, self.stage_timer.measure(enqueue, streams, ops_per_batch=1).summary.min_ms)
        return fastest

    def _calibrate(self, payload: _Payload, ratio: float) -> tuple[int, tuple[float, float]]:
        """Rounds per element for which the whole-payload kernel takes ``ratio`` × the pinned upload time, and the
        kernel's (median, fastest) time at those rounds."""
        key = (payload.total_bytes, ratio)
        if key not in self._rounds:
            target = ratio * self._copy_ms(payload, "pinned", "H2D")[0]
            low, high = ((rounds, self._kernel_ms(payload, rounds)[0]) for rounds in _CALIBRATION_ROUNDS)
            try:
                rounds = rounds_for(target, low, high)
            except ValueError:  # launch-bound payload: the time did not grow with the rounds; scale instead
                rounds = max(1, round(high[0] * target / high[1]))
            kernel = self._kernel_ms(payload, rounds)
            for _ in range(2):  # refine: the fit's intercept is launch overhead, small against these times
                if abs(kernel[0] / target - 1) < 0.02:
                    break
                rounds = max(1, round(rounds * target / kernel[0]))
                kernel = self._kernel_ms(payload, rounds)
            self._rounds[key] = (rounds, kernel)
        return self._rounds[key]

    def stages(self, payload: _Payload, ratio: float, host_memory: str) -> _Stages:
        key = (payload.total_bytes, ratio, host_memory)
        if key not in self._stages:
            rounds, (kernel_ms, kernel_min) = self._calibrate(payload, ratio)
            kernel_split = self._split_kernel_ms(payload, rounds)
            pinned_h2d, pinned_d2h = self._copy_ms(payload, "pinned", "H2D"), self._copy_ms(payload, "pinned", "D2H")
            h2d_duplex, d2h_duplex = self._duplex_ms(payload)
            self._stages[key] = _Stages(
                h2d_ms=self._copy_ms(payload, host_memory, "H2D")[0], kernel_ms=kernel_ms,
                d2h_ms=self._copy_ms(payload, host_memory, "D2H")[0], h2d_duplex_ms=h2d_duplex,
                d2h_duplex_ms=d2h_duplex, kernel_split_ms=kernel_split,
                # a lower bound takes each stage at its fastest sample; serial_ms uses the medians
                bound_ms=bound_ms(min(kernel_min, kernel_split), pinned_h2d[1], pinned_d2h[1], h2d_duplex,
                                  d2h_duplex, self.copy_engines),
                kernel_rounds=rounds, compute_ratio_measured=kernel_ms / pinned_h2d[0])
        return self._stages[key]

    def prepare_expected(self, payload: _Payload, rounds: int) -> str | None:
        """The expected output (the kernel applied to the input, on one stream); spot-checked against numpy."""
        stream = payload.streams[0]
        runtime.memcpyAsync(payload.expected.ptr, payload.input.ptr, payload.total_bytes,
                            runtime.memcpyDeviceToDevice, stream.ptr)
        self.kernel.launch(stream, payload.expected.ptr, payload.total_bytes // 4, rounds)
        stream.synchronize()
        words = payload.total_bytes // 4
        sample = np.random.default_rng(rounds).integers(0, words, _SPOT_CHECKS)
        inputs = payload.host_in[next(iter(payload.host_in))].array.view(np.uint32)[sample]
        outputs = cupy.asnumpy(payload.expected.array.view(cupy.uint32)[cupy.asarray(sample)])
        if not np.array_equal(outputs, mix_reference(inputs, rounds)):
            return f"kernel output differs from the host reference at {rounds} rounds"
        return None

    # -- one configuration ---------------------------------------------------------------------------------------
    def measure(self, config: Config, payload: _Payload, expected_error: str | None) -> Row:
        host_memory, launch = config["host_memory"], config["launch"]
        gated = host_memory != "pageable"
        streams = payload.streams[: config["streams"]]
        chunks = config["streams"] * config["chunks_per_stream"]
        if payload.total_bytes % 4 or payload.total_bytes // 4 < chunks:
            return {**config, **untimed_columns(gated), "chunks": chunks, "verified": False, "status": "failed",
                    "error": f"{payload.total_bytes} bytes do not split into {chunks} chunks of whole 4-byte words",
                    "_timeline": []}
        stages = self.stages(payload, config["compute_ratio"], host_memory)
        pipeline = _Pipeline(self.kernel, payload, streams, host_memory, config["allocator"], chunks,
                             stages.kernel_rounds)
        row = {**config, **untimed_columns(gated), **stages.columns(), "chunks": chunks,
               "chunk_bytes": max(size for _, size in pipeline.chunks),
               "makespan_ms": np.nan, "speedup": np.nan, "efficiency": np.nan, "concurrency": np.nan,
               "launch_host_us": self.launch_us["graph" if launch == "graph" else "precompiled"],
               "verified": False, "status": "failed", "error": "", "_timeline": []}
        if expected_error:
            row["error"] = expected_error
            return row
        if launch == "graph":
            try:
                graph = capture(streams[0], streams[1:], lambda: pipeline.enqueue(None))
            except Exception as error:  # CuPy's or numba's error for work the runtime will not capture
                row.update(status="unsupported", error=f"graph capture refused: {type(error).__name__}: {error}")
                return row
            streams = streams[:1]

            def enqueue(ops: int) -> None:
                for _ in range(ops):
                    graph.launch(streams[0])
        else:
            def enqueue(ops: int) -> None:
                for _ in range(ops):
                    pipeline.enqueue(None)
        try:
            payload.host_out[host_memory].array.view(np.uint32).fill(POISON_WORD)
            if launch == "graph":
                self.timer.run_once(enqueue, streams, gated=gated)
            else:
                self.timer.run_once(lambda ops: pipeline.enqueue(self.timeline), streams, gated=gated)
                row["_timeline"] = self.timeline.read()
                row["concurrency"] = concurrency([(op["start_ms"], op["end_ms"]) for op in row["_timeline"]])
            mismatch = _mismatch(payload, host_memory)
            if mismatch:
                row["error"] = mismatch
                return row
            row["verified"] = True
            timing = self.timer.measure(enqueue, streams, gated=gated, ops_per_batch=1)
        except MeasurementFailed as error:
            row["error"] = str(error)
            return row
        makespan = timing.summary.median_ms
        row.update(timing.columns(), status="ok", makespan_ms=makespan, speedup=stages.serial_ms / makespan,
                   efficiency=stages.bound_ms / makespan)
        return row


class _Pipeline:
    """Enqueues one run of the chunked pipeline; with a Timeline, every operation is bracketed by events."""

    def __init__(self, kernel: MixKernel, payload: _Payload, streams, host_memory: str, allocator: str,
                 chunks: int, rounds: int) -> None:
        self.kernel, self.payload, self.streams = kernel, payload, streams
        self.host_in, self.host_out = payload.host_in[host_memory].ptr, payload.host_out[host_memory].ptr
        self.in_loop_allocation = allocator == "mallocAsync"
        self.rounds = rounds
        self.chunks = split(payload.total_bytes, chunks)

    def enqueue(self, timeline: Timeline | None) -> None:
        if timeline is not None:
            timeline.start(self.streams[0])
        for chunk, (offset, size) in enumerate(self.chunks):
            index = chunk % len(self.streams)
            stream = self.streams[index]
            words = size // 4

            def op(kind: str):
                return timeline.op(stream, index, chunk, kind) if timeline is not None else nullcontext()

            if self.in_loop_allocation:
                with op("alloc"):
                    pointer = runtime.mallocAsync(size, stream.ptr)
            else:
                pointer = self.payload.work.ptr + offset
            with op("H2D"):
                runtime.memcpyAsync(pointer, self.host_in + offset, size, runtime.memcpyHostToDevice, stream.ptr)
            with op("kernel"):
                self.kernel.launch(stream, pointer, words, self.rounds)
            with op("D2H"):
                runtime.memcpyAsync(self.host_out + offset, pointer, size, runtime.memcpyDeviceToHost, stream.ptr)
            if self.in_loop_allocation:
                with op("free"):
                    runtime.freeAsync(pointer, stream.ptr)


def _mismatch(payload: _Payload, host_memory: str) -> str | None:
    """Compare the host output with the expected output, on the device."""
    runtime.memcpy(payload.scratch.ptr, payload.host_out[host_memory].ptr, payload.total_bytes,
                   runtime.memcpyHostToDevice)
    got, want = payload.scratch.array.view(cupy.uint32), payload.expected.array.view(cupy.uint32)
    differ = cupy.flatnonzero(got != want)
    if differ.size:
        unwritten = int((got[differ] == POISON_WORD).sum())
        return (f"output mismatch: {differ.size} of {got.size} words differ, {unwritten} never written "
                f"(first at word {int(differ[0])})")
    return None


def run(configs: Sequence[Config], timer: Timer) -> Iterator[Row]:
    """Rows one total size at a time (its buffers allocated once), stage times and calibration cached."""
    runner = _Runner(timer)
    try:
        costs = launch_costs_us(runner.kernel, cupy.cuda.Stream(non_blocking=True), ("precompiled", "graph"))
        runner.launch_us = {path: float(np.median(samples)) for path, samples in costs.items()}
        for total in dict.fromkeys(config["total_bytes"] for config in configs):
            group = [config for config in configs if config["total_bytes"] == total]
            kinds = ["pinned", *sorted({c["host_memory"] for c in group} - {"pinned"})]
            with _Payload(total, kinds, max(c["streams"] for c in group)) as payload:
                for ratio in dict.fromkeys(config["compute_ratio"] for config in group):
                    rounds = runner._calibrate(payload, ratio)[0]
                    expected_error = runner.prepare_expected(payload, rounds)
                    for config in (c for c in group if c["compute_ratio"] == ratio):
                        yield runner.measure(config, payload, expected_error)
    finally:
        runner.timeline.close()


@contextmanager
def verified_pipeline(total_bytes: int, streams: int, chunks_per_stream: int, compute_ratio: float,
                      timer: Timer) -> Iterator[tuple[Callable[[], None], list, _Stages]]:
    """A pinned, malloc pipeline of one configuration, calibrated and verified once as the experiment does. Yields
    the function that enqueues one run on its streams, the streams, and the stage times (for speedup and bound)."""
    runner = _Runner(timer)
    try:
        with _Payload(total_bytes, ["pinned"], streams) as payload:
            rounds = runner._calibrate(payload, compute_ratio)[0]
            problem = runner.prepare_expected(payload, rounds)
            pipeline = _Pipeline(runner.kernel, payload, payload.streams[:streams], "pinned", "malloc",
                                 streams * chunks_per_stream, rounds)
            payload.host_out["pinned"].array.view(np.uint32).fill(POISON_WORD)
            timer.run_once(lambda ops: pipeline.enqueue(None), pipeline.streams)
            problem = problem or _mismatch(payload, "pinned")
            if problem:
                raise MeasurementFailed(problem)
            yield (lambda: pipeline.enqueue(None)), pipeline.streams, runner.stages(payload, compute_ratio, "pinned")
    finally:
        runner.timeline.close()


def memory_needed(configs: Sequence[Config]) -> tuple[int, int]:
    largest = max(config["total_bytes"] for config in configs)
    kinds = len({"pinned", *(config["host_memory"] for config in configs)})
    return 6 * largest, 2 * kinds * largest  # four buffers, the random draw's int64 temporary


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Per size × compute ratio × host memory: the most efficient configuration, and one stream's speedup."""
    ok = rows[rows["status"] == "ok"]
    lines = []
    for (total, ratio, host_memory), group in ok.groupby(["total_bytes", "compute_ratio", "host_memory"],
                                                         sort=False):
        best = group.loc[group["efficiency"].idxmax()]
        one_stream = group[group["streams"] == 1]["speedup"]
        lines.append({
            "payload": format_size(int(total)), "compute ratio": f"{ratio:g}", "host memory": host_memory,
            "best configuration": f"{best['streams']} streams × {best['chunks_per_stream']} chunks, "
                                  f"{best['allocator']}, {best['launch']}",
            "makespan ms": f"{best['makespan_ms']:.2f}", "bound ms": f"{best['bound_ms']:.2f}",
            "speedup": f"{best['speedup']:.2f}", "efficiency": f"{best['efficiency']:.1%}",
            "1-stream speedup": f"{one_stream.median():.2f}" if len(one_stream) else "—",
        })
    return pd.DataFrame(lines)


EXPERIMENT = Experiment(
    name="overlap",
    description="chunked H2D → kernel → D2H pipelines over N streams, against the engine-aware bound",
    axes={
        "total_bytes": (256 << 20, 1 << 30),
        "compute_ratio": (0.25, 1.0, 4.0),
        "host_memory": ("pinned", "pageable"),
        "allocator": ("malloc", "mallocAsync"),
        "launch": ("eager", "graph"),
        "chunks_per_stream": (1, 4),
        "streams": (1, 2, 3, 4, 8, 16, 32),
    },
    quick_axes={"total_bytes": (64 << 20,), "compute_ratio": (1.0,), "streams": (1, 4, 16)},
    run=run,
    memory_needed=memory_needed,
    headline=headline,
    size_axis="total_bytes",
    stop_rule={"min_samples": 5, "time_cap_s": 0.25},
)
