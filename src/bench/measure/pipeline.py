"""The chunked copy/compute pipeline: a payload split into chunks over N streams, each chunk H2D → kernel → D2H on
its stream (the ``overlap`` experiment's, whose method docs/methodology.md tells; the ``connections`` experiment runs
it too). The payload's buffers, the stage times of the whole payload alone and the engine-aware bound on the
makespan, the kernel's calibration to a compute ratio, the pipeline's enqueueing (with a timeline, every operation
bracketed by events) and capture into a graph, and the check of its output."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass

import numpy as np

from bench.platform.cuda import cupy, runtime
from bench.measure import kernels
from bench.measure.copies import differing
from bench.measure.memory import BufferSet, DeviceBuffer, HostBuffer
from bench.timing import Context, MeasurementFailed, Timeline

POISON_WORD = 0xA5A5A5A5
SPOT_CHECKS = 4096
CALIBRATION_ROUNDS = (16, 256)
KERNEL_SPLITS = (2, 4, 8)  # stream counts for the split kernel stage, four chunks per stream
# The stop rule (changes to the default) of the copies in the bound, each taken at its fastest sample. Both copy
# directions at once vary from sample to sample with how they share the link: over blocks of consecutive samples, the
# fastest of 10 spread by 7.6-62% on 7 H100s and H200s, the fastest of 300 by 1.4-9.4% (scripts/copy_rate_drift.py,
# docs/findings/2026-11-24-trace.md).
BOUND_RULE = {"min_samples": 300, "time_cap_s": 2.0}


def bound_ms(kernel_ms: float, h2d_ms: float, d2h_ms: float, h2d_duplex_ms: float, d2h_duplex_ms: float,
             copy_engines: int) -> float:
    """The engine-aware lower bound on the pipeline's makespan (docs/methodology.md, overlap)."""
    if copy_engines >= 2:
        return max(kernel_ms, h2d_duplex_ms, d2h_duplex_ms)
    return max(kernel_ms, h2d_ms + d2h_ms)


