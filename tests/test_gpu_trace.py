"""``bench.trace``, ``tracing`` and ``assert_overlap`` on a real GPU with CUPTI (CuPy pipelines; PyTorch's run in
scripts/trace_cases.py). Skipped (with the reason) where no GPU is visible; CUPTI missing is a failure here, since the
GPU check installs it."""

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("whole_gpu_module")]  # timings: no other context meanwhile

CHUNKS, STREAMS, ROWS = 8, 4, 4096  # a chunk: 4096 × 1024 float32 = 16 MiB


@pytest.fixture(scope="module")
def pipeline():
    """A CuPy stream pipeline: pinned uploads, four matrix products (longer than a chunk's two copies), pinned
    downloads; ``overlapped`` False enqueues everything on one stream (nothing can overlap)."""
    import cupy
    import cupyx
    import numpy as np

    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(STREAMS)]
    host_in = cupyx.empty_pinned((CHUNKS, ROWS, 1024), np.float32)
    host_in[...] = np.random.default_rng(0).random(host_in.shape, dtype=np.float32)
    host_out = cupyx.empty_pinned(host_in.shape, np.float32)
    weight = cupy.asarray(np.random.default_rng(1).random((1024, 1024), dtype=np.float32) / 1024)
    inputs = [cupy.empty((ROWS, 1024), np.float32) for _ in range(STREAMS)]

    def run(overlapped: bool = True) -> None:
        for chunk in range(CHUNKS):
            index = chunk % STREAMS if overlapped else 0
            with streams[index]:
                inputs[index].set(host_in[chunk], stream=streams[index])
                result = inputs[index] @ weight @ weight @ weight @ weight
                result.get(stream=streams[index], out=host_out[chunk], blocking=False)

    run()
    run(False)
    cupy.cuda.Device().synchronize()
    expected = cupy.asnumpy(cupy.asarray(host_in[-1]) @ weight @ weight @ weight @ weight)
    assert np.allclose(host_out[-1], expected, rtol=1e-4, atol=1e-5)
    return run


def test_trace_counts_what_ran_and_finds_the_overlap(pipeline):
    import cupy

    from bench import trace

    found = trace(pipeline, runs=3)
    activities = found.records.activities
    assert {activity.device for activity in activities} == {cupy.cuda.Device().id}
    ops = [activity.op for activity in activities]
    assert ops.count("kernel") == 4 * CHUNKS and ops.count("H2D") == CHUNKS and ops.count("D2H") == CHUNKS
    assert {activity.bytes for activity in activities if activity.op in ("H2D", "D2H")} == {ROWS * 1024 * 4}
    assert {activity.host_memory for activity in activities if activity.op in ("H2D", "D2H")} == {"pinned"}
    assert len(found.runs.makespans_ms) == 3 and found.makespan_ms == sorted(found.runs.makespans_ms)[1]
    assert found.hidden is not None and found.hidden > 0.5  # four streams: most copy time runs beside a kernel
    assert 0.3 < found.efficiency <= 1.02 and found.bound_ms <= found.makespan_ms * 1.02
    assert found.whole.busy_ms["compute"] <= found.makespan_ms and not found.pageable
    assert found.overhead is not None and len(found.runs.untraced_ms) == 3


def test_one_stream_hides_nothing_and_assert_overlap_fails_naming_the_copies(pipeline):
    from bench.pytest_plugin import DidNotOverlap, assert_overlap

    with pytest.raises(DidNotOverlap, match=r"copies hidden behind kernels: \d+% .*test_gpu_trace.py:\d+"):
        with assert_overlap(min_hidden=0.5):
            pipeline(False)
    with assert_overlap(min_hidden=0.5):
        pipeline(True)


def test_a_pageable_copy_is_flagged_and_its_host_wait_names_the_line(tmp_path):
    import json

    import cupy
    import numpy as np

    from bench import tracing

    host = np.random.default_rng(2).random(4 << 20, dtype=np.float32)  # 16 MiB of pageable memory
    device = cupy.empty(host.shape, np.float32)
    device.set(host)
    cupy.cuda.Device().synchronize()
    with tracing() as traced:
        device.set(host)  # the pageable upload
        device *= 2
    result = traced.result
    (group,) = result.pageable
    assert group.op == "H2D" and group.bytes == host.nbytes and group.count == 1
    assert group.line.endswith(f"test_gpu_trace.py:{_line_of('device.set(host)  # the pageable upload')}")
    assert 0 < group.pinned_ms < group.ms and group.host_ms >= group.ms * 0.5
    assert float(device[0]) == pytest.approx(2 * host[0])
    (upload,) = [a for a in result.records.activities if a.op == "H2D"]
    assert result.maker(upload).correlation == upload.correlation  # CUPTI's record and the watched call share it
    events = json.loads(result.to_perfetto(tmp_path / "pageable.json").read_text())["traceEvents"]
    (pageable,) = [e for e in events if e["ph"] == "X" and "pageable" in e["name"]]
    (arrow,) = [e for e in events if e["ph"] == "f" and e["pid"] == pageable["pid"] and e["tid"] == pageable["tid"]]
    assert pageable["ts"] <= arrow["ts"] <= pageable["ts"] + pageable["dur"]  # a flow from the call into the copy


def _line_of(text: str) -> int:
    with open(__file__) as source:
        return next(number for number, line in enumerate(source, 1) if text in line and "_line_of" not in line)


def test_bench_s_own_synchronize_is_never_a_wait_of_the_region(pipeline):
    from bench import trace, tracing

    found = trace(pipeline, runs=2)
    with tracing(bound=False) as traced:
        pipeline()
    for result in (found, traced.result):
        calls = result.records.calls
        assert not [call for call in calls if any(frame.library == "bench" for frame in call.frames[-1:])]
        assert all("/bench/trace.py:" not in wait.line for wait in result.waits)  # bench's, not this test file


@pytest.mark.two_gpus
def test_a_region_on_two_gpus_is_traced_on_both_and_ends_on_both():
    """One process, work on GPU 0 and GPU 1 and no synchronize of GPU 1 in the region: tracing() waits for both (its
    records would be missing otherwise) and analyses each on its own."""
    import cupy

    arrays = []
    for device in (0, 1):
        with cupy.cuda.Device(device):
            arrays.append(cupy.ones((2048, 2048), cupy.float32))
            arrays[-1] @ arrays[-1]  # warm up
            cupy.cuda.Device(device).synchronize()
    from bench import tracing

    with cupy.cuda.Device(0), tracing(bound=False) as traced:
        for device, array in zip((0, 1), arrays):
            with cupy.cuda.Device(device):
                for _ in range(4):
                    array @ array
    found = traced.result
    assert sorted(found.gpus) == [0, 1]
    activities = found.records.activities
    assert [sum(a.op == "kernel" and a.device == device for a in activities) for device in (0, 1)] == [4, 4]
    gpu0, gpu1 = found.gpus[0], found.gpus[1]
    assert found.whole.busy_ms["compute"] == pytest.approx(
        (gpu0.overlap.busy_ns["compute"] + gpu1.overlap.busy_ns["compute"]) / 1e6)
    assert found.makespan_ms >= max(gpu0.makespan_ms, gpu1.makespan_ms) and found.whole.comm_ms == 0
