"""The real thing, at small sizes. Skipped (with the reason) where no GPU is visible."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from gpu_rows import quick_context, rows_of

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[1]
SRC = str(ROOT / "src")
TESTS = str(ROOT / "tests")


@pytest.fixture(scope="module")
def cupy():
    import cupy

    return cupy


def _finished(runtime, event) -> bool:
    """cudaEventQuery as a bool, whether this CuPy returns cudaErrorNotReady or raises it."""
    try:
        return runtime.eventQuery(event) == 0
    except runtime.CUDARuntimeError as error:
        if "NotReady" in str(error):
            return False
        raise


# --- timing core ---------------------------------------------------------------------------------------------

def test_gate_holds_work_until_opened(cupy):
    from cupy.cuda import runtime

    from bench.timing import Gate

    stream = cupy.cuda.Stream(non_blocking=True)
    src, dst = cupy.arange(1 << 20, dtype=cupy.uint8), cupy.zeros(1 << 20, dtype=cupy.uint8)
    done = runtime.eventCreate()
    gate = Gate(timeout_s=5.0)
    gate.close(stream)
    runtime.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes, runtime.memcpyDeviceToDevice, stream.ptr)
    runtime.eventRecord(done, stream.ptr)
    time.sleep(0.2)
    assert not _finished(runtime, done)  # still held behind the gate
    gate.open()
    runtime.eventSynchronize(done)
    gate.check()
    assert bool((dst == src).all())
    runtime.eventDestroy(done)


def test_gate_watchdog_expires(cupy):
    """A gate nobody opens holds its stream until its watchdog gives up, and says so. How long it held is read on the
    GPU's clock, from an event just before it to one just after it, all three queued behind a gate the host opens
    once they are (no stall of the host falls between the two events): at least its timeout, and less than a gate of
    four times the timeout holds."""
    from cupy.cuda import runtime

    from bench.timing import Gate, MeasurementFailed

    stream = cupy.cuda.Stream(non_blocking=True)

    def held_ms(timeout_s: float) -> float:
        queued, gate = Gate(timeout_s=60.0), Gate(timeout_s=timeout_s)
        before, after = runtime.eventCreate(), runtime.eventCreate()
        try:
            queued.close(stream)
            runtime.eventRecord(before, stream.ptr)
            gate.close(stream)
            runtime.eventRecord(after, stream.ptr)
            queued.open()
            stream.synchronize()  # nobody opens the gate: only its watchdog lets the stream go
            queued.check()
            assert gate.expired()
            gate.open()
            with pytest.raises(MeasurementFailed, match="watchdog expired"):
                gate.check()
            return runtime.eventElapsedTime(before, after)
        finally:
            runtime.eventDestroy(before)
            runtime.eventDestroy(after)

    short, long = held_ms(0.2), held_ms(0.8)
    assert 0.9 * 200 < short < long and 0.9 * 800 < long, (short, long)  # the watchdog counts the timeout it is given


def test_timer_gated_and_ungated_agree_on_a_long_copy(cupy, whole_gpu):
    """A 64 MiB device copy lasts long enough that how Python enqueues it cannot matter: both ways agree, within a
    quarter (how closely is a benchmark's figure: other GPU tests run beside this one)."""
    from cupy.cuda import runtime

    from bench.timing import StopRule, Timer

    src, dst = cupy.ones(64 << 20, cupy.uint8), cupy.empty(64 << 20, cupy.uint8)
    stream = cupy.cuda.Stream(non_blocking=True)

    def enqueue(ops):
        for _ in range(ops):
            runtime.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes, runtime.memcpyDeviceToDevice, stream.ptr)

    timer = Timer(StopRule(min_samples=10, time_cap_s=0.5))
    gated = timer.measure(enqueue, [stream], metric="copy")
    ungated = timer.measure(enqueue, [stream], metric="copy", gated=False)
    assert gated.samples.gated and ungated.samples.gated is False
    assert len(gated.samples.values) >= 10
    assert 0.8 < gated.median_ms / ungated.median_ms < 1.25, (gated.median_ms, ungated.median_ms)
    assert 64 * 2**20 / (gated.median_ms * 1e6) > 200  # GB/s: device memory, not PCIe
    assert all(wall >= gpu for wall, gpu in zip(gated.wall_ms, gated.samples.values))