def split(total_bytes: int, chunks: int) -> list[tuple[int, int]]:
    """(offset, bytes) of ``chunks`` pieces of whole 4-byte words covering ``total_bytes``, sizes within a word."""
    words = total_bytes // 4
    edges = [index * words // chunks * 4 for index in range(chunks + 1)]
    return [(start, end - start) for start, end in zip(edges, edges[1:])]


def rounds_for(target_ms: float, low: tuple[int, float], high: tuple[int, float]) -> int:
    """Kernel rounds that should take ``target_ms``, from two (rounds, ms) measurements (time is linear in rounds)."""
    (rounds_low, ms_low), (rounds_high, ms_high) = low, high
    per_round = (ms_high - ms_low) / (rounds_high - rounds_low)
    if per_round <= 0:
        raise ValueError("kernel time did not grow with its rounds")
    return max(1, round(rounds_low + (target_ms - ms_low) / per_round))


@dataclass(frozen=True)
class Stages:
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


class Payload(BufferSet):
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
            runtime.deviceSynchronize()
            cupy.get_default_memory_pool().free_all_blocks()  # the random draw's temporary
            self.host_in = {kind: self.take(HostBuffer(kind, total_bytes)) for kind in host_kinds}
            self.host_out = {kind: self.take(HostBuffer(kind, total_bytes)) for kind in host_kinds}
            for buffer in self.host_in.values():
                runtime.memcpy(buffer.ptr, self.input.ptr, total_bytes, runtime.memcpyDeviceToHost)
            for kind in host_kinds:  # untimed passes over fresh memory: first DMA to new pages can be slower
                for _ in range(2):
                    runtime.memcpy(self.work.ptr, self.host_in[kind].ptr, total_bytes, runtime.memcpyHostToDevice)
                    runtime.memcpy(self.host_out[kind].ptr, self.work.ptr, total_bytes, runtime.memcpyDeviceToHost)

    def poison(self, host_memory: str) -> None:
        """Fill ``host_memory``'s host output with POISON_WORD, so that a word a run never writes shows: a copy from
        the scratch buffer, poisoned on the device (a CPU fill of 256 MiB took 29 ms on an H100's host, the copy
        from pinned memory 5)."""
        self.scratch.array.view(cupy.uint32).fill(POISON_WORD)
        runtime.deviceSynchronize()  # the fill ran on CuPy's current stream, which the copy need not wait for
        runtime.memcpy(self.host_out[host_memory].ptr, self.scratch.ptr, self.total_bytes, runtime.memcpyDeviceToHost)


class Runner:
    """Everything one run of the experiment shares: the kernel, the timers, the calibrations and stage times."""

    def __init__(self, context: Context) -> None:
        self.timer = context.timer()
        self.stage_timer = context.timer("stage")  # stage times feed every row's bound: a stricter rule
        self.bound_timer = context.timer("bound")  # the copies in the bound (BOUND_RULE)
        self.copy_engines = runtime.getDeviceProperties(runtime.getDevice())["asyncEngineCount"]
        self.kernel = kernels.MixKernel()
        self.timeline = Timeline()
        self._stages: dict[tuple, Stages] = {}
        self._copies: dict[tuple, tuple[float, float]] = {}  # (median, fastest) ms; for "duplex", (H2D, D2H)
        self._rounds: dict[tuple, tuple[int, tuple[float, float]]] = {}
        self.launch_us: dict[str, float] = {}

    def _stage(self, enqueue: Callable[[int], None], streams, gated: bool = True, bound: bool = False):
        """One stage timed; ``bound``: a copy the bound takes at its fastest, under the bound's rule."""
        timer = self.bound_timer if bound else self.stage_timer
        return timer.measure(enqueue, streams, metric="GPU time of one stage over the whole payload", gated=gated,
                             ops_per_batch=1)

    # -- stage measurements (whole payload, one stream) -----------------------------------------------------------
    def _copy_ms(self, payload: Payload, host_memory: str, direction: str) -> tuple[float, float]:
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

            pinned = host_memory != "pageable"  # with one copy engine, the pinned copies one way are in the bound
            timing = self._stage(enqueue, [stream], gated=pinned, bound=pinned and self.copy_engines < 2)
            self._copies[key] = (timing.median_ms, timing.fastest_ms)
        return self._copies[key]

    def _duplex_ms(self, payload: Payload) -> tuple[float, float]:
        """Fastest H2D and D2H times of the whole payload while both directions copy at once (pinned)."""
        key = (payload.total_bytes, "pinned", "duplex")
        if key not in self._copies:
            up, down, total = payload.streams[0], payload.streams[1], payload.total_bytes
            host_in, host_out = payload.host_in["pinned"].ptr, payload.host_out["pinned"].ptr

            def enqueue(ops: int) -> None:
                for _ in range(ops):
                    runtime.memcpyAsync(payload.work.ptr, host_in, total, runtime.memcpyHostToDevice, up.ptr)
                    runtime.memcpyAsync(host_out, payload.input.ptr, total, runtime.memcpyDeviceToHost, down.ptr)

            timing = self._stage(enqueue, [up, down], bound=self.copy_engines >= 2)
            self._copies[key] = (timing.stream_fastest_ms(0), timing.stream_fastest_ms(1))
        return self._copies[key]

    def _kernel_ms(self, payload: Payload, rounds: int) -> tuple[float, float]:
        """Median and fastest time of the kernel over the whole payload."""
        stream, words = payload.streams[0], payload.total_bytes // 4

        def enqueue(ops: int) -> None:
            for _ in range(ops):
                self.kernel.launch(stream, payload.work.ptr, words, rounds)

        timing = self._stage(enqueue, [stream])
        return timing.median_ms, timing.fastest_ms

    def _split_kernel_ms(self, payload: Payload, rounds: int) -> float:
        """Fastest time of the whole payload's kernel work split into four chunks per stream, over each of
        ``KERNEL_SPLITS`` streams (as many as the payload has), kernels only."""
        fastest = np.inf
        for stream_count in (count for count in KERNEL_SPLITS if count <= len(payload.streams)):
            streams = payload.streams[:stream_count]
            chunks = split(payload.total_bytes, 4 * stream_count)

            def enqueue(ops: int) -> None:
                for _ in range(ops):
                    for chunk, (offset, size) in enumerate(chunks):
                        self.kernel.launch(streams[chunk % stream_count], payload.work.ptr + offset, size // 4,
                                           rounds)

            fastest = min(fastest, self._stage(enqueue, streams).fastest_ms)
        return fastest

    def calibrate(self, payload: Payload, ratio: float) -> tuple[int, tuple[float, float]]:
        """Rounds per element for which the whole-payload kernel takes ``ratio`` × the pinned upload time, and the
        kernel's (median, fastest) time at those rounds."""
        key = (payload.total_bytes, ratio)
        if key not in self._rounds:
            target = ratio * self._copy_ms(payload, "pinned", "H2D")[0]
            low, high = ((rounds, self._kernel_ms(payload, rounds)[0]) for rounds in CALIBRATION_ROUNDS)
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

    def stages(self, payload: Payload, ratio: float, host_memory: str) -> Stages:
        key = (payload.total_bytes, ratio, host_memory)
        if key not in self._stages:
            rounds, (kernel_ms, kernel_min) = self.calibrate(payload, ratio)
            kernel_split = self._split_kernel_ms(payload, rounds)
            pinned_h2d, pinned_d2h = self._copy_ms(payload, "pinned", "H2D"), self._copy_ms(payload, "pinned", "D2H")
            h2d_duplex, d2h_duplex = self._duplex_ms(payload)
            self._stages[key] = Stages(
                h2d_ms=self._copy_ms(payload, host_memory, "H2D")[0], kernel_ms=kernel_ms,
                d2h_ms=self._copy_ms(payload, host_memory, "D2H")[0], h2d_duplex_ms=h2d_duplex,
                d2h_duplex_ms=d2h_duplex, kernel_split_ms=kernel_split,
                # a lower bound takes each stage at its fastest sample; serial_ms uses the medians
                bound_ms=bound_ms(min(kernel_min, kernel_split), pinned_h2d[1], pinned_d2h[1], h2d_duplex,
                                  d2h_duplex, self.copy_engines),
                kernel_rounds=rounds, compute_ratio_measured=kernel_ms / pinned_h2d[0])
        return self._stages[key]

    def remeasure_stages(self) -> None:
        """Forget the copy and stage times measured so far (the kernel's calibration and its whole-payload times
        stay): the next row measures the copies and the split kernels again, and so its bound."""
        self._stages.clear()
        self._copies.clear()

    def prepare_expected(self, payload: Payload, rounds: int) -> str | None:
        """The expected output (the kernel applied to the input, on one stream); spot-checked against numpy."""
        stream = payload.streams[0]
        runtime.memcpyAsync(payload.expected.ptr, payload.input.ptr, payload.total_bytes,
                            runtime.memcpyDeviceToDevice, stream.ptr)
        self.kernel.launch(stream, payload.expected.ptr, payload.total_bytes // 4, rounds)
        stream.synchronize()
        words = payload.total_bytes // 4
        sample = np.random.default_rng(rounds).integers(0, words, SPOT_CHECKS)
        inputs = payload.host_in[next(iter(payload.host_in))].array.view(np.uint32)[sample]
        outputs = cupy.asnumpy(payload.expected.array.view(cupy.uint32)[cupy.asarray(sample)])
        if not np.array_equal(outputs, kernels.mix_reference(inputs, rounds)):
            return f"kernel output differs from the host reference at {rounds} rounds"
        return None


def capture_pipeline(streams, pipeline: Pipeline):
    """The pipeline captured into a CUDA graph across its streams."""
    from bench.measure.capture import capture

    return capture(streams[0], streams[1:], lambda: pipeline.enqueue(None))


class Pipeline:
    """Enqueues one run of the chunked pipeline; with a Timeline, every operation is bracketed by events."""

    def __init__(self, kernel, payload: Payload, streams, host_memory: str, allocator: str, chunks: int,
                 rounds: int) -> None:
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
                if timeline is None:
                    return nullcontext()
                return timeline.op(stream, {"stream": index, "chunk": chunk, "op": kind})

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


def mismatch(payload: Payload, host_memory: str) -> str | None:
    """Compare the host output with the expected output, on the device."""
    runtime.memcpy(payload.scratch.ptr, payload.host_out[host_memory].ptr, payload.total_bytes,
                   runtime.memcpyHostToDevice)
    got, want = payload.scratch.array.view(cupy.uint32), payload.expected.array.view(cupy.uint32)
    differ = differing(got, want)
    if differ is not None:
        unwritten = int((got[differ] == POISON_WORD).sum())
        return (f"output mismatch: {differ.size} of {got.size} words differ, {unwritten} never written "
                f"(first at word {int(differ[0])})")
    return None


@contextmanager
def verified_pipeline(total_bytes: int, streams: int, chunks_per_stream: int, compute_ratio: float,
                      context: Context) -> Iterator[tuple[Callable[[], None], list, Stages]]:
    """A pinned, malloc pipeline of one configuration, calibrated and verified once as the experiment does. Yields
    the function that enqueues one run on its streams, the streams, and the stage times (for speedup and bound)."""
    runner = Runner(context)
    try:
        with Payload(total_bytes, ["pinned"], streams) as payload:
            rounds = runner.calibrate(payload, compute_ratio)[0]
            problem = runner.prepare_expected(payload, rounds)
            pipeline = Pipeline(runner.kernel, payload, payload.streams[:streams], "pinned", "malloc",
                                streams * chunks_per_stream, rounds)
            payload.poison("pinned")
            runner.timer.run_once(lambda ops: pipeline.enqueue(None), pipeline.streams)
            problem = problem or mismatch(payload, "pinned")
            if problem:
                raise MeasurementFailed(problem)
            yield (lambda: pipeline.enqueue(None)), pipeline.streams, runner.stages(payload, compute_ratio, "pinned")
    finally:
        runner.timeline.close()
