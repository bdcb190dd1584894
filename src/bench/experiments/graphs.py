"""CUDA graphs with cudaMallocAsync in a loop, synchronization inside a capture, and stream order.

- ``case=malloc-loop``: a loop of (mallocAsync, copy in, kernel, copy out, freeAsync) on one stream, enqueued eagerly
  and captured once into a graph, both outputs checked; the row's ``launch`` is timed on the GPU behind the gate,
  with ``host_enqueue_ms`` beside it.
- ``case=sync-in-capture`` (``launch=graph``): cudaStreamSynchronize on a capturing stream: what the runtime says
  (``sync_error``), the capture's state, and whether the device still computes (``usable_after``).
- ``case=stream-order`` (``launch=eager``): ``iterations`` dependent chains on one stream with no synchronization
  between them; ``wrong_results`` counts the outputs that differ from the expected.

The method in full: docs/methodology.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from bench.platform.cuda import cupy, runtime
from bench.measure import kernels
from bench.experiments import Config, Cost, Experiment, Processes, Row, Sweeps
from bench.measure.memory import BufferSet, DeviceBuffer
from bench.results.schema import FLAG, FLOAT, INT, TEXT, column
from bench.timing import Context, MeasurementFailed, StopRule
from bench.platform.vocabulary import Status

CASES = ("malloc-loop", "sync-in-capture", "stream-order")
LAUNCHES = ("eager", "graph")
ITERATIONS = (10, 100)
SIZES = (1 << 20, 16 << 20)
POISON_BYTE = 0xA5
CHAIN_ROUNDS = (3, 2)
_SPOT_CHECKS = 512
METRIC = "GPU time of the whole loop"

COLUMNS = (
    column("case", TEXT, "malloc-loop, sync-in-capture or stream-order (see the module docstring)", CASES),
    column("launch", TEXT, "eager (enqueued from Python) or graph (captured, replayed)", LAUNCHES),
    column("iterations", INT, "loop iterations, or chain trials"),
    column("bytes", INT, "bytes per buffer"),
    column("graph_equals_eager", FLAG, "malloc-loop: the graph's output equalled the eager loop's"),
    column("wrong_results", INT, "output slots that differ from the host reference"),
    column("verified", FLAG, "the outputs were checked and right"),
    column("host_enqueue_ms", FLOAT, "malloc-loop: median host time to enqueue (or launch) the loop"),
    column("trials", INT, "stream-order: dependent chains run"),
    column("sync_error", TEXT, "sync-in-capture: what cudaStreamSynchronize inside the capture returned"),
    column("capture_state_after_sync", TEXT, "sync-in-capture: the capture's state after it",
           ("none", "active", "invalidated", "unknown")),
    column("end_capture_error", TEXT, "sync-in-capture: what ending the capture returned"),
    column("usable_after", FLAG, "sync-in-capture: the device still computed correctly afterwards"),
)


def rounds_of(iteration: int) -> int:
    return iteration % 4 + 1


def valid(config: Config) -> bool:
    """sync-in-capture does not depend on the loop's size (one row, a capture); stream-order runs eagerly."""
    if config["case"] == "sync-in-capture":
        return config["launch"] == "graph" and (config["iterations"], config["bytes"]) == (ITERATIONS[0], SIZES[0])
    return config["case"] == "malloc-loop" or config["launch"] == "eager"


def seconds(config: Config, rule: StopRule) -> float:
    work_s = config["iterations"] * (20e-6 + 3 * config["bytes"] / 1e12)
    # 35 ms a configuration besides its work: the H200 default sweeps at 7822f47 and before it took 0.85 and 0.97 s
    return 0.035 + ((4 + rule.min_samples) * work_s if config["case"] == "malloc-loop" else work_s)


def memory_needed(configs: Sequence[Config]) -> tuple[int, int]:
    return 3 * max(config["bytes"] * config["iterations"] for config in configs), 0


# --- measuring code --------------------------------------------------------------------------------------------