def test_spin_watch_tells_waiting_from_returning(cupy):
    from bench.platform.cuda import runtime
    from bench.timing import SpinWatch

    watch = SpinWatch()
    stream = cupy.cuda.Stream(non_blocking=True)
    # orderings and generous ratios, never a millisecond threshold: a loaded machine moves those (14.96 against 15)
    returned = watch.call_during_spin(stream, 20.0, lambda: None)
    assert returned.spin_running and returned.host_ms < 0.1 * returned.spin_left_ms and returned.spin_left_ms <= 20
    waited = watch.call_during_spin(stream, 20.0, runtime.deviceSynchronize)
    assert not waited.spin_running and waited.host_ms > 0.5 * waited.spin_left_ms
    pair = watch.call_between_spins(stream, cupy.cuda.Stream(non_blocking=True), 20.0, lambda: None)
    assert pair.overlap_ms > 0.5 * pair.makespan_ms and not pair.host_waited  # serialized spins overlap by nothing


# --- memory -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["pinned", "pageable", "registered"])
def test_host_memory_round_trip(cupy, kind):
    from cupy.cuda import runtime

    from bench.measure.memory import DeviceBuffer, HostBuffer

    nbytes = 3 << 20
    pattern = np.random.default_rng(1).integers(0, 256, nbytes, dtype=np.uint8)
    with HostBuffer(kind, nbytes) as src, HostBuffer(kind, nbytes) as dst, DeviceBuffer("malloc", nbytes) as dev:
        src.array[:] = pattern
        dst.array[:] = 0
        runtime.memcpy(dev.ptr, src.ptr, nbytes, runtime.memcpyHostToDevice)
        runtime.memcpy(dst.ptr, dev.ptr, nbytes, runtime.memcpyDeviceToHost)
        assert np.array_equal(dst.array, pattern)
    assert src.array is None and dst.array is None


def test_device_allocators(cupy):
    from bench.measure.memory import DeviceBuffer

    stream = cupy.cuda.Stream(non_blocking=True)
    free_before, _ = cupy.cuda.runtime.memGetInfo()
    with DeviceBuffer("malloc", 256 << 20) as buffer:
        buffer.array.fill(7)
        assert int(buffer.array[-1]) == 7
        assert cupy.cuda.runtime.memGetInfo()[0] <= free_before - (256 << 20)
    assert buffer.ptr == 0
    with DeviceBuffer("mallocAsync", 1 << 20, stream) as buffer:
        with stream:
            buffer.array.fill(3)
            assert int(buffer.array.sum()) == 3 << 20
    stream.synchronize()
    with pytest.raises(ValueError, match="needs a stream"):
        DeviceBuffer("mallocAsync", 1024)


# --- experiments --------------------------------------------------------------------------------------------

def test_verification_catches_a_wrong_copy(cupy):
    from bench.measure.copies import POISON, CopyBuffers, mismatch

    with CopyBuffers("pinned", 1 << 20) as buffers:
        (h2d,) = buffers.copies("H2D")
        assert mismatch([h2d], 1 << 20) is None
        buffers.host_src.array[12345] ^= 0xFF  # the source no longer matches the reference
        message = mismatch([h2d], 1 << 20)
        assert message == "data mismatch after copy: 1 of 1048576 bytes differ (first at offset 12345)"
        # a copy shorter than the verified range leaves poison behind, which the check must see
        (d2d,) = buffers.copies("D2D")
        d2d.dst[: 1 << 20].fill(POISON)
        d2d.enqueue(1 << 19)
        d2d.stream.synchronize()
        assert int((d2d.dst[: 1 << 20] == POISON).sum()) == 1 << 19


def test_bandwidth_experiment_small(cupy):
    from bench.sweep import plan

    (item,) = plan.make(["bandwidth"], sizes=[4096, 16 << 20])
    rows = rows_of("bandwidth", item.configs)
    assert len(rows) == 20 and (rows["status"] == "ok").all(), rows[rows["status"] != "ok"]["error"].tolist()
    assert rows["verified"].all() and (rows["n_samples"] >= 5).all()
    assert (rows["gated"] == (rows["host_memory"] != "pageable")).all()
    assert (rows["unit"] == "ms").all() and (rows["clock"] == "gpu").all()
    big = rows[rows["bytes"] == 16 << 20].set_index(["direction", "host_memory"])["gbps"]
    # Plausibility on any PCIe Gen3+ x16 GPU; on the H200 pinned is ~55 GB/s.
    assert 8 < big["H2D", "pinned"] < 70 and 8 < big["D2H", "pinned"] < 70
    assert big["D2D", "device"] > 200
    assert big["BIDIR", "pinned"] > max(big["H2D", "pinned"], big["D2H", "pinned"])
    bidir = rows[(rows["direction"] == "BIDIR") & (rows["bytes"] == 16 << 20) & (rows["host_memory"] == "pinned")]
    assert bidir["h2d_gbps"].iloc[0] > 8 and bidir["d2h_gbps"].iloc[0] > 8


def test_env_collect(cupy):
    from bench.platform import env

    environment = env.collect(0)
    gpu, link = environment.device, environment.link
    assert gpu.gpu_name and gpu.sm_count > 0 and gpu.async_engine_count >= 1 and gpu.l2_cache_bytes > 0
    assert environment.cuda.cuda_runtime.count(".") == 1 and environment.cuda.driver_version != "unknown"
    assert link.pcie_width_max > 0 and link.pcie_gen_max > 0


def test_launch_paths_cost_what_they_should(cupy):
    rows = rows_of("launch", [{"path": p} for p in ("dispatcher", "precompiled", "graph")])
    cost = rows.set_index("path")["median"]
    # A graph launch costs a hundredth of either host launch in every committed run; the dispatcher and a
    # precompiled kernel lie within about 20% of each other, which a quick context's samples can reorder: the sweep
    # reports their order, the test holds what noise cannot flip.
    assert 0 < 10 * cost["graph"] < min(cost["precompiled"], cost["dispatcher"]), cost.to_dict()
    assert (rows["unit"] == "us").all() and (rows["clock"] == "host").all()


def test_overlap_small_pipeline(cupy, whole_gpu):
    from bench.sweep import plan
    from bench.experiments import registry

    overlap = registry()["overlap"]
    axes = {**overlap.axes, "total_bytes": (64 << 20,), "compute_ratio": (1.0,), "streams": (1, 4)}
    configs = plan.expand(axes)
    frame = rows_of("overlap", configs, quick_context(min_samples=3))
    assert len(frame) == len(configs) == 32
    pinned = frame[frame["host_memory"] == "pinned"]
    assert (pinned["status"] == "ok").all() and pinned["verified"].all(), pinned["error"].tolist()
    assert pinned["gated"].all() and not frame[frame["host_memory"] == "pageable"]["gated"].any()
    # pageable + graph is either captured and verified, or an unsupported row with the runtime's words
    for _, row in frame[frame["status"] != "ok"].iterrows():
        assert row["status"] == "unsupported" and row["launch"] == "graph" and "capture" in row["error"]
    ok = frame[frame["status"] == "ok"]
    assert ok["verified"].all() and (ok["kernel_rounds"] >= 1).all()
    assert ((ok["compute_ratio_measured"] - 1.0).abs() < 0.15).all(), ok["compute_ratio_measured"].tolist()
    one = pinned[(pinned["streams"] == 1) & (pinned["launch"] == "eager") & (pinned["allocator"] == "malloc")]
    assert ((one["speedup"] > 0.8) & (one["speedup"] < 1.2)).all(), one["speedup"].tolist()
    assert (ok["efficiency"] < 1.03).all(), ok["efficiency"].max()  # the bound is a lower bound on the makespan
    assert (ok["kernel_split_ms"] > 0).all() and (ok["makespan_ms"] == ok["median"]).all()
    best = pinned[(pinned["streams"] == 4) & (pinned["chunks_per_stream"] == 4)]["efficiency"].max()
    assert best > 0.5, best  # without overlap, three equal stages give about 1/3
    for _, row in ok[ok["launch"] == "eager"].iterrows():
        kinds = {op["op"] for op in row["_timeline"]}
        assert {"H2D", "kernel", "D2H"} <= kinds and len(row["_timeline"]) >= 3 * row["chunks"]
        assert ("alloc" in kinds) == (row["allocator"] == "mallocAsync")
        assert 0 <= row["concurrency"] <= 1