class _Buffers(BufferSet):
    """A random input and an output slot per iteration, for eager and for graph runs."""

    def __init__(self, nbytes: int, iterations: int, stream=None) -> None:
        super().__init__(streams=0 if stream is not None else 1)
        if stream is not None:
            self.streams = [stream]
        self.nbytes, self.iterations = nbytes, iterations
        with self.freed_on_failure():
            self.input = self.take(DeviceBuffer("malloc", nbytes))
            words = self.input.array.view(cupy.uint32)
            words[:] = cupy.random.RandomState(3).randint(0, 2**31, size=words.size, dtype=cupy.int64) * 2 + 1
            self.outputs = {way: self.take(DeviceBuffer("malloc", nbytes * iterations)) for way in ("eager", "graph")}
            runtime.deviceSynchronize()
            cupy.get_default_memory_pool().free_all_blocks()

    def slot(self, way: str, index: int) -> int:
        return self.outputs[way].ptr + index * self.nbytes

    def poison(self) -> None:
        for output in self.outputs.values():
            output.array.fill(POISON_BYTE)
        runtime.deviceSynchronize()

    def wrong_slots(self, way: str, rounds: Sequence[int]) -> list[int]:
        """Slots whose sampled words differ from the host reference of the input after ``rounds[i]`` rounds."""
        words = self.nbytes // 4
        sample = np.random.default_rng(4).integers(0, words, _SPOT_CHECKS)
        inputs = cupy.asnumpy(self.input.array.view(cupy.uint32)[cupy.asarray(sample)])
        slots = self.outputs[way].array.view(cupy.uint32).reshape(self.iterations, words)
        got = cupy.asnumpy(slots[:, cupy.asarray(sample)])
        return [index for index in range(self.iterations)
                if not np.array_equal(got[index], kernels.mix_reference(inputs, rounds[index]))]


def _enqueue_loop(buffers: _Buffers, kernel, way: str, stream) -> None:
    nbytes, words = buffers.nbytes, buffers.nbytes // 4
    for index in range(buffers.iterations):
        ptr = runtime.mallocAsync(nbytes, stream.ptr)
        runtime.memcpyAsync(ptr, buffers.input.ptr, nbytes, runtime.memcpyDeviceToDevice, stream.ptr)
        kernel.launch(stream, ptr, words, rounds_of(index))
        runtime.memcpyAsync(buffers.slot(way, index), ptr, nbytes, runtime.memcpyDeviceToDevice, stream.ptr)
        runtime.freeAsync(ptr, stream.ptr)


@contextmanager
def verified_malloc_loop(nbytes: int, iterations: int, kernel, stream=None) -> Iterator[tuple]:
    """The malloc-loop case, eager and captured, both outputs checked. Yields (enqueue the eager loop once,
    launch the graph once, the stream, the check's columns). MeasurementFailed if an output is wrong."""
    with _Buffers(nbytes, iterations, stream) as buffers:
        stream = buffers.streams[0]
        buffers.poison()
        _enqueue_loop(buffers, kernel, "eager", stream)
        graph = _capture(stream, lambda: _enqueue_loop(buffers, kernel, "graph", stream))
        graph.launch(stream)
        stream.synchronize()
        rounds = [rounds_of(index) for index in range(iterations)]
        same = bool(cupy.array_equal(buffers.outputs["eager"].array, buffers.outputs["graph"].array))
        wrong = {way: buffers.wrong_slots(way, rounds) for way in ("eager", "graph")}
        if not same or wrong["eager"] or wrong["graph"]:
            raise MeasurementFailed(f"outputs differ (graph equals eager: {same}; wrong slots: {wrong})")
        checked = {"graph_equals_eager": same, "wrong_results": 0, "verified": True}
        yield (lambda: _enqueue_loop(buffers, kernel, "eager", stream)), (lambda: graph.launch(stream)), stream, checked


def _malloc_loop(config: Config, context: Context, kernel) -> Row:
    with verified_malloc_loop(config["bytes"], config["iterations"], kernel) as (eager, replay, stream, checked):
        once = eager if config["launch"] == "eager" else replay
        timing = context.timer().measure(lambda ops: [once() for _ in range(ops)], [stream], metric=METRIC,
                                         ops_per_batch=1)
    return {**config, **checked, **timing.samples.columns(), "host_enqueue_ms": timing.enqueue_median_ms,
            "status": Status.OK, "error": ""}