@pytest.mark.parametrize("call, placement, spin_stream, verdict", [
    ("cudaDeviceSynchronize", "none", "non-blocking", "waits-for-device"),  # a control that must wait
    ("cudaStreamSynchronize", "same", "non-blocking", "waits-for-device"),
    ("cudaStreamSynchronize", "other", "non-blocking", "returns"),  # an idle stream: must not wait
    ("cudaMemcpyAsync H2D pinned 4 KiB", "other", "blocking", "returns"),
    ("kernel launch", "legacy", "blocking", "returns"),
])
def test_blocking_controls(cupy, call, placement, spin_stream, verdict):
    rows = rows_of("blocking", [{"call": call, "placement": placement, "spin_stream": spin_stream}])
    row = rows.iloc[0]
    assert row["status"] == "ok", row["error"]
    assert row["verdict"] == verdict and row["stable"] and len(row["samples"]) >= 3, row.to_dict()
    if verdict == "waits-for-device":
        assert row["host_ms"] > 0.5 * row["spin_left_ms"]


def test_serialization_controls(cupy):
    configs = [{"call": "(nothing)", "placement": "none", "spin_stream": "non-blocking"},
               {"call": "cudaDeviceSynchronize", "placement": "none", "spin_stream": "non-blocking"},
               {"call": "kernel launch", "placement": "legacy", "spin_stream": "blocking"},
               {"call": "kernel launch", "placement": "legacy", "spin_stream": "non-blocking"}]
    frame = rows_of("serialization", configs)
    assert list(frame["status"]) == ["ok"] * 4, list(frame["error"])
    nothing, device_sync, null_blocking, null_non_blocking = (row for _, row in frame.iterrows())
    assert nothing["verdict"] == "overlaps" and nothing["overlap_ms"] > 0.75 * nothing["spin_ms"]
    assert device_sync["verdict"] == "serializes" and device_sync["host_waited"]
    assert null_blocking["verdict"] == "serializes" and not null_blocking["host_waited"]  # NULL stream, on the GPU
    assert null_non_blocking["verdict"] == "overlaps"


def test_graphs_cases(cupy):
    configs = [{"case": "malloc-loop", "launch": way, "iterations": 10, "bytes": 1 << 20}
               for way in ("eager", "graph")]
    configs += [{"case": "sync-in-capture", "launch": "graph", "iterations": 10, "bytes": 1 << 20},
                {"case": "stream-order", "launch": "eager", "iterations": 10, "bytes": 1 << 20}]
    frame = rows_of("graphs", configs)
    assert (frame["status"] == "ok").all(), list(frame["error"])
    loops = frame[frame["case"] == "malloc-loop"].set_index("launch")
    assert loops["verified"].all() and loops["graph_equals_eager"].all() and (loops["median"] > 0).all()
    assert loops.loc["graph", "host_enqueue_ms"] < loops.loc["eager", "host_enqueue_ms"]
    assert frame[frame["case"] == "stream-order"]["wrong_results"].iloc[0] == 0
    capture = frame[frame["case"] == "sync-in-capture"].iloc[0]
    assert capture["sync_error"] and capture["usable_after"], capture.to_dict()


def test_alloc_small_and_threshold_restored(cupy):
    from cupy.cuda import runtime

    configs = [{"api": api, "release_threshold": threshold, "pattern": pattern, "bytes": 1 << 20}
               for api, threshold in (("cudaMalloc", "none"), ("cudaMallocAsync", "0"), ("cudaMallocAsync", "max"))
               for pattern in ("single", "loop")]
    configs.append({"api": "cudaHostRegister", "release_threshold": "none", "pattern": "single", "bytes": 1 << 20})
    frame = rows_of("alloc", configs)
    assert (frame["status"] == "ok").all(), list(frame["error"])
    for _, row in frame.iterrows():
        if row["pattern"] == "single":
            assert 0 < row["alloc_us"] < row["median"]
        else:
            assert row["gpu_us_per_iteration"] > 0 and row["median"] > 0
    pool = runtime.deviceGetDefaultMemPool(0)
    assert runtime.memPoolGetAttribute(pool, runtime.cudaMemPoolAttrReleaseThreshold) == 0


# --- the command line and the runner --------------------------------------------------------------------------

def _bench(*args, cwd, timeout=300, **environment):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]), **environment}
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _results(directory: Path) -> Path:
    (path,) = [p for p in directory.glob("*.parquet")]
    return path