def _capture(stream, enqueue):
    from bench.measure.capture import capture

    return capture(stream, [], enqueue)


def _sync_in_capture(config: Config, kernel) -> Row:
    stream = cupy.cuda.Stream(non_blocking=True)
    runtime.streamBeginCapture(stream.ptr, runtime.streamCaptureModeGlobal)
    sync_error = end_error = ""
    try:
        runtime.mallocAsync(config["bytes"], stream.ptr)
        try:
            runtime.streamSynchronize(stream.ptr)
        except runtime.CUDARuntimeError as error:
            sync_error = str(error)
        try:
            state = {runtime.streamCaptureStatusNone: "none", runtime.streamCaptureStatusActive: "active"}.get(
                runtime.streamIsCapturing(stream.ptr), "unknown")
        except RuntimeError:  # CuPy raises for an invalidated capture
            state = "invalidated"
    finally:  # always end the capture: a global-mode capture left open forbids most CUDA calls in the process
        try:
            runtime.graphDestroy(runtime.streamEndCapture(stream.ptr))
        except runtime.CUDARuntimeError as error:
            end_error = str(error)
    data = cupy.arange(1024, dtype=cupy.uint32)
    kernel.launch(stream, data.data.ptr, data.size, 3)
    stream.synchronize()
    usable = bool(np.array_equal(cupy.asnumpy(data), kernels.mix_reference(np.arange(1024), 3)))
    return {**config, "sync_error": sync_error, "capture_state_after_sync": state,
            "end_capture_error": end_error, "usable_after": usable, "verified": usable, "status": Status.OK,
            "error": ""}


def _stream_order(config: Config, kernel) -> Row:
    with _Buffers(config["bytes"], config["iterations"]) as buffers:
        stream, nbytes, words = buffers.streams[0], buffers.nbytes, buffers.nbytes // 4
        buffers.poison()
        for trial in range(buffers.iterations):
            ptr = runtime.mallocAsync(nbytes, stream.ptr)
            runtime.memcpyAsync(ptr, buffers.input.ptr, nbytes, runtime.memcpyDeviceToDevice, stream.ptr)
            for rounds in CHAIN_ROUNDS:
                kernel.launch(stream, ptr, words, rounds)
            runtime.memcpyAsync(buffers.slot("eager", trial), ptr, nbytes, runtime.memcpyDeviceToDevice,
                                stream.ptr)
            runtime.freeAsync(ptr, stream.ptr)
        stream.synchronize()
        wrong = buffers.wrong_slots("eager", [sum(CHAIN_ROUNDS)] * buffers.iterations)
    return {**config, "trials": config["iterations"], "wrong_results": len(wrong), "status": Status.OK, "error": ""}


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    kernel = kernels.MixKernel()
    for config in configs:
        try:
            if config["case"] == "malloc-loop":
                yield _malloc_loop(config, context, kernel)
            elif config["case"] == "sync-in-capture":
                yield _sync_in_capture(config, kernel)
            else:
                yield _stream_order(config, kernel)
        except Exception as error:  # one case's failure is its row, not the end of the others
            runtime.deviceSynchronize()
            yield {**config, "status": Status.FAILED, "error": f"{type(error).__name__}: {error}"}


EXPERIMENT = Experiment(
    name="graphs",
    description="CUDA graphs with mallocAsync in a loop vs eager, sync inside a capture, stream order",
    axes={"case": CASES, "launch": LAUNCHES, "iterations": ITERATIONS, "bytes": SIZES},
    columns=COLUMNS,
    measure=measure,
    outcome=("wrong_results", "graph_equals_eager", "sync_error", "capture_state_after_sync"),
    order=70,
    sweeps=Sweeps(quick={"iterations": (10,), "bytes": (1 << 20,)}, valid=valid),
    cost=Cost(seconds, memory_needed=memory_needed, share_s=2),
    processes=Processes(own_gpu=True),  # device memory and device-to-device copies only
)