def test_cli_quick_sweep_then_plot(tmp_path):
    result = _bench("sweep", "--quick", "--sizes", "64K,4M", "--experiments", "bandwidth,overlap",
                    "--axis", "host_memory=pinned", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "plan: " in result.stdout and "wall time of the experiments" in result.stdout
    path = _results(tmp_path / "results")
    rows = pd.read_parquet(path)  # plain pandas: integers stay integers
    assert str(rows["bytes"].dtype) == "Int64" and str(rows["streams"].dtype) == "Int64"
    assert (rows["status"] == "ok").all(), rows[rows["status"] != "ok"]["error"].tolist()
    # --sizes replaces each experiment's size axis: overlap's payload too (64 KiB and 4 MiB, 9 pipelines each: 2
    # allocators × 2 launch ways × 2 chunk counts on 4 streams, and the one-stream baseline)
    assert len(rows[rows["experiment"] == "bandwidth"]) == 6 and len(rows[rows["experiment"] == "overlap"]) == 18
    timeline = pd.read_parquet(tmp_path / "results" / "_timeline" / path.name)
    assert {"stream", "chunk", "op", "start_ms", "end_ms", "streams", "run_id"} <= set(timeline.columns)
    assert len(pd.read_parquet(tmp_path / "results")) == len(rows)  # the directory reads as the main table alone
    for column in ("samples", "median", "unit", "gbps", "verified", "gpu_name", "driver_version", "cuda_runtime",
                   "pcie_gen", "gpu_uuid", "hostname", "git_commit", "wall_s", "sm_clock_seen_mhz"):
        assert rows[column].notna().any(), column
    plotted = _bench("plot", cwd=tmp_path)
    assert plotted.returncode == 0, plotted.stderr
    for name in ("bandwidth", "overlap_scaling-64KiB", "overlap_heatmap-4MiB", "overlap_timeline-4MiB"):
        assert (tmp_path / "plots" / "local" / f"{name}.png").stat().st_size > 10_000, name  # one set per payload
    again = _bench("sweep", "--quick", "--experiments", "launch", "--out", str(path), cwd=tmp_path)
    assert again.returncode == 2 and "already exists" in again.stderr  # never overwrites a results file
    assert len(pd.read_parquet(path)) == len(rows)


def test_fork_server_prepares_without_touching_cuda():
    """Experiment processes come from a fork server that built numba-cuda's target once (bench.sweep.preload) but never
    initialised the CUDA driver: each process creates its own context and runs kernels."""
    from gpu_rows import forked_state

    from bench.sweep.processes import _processes

    with _processes().Pool(1) as pool:
        state = pool.apply(forked_state)
    assert state == {"driver untouched": True, "target built": True, "gate ran": True}


def test_cli_size_beyond_device_memory(tmp_path):
    result = _bench("sweep", "--sizes", "512G", cwd=tmp_path)  # under the 1 TiB a size may be, over any GPU's memory
    assert result.returncode == 2 and "of device memory" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "results").exists()


def test_cli_bad_device(tmp_path):
    result = _bench("sweep", "--device", "99", cwd=tmp_path)
    assert result.returncode == 2 and "--device 99" in result.stderr


def test_cli_claims_runs_what_the_results_lack(tmp_path):
    result = _bench("sweep", "--quick", "--experiments", "alloc", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    given = _results(tmp_path / "results")
    claimed = _bench("claims", str(given), "--measure", "--out", "measured", cwd=tmp_path)
    assert claimed.returncode == 0, claimed.stderr
    assert "measuring what the results lack: blocking, graphs, serialization, library" in claimed.stdout
    measured = pd.read_parquet(_results(tmp_path / "measured"))
    assert set(measured["experiment"]) == {"blocking", "serialization", "graphs", "library"}
    assert "NOT MEASURED" not in claimed.stdout and "wrong results" in claimed.stdout


def test_benchmark_median_agrees_with_the_sweep(cupy, tmp_path, whole_gpu):
    """pytest-benchmark (GPU clock) and the sweep measure the same thing, a verified 16 MiB pinned H2D copy: their
    medians within a quarter of each other, where a pageable copy, another size or another unit would be twice as far
    or more. How close they are is a benchmark's figure, not a test's: beside the parallel GPU suite an H100's were
    7.7% apart (2026-11-27), and a copy's time depends on the host's link."""
    import json

    from bench.timing import Context

    report = tmp_path / "benchmark.json"
    env = {name: value for name, value in os.environ.items()  # pytest-benchmark measures nothing in an xdist
           if not name.startswith("PYTEST_XDIST_")}  # worker, and it takes this test's worker's variables for its own
    env["PYTHONPATH"] = os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, "-m", "pytest", "--benchmark-only", "-p", "no:cacheprovider", "-q",
                             "-k", "h2d-pinned-16MiB", f"--benchmark-json={report}"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
    (entry,) = json.loads(report.read_text())["benchmarks"]
    benchmark_ms = entry["stats"]["median"] * 1e3
    assert entry["extra_info"]["gbps"] > 0 and entry["extra_info"]["verified"]
    row = rows_of("bandwidth", [{"direction": "H2D", "host_memory": "pinned", "bytes": 16 << 20}], Context()).iloc[0]
    assert row["status"] == "ok"
    assert 0.8 < benchmark_ms / row["median"] < 1.25, (benchmark_ms, row["median"])


INJECTED = """
import sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from bench.sweep import Planned, Request, Runner
from faults import with_fault
runner = Runner(Request(["bandwidth", "launch", "graphs"], "quick", sizes=[1 << 20], out=Path("results"),
                        axes={{"host_memory": ["pinned"], "case": ["stream-order"]}}))
planned = runner.plan()
plans = [type(item)(with_fault(item.experiment, 1), item.configs, item.rules)
         if item.experiment.name == "launch" else item for item in planned.plans]
outcome = runner.run(runner.check(Planned(plans, planned.devices, planned.left_out)))
print(outcome.path)
"""


def test_injected_illegal_address_ends_only_its_experiment(tmp_path):
    """A sticky CUDA error (an illegal-address kernel after the first launch row) fails the rest of that experiment
    only: the experiments before and after it keep every row."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", INJECTED.format(tests=TESTS)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    rows = pd.read_parquet(_results(tmp_path / "results"))
    by = {name: group for name, group in rows.groupby("experiment")}
    assert (by["bandwidth"]["status"] == "ok").all() and (by["graphs"]["status"] == "ok").all()
    launch = by["launch"]
    from bench.experiments.launch import PATHS

    assert list(launch["status"]) == ["ok"] + ["failed"] * (len(PATHS) - 1), launch[["status", "error"]]
    assert launch["error"].iloc[1:].str.contains("IllegalAddress|illegal", case=False).all()


def test_cli_sigterm_then_resume(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "bench", "sweep", "--experiments", "blocking"]
    child = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    deadline = time.monotonic() + 120
    while not list((tmp_path / "results").glob("*.parquet")) and time.monotonic() < deadline:
        time.sleep(0.1)
    child.send_signal(signal.SIGTERM)
    stdout, stderr = child.communicate(timeout=120)
    assert child.returncode == 143, stderr
    assert "interrupted during blocking" in stdout
    path = _results(tmp_path / "results")
    first = pd.read_parquet(path)
    assert 0 < len(first) < 152
    resumed = subprocess.run(command + ["--resume", str(path)], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    rows = pd.read_parquet(path)
    assert len(rows) == 152 and rows[["call", "placement", "spin_stream"]].drop_duplicates().shape[0] == 152
    assert set(rows["run_id"]) >= set(first["run_id"]) and rows["run_id"].nunique() == 2
    assert {"throttled", "other_processes", "sm_clock_seen_mhz"} <= set(rows.columns)


# --- library calls, the probe and the pytest plugin -------------------------------------------------------------

def test_library_calls_against_their_documentation(cupy):
    configs = [{"call": call, "placement": placement} for call, placement in (
        ("cupy a.item()", "same"), ("cupy a.item()", "other"), ("cupy cupy.asnumpy(a, blocking=False) into pinned",
                                                               "same"),
        ("cupy cupy.cuda.Device().synchronize()", "other"), ("cupy a * 2 + 1", "between"),
        ("numba cuda.to_device(pinned, stream=s)", "same"), ("numba cuda.synchronize()", "between"))]
    frame = rows_of("library", configs).set_index(["call", "placement"])
    assert (frame["status"] == "ok").all(), frame["error"].tolist()
    assert frame.loc[("cupy a.item()", "same"), "verdict"] == "waits-for-device"
    assert frame.loc[("cupy a.item()", "other"), "verdict"] == "returns"  # its own stream was idle
    assert frame.loc[("cupy cupy.asnumpy(a, blocking=False) into pinned", "same"), "verdict"] == "returns"
    assert frame.loc[("cupy cupy.asnumpy(a, blocking=False) into pinned", "same"), "matches_docs"]
    assert frame.loc[("cupy cupy.cuda.Device().synchronize()", "other"), "verdict"] == "waits-for-device"
    assert frame.loc[("cupy a * 2 + 1", "between"), "verdict"] == "overlaps"
    assert frame.loc[("numba cuda.to_device(pinned, stream=s)", "same"), "verdict"] == "returns"
    assert frame.loc[("numba cuda.synchronize()", "between"), "verdict"] == "serializes"
    assert frame.loc[("cupy a.item()", "same"), "first_host_ms"] > 0  # the call's first row measures its first call


def test_probe_catches_item_and_passes_an_async_copy_into_pinned_memory(cupy):
    import cupyx

    from bench import probe

    data = cupy.arange(1 << 20, dtype=cupy.float32)  # CuPy's current stream: the legacy default stream
    pinned = cupyx.empty_pinned(data.shape, data.dtype)
    (data * 2)[:1].item()  # its kernel loaded (a first launch waits for an idle GPU)
    waited = probe(lambda: (data * 2)[:1].item())  # the whole GPU held: the product cannot run, .item() waits
    assert waited.verdict == "waits-for-device" and not waited.gpu_busy_after and waited.host_ms > 10, str(waited)
    ready = probe(lambda: data[:1].item())  # nothing queued before it: the copy engines are not held
    assert ready.verdict != "waits-for-device", str(ready)
    behind = probe(lambda: data[:1].item(), stream=0)  # the old meaning: a spin ahead of it on its stream
    assert behind.verdict == "waits-for-device" and behind.held == "stream 0x0", str(behind)
    returned = probe(lambda: data.get(out=pinned, blocking=False))
    assert returned.verdict == "returns" and returned.gpu_busy_after and returned.host_ms < 1, str(returned)
    assert returned.serialization == "overlaps" and "returned while the GPU was busy" in str(returned)


def test_assert_async_fails_a_region_that_waits_and_passes_one_that_does_not(cupy, monkeypatch):
    import cupyx

    from bench.pytest_plugin import WaitedForGpu, assert_async
    from bench.usercode.hold import in_use

    data = cupy.arange(1 << 20, dtype=cupy.float32)
    pinned = cupyx.empty_pinned((), data.dtype)
    float(data.sum())  # its kernel loaded: a first launch would wait too (lazy loading waits for an idle GPU)
    with monkeypatch.context() as patch:  # the hold's watchdog (0.25 s) out of the reach of a stalled host: the
        patch.setattr("bench.usercode.syncs.run.HOLD_TIMEOUT_S", 30.0)  # settle (0.1 s) alone can find the wait
        with pytest.raises(WaitedForGpu, match=r"waited for the GPU 1 time .*:\n  .*test_gpu.py:\d+ "
                                               r"float\(data.sum\(\)\)( \(.*\))?: stood there \d+ ms under the hold$"):
            with assert_async():  # found standing still after the settle, not once the hold's watchdog ended it
                float(data.sum())
    assert not in_use().expired()  # the watcher released the hold
    with assert_async():
        data.sum().get(out=pinned, blocking=False)
    assert float(pinned) == float(data.sum())
    started = time.monotonic()
    with pytest.raises(WaitedForGpu, match=r"waited for the GPU: it held the host \d+ ms and returned only after "
                                           r"the gate holding the stream was released by its 0.5 s watchdog"):
        with assert_async(stream=0, timeout_s=0.5):  # stream=: the gate
            float(data.sum())
    assert time.monotonic() - started > 0.4  # it returned only once the gate's watchdog let its stream go (how soon
    # after its timeout a watchdog lets go is read on the GPU's clock: test_gate_watchdog_expires)


def test_the_readme_training_step(tmp_path):
    """The usage page's worked example, run as a user's test suite would run it (the plugin's fixture)."""
    pytest.importorskip("torch")
    example = (ROOT / "docs" / "usage.md").read_text().split("```python\n# test_training_step.py\n", 1)[1].split("```", 1)[0]
    (tmp_path / "test_training_step.py").write_text(example)
    import importlib.metadata

    installed = any(point.value == "bench.pytest_plugin" for point in importlib.metadata.entry_points(group="pytest11"))
    plugin = [] if installed else ["-p", "bench.pytest_plugin"]  # pip install registers it; a source tree does not
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin,
                             str(tmp_path / "test_training_step.py")], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=300)
    assert "1 failed, 1 passed" in result.stdout, result.stdout[-3000:]
    assert "test_step_logging_item_waits" in result.stdout and "waited for the GPU" in result.stdout
