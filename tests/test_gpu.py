"""The real thing, at small sizes. Skipped (with the reason) where no GPU is visible."""

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytestmark = pytest.mark.gpu
SRC = str(Path(__file__).resolve().parents[1] / "src")


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
    from bench.timing import Gate, MeasurementFailed

    stream = cupy.cuda.Stream(non_blocking=True)
    gate = Gate(timeout_s=0.2)
    started = time.monotonic()
    gate.close(stream)
    stream.synchronize()  # nobody opens it
    assert 0.15 < time.monotonic() - started < 3
    with pytest.raises(MeasurementFailed, match="watchdog expired"):
        gate.check()


@pytest.mark.parametrize("kind", ["pinned", "pageable", "registered"])
def test_host_memory_round_trip(cupy, kind):
    from cupy.cuda import runtime

    from bench.memory import DeviceBuffer, HostBuffer

    nbytes = 3 << 20
    pattern = np.random.default_rng(1).integers(0, 256, nbytes, dtype=np.uint8)
    with HostBuffer(kind, nbytes) as src, HostBuffer(kind, nbytes) as dst, DeviceBuffer("malloc", nbytes) as dev:
        src.array[:] = pattern
        dst.array[:] = 0
        runtime.memcpy(dev.ptr, src.ptr, nbytes, runtime.memcpyHostToDevice)
        runtime.memcpy(dst.ptr, dev.ptr, nbytes, runtime.memcpyDeviceToHost)
        assert np.array_equal(dst.array, pattern)
        assert src.array is not None
    assert src.array is None and dst.array is None


def test_device_allocators(cupy):
    from bench.memory import DeviceBuffer

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


def test_verification_catches_a_wrong_copy(cupy):
    from bench.experiments import bandwidth

    with bandwidth._Buffers("pinned", 1 << 20) as buffers:
        (h2d,) = buffers.copies("H2D")
        assert bandwidth._mismatch([h2d], 1 << 20) is None
        buffers.host_src.array[12345] ^= 0xFF  # the source no longer matches the reference
        message = bandwidth._mismatch([h2d], 1 << 20)
        assert message == "data mismatch after copy: 1 of 1048576 bytes differ (first at offset 12345)"
        # a copy shorter than the verified range leaves poison behind, which the check must see
        (d2d,) = buffers.copies("D2D")
        short = bandwidth._Copy(d2d.stream, d2d.dst_ptr, d2d.src_ptr, d2d.kind, d2d.dst, d2d.expected)
        short.dst[: 1 << 20].fill(bandwidth.POISON)
        short.enqueue(1 << 19)
        short.stream.synchronize()
        assert int((short.dst[: 1 << 20] == bandwidth.POISON).sum()) == 1 << 19


def test_bandwidth_experiment_small(cupy):
    from bench import sweep
    from bench.timing import StopRule, Timer

    (item,) = sweep.plan(["bandwidth"], sizes=[4096, 16 << 20])
    rows = pd.DataFrame(item.experiment.run(item.configs, Timer(StopRule(min_samples=5, time_cap_s=0.2))))
    assert len(rows) == 20 and (rows["status"] == "ok").all(), rows[rows["status"] != "ok"]["error"].tolist()
    assert rows["verified"].all() and (rows["n_samples"] >= 5).all()
    assert (rows["gated"] == (rows["host_memory"] != "pageable")).all()
    big = rows[rows["bytes"] == 16 << 20].set_index(["direction", "host_memory"])["gbps"]
    # Plausibility on any PCIe Gen3+ x16 GPU; on the H200 pinned is ~55 GB/s.
    assert 8 < big["H2D", "pinned"] < 70 and 8 < big["D2H", "pinned"] < 70
    assert big["D2D", "device"] > 200
    assert big["BIDIR", "pinned"] > max(big["H2D", "pinned"], big["D2H", "pinned"])
    bidir = rows[(rows["direction"] == "BIDIR") & (rows["bytes"] == 16 << 20) & (rows["host_memory"] == "pinned")]
    assert bidir["h2d_gbps"].iloc[0] > 8 and bidir["d2h_gbps"].iloc[0] > 8


def test_env_collect(cupy):
    from bench import env

    environment = env.collect(0)
    assert environment.gpu_name and environment.sm_count > 0 and environment.async_engine_count >= 1
    assert environment.cuda_runtime.count(".") == 1 and environment.driver_version != "unknown"
    assert environment.pcie_width_max > 0 and environment.pcie_gen_max > 0 and environment.l2_cache_bytes > 0


def _bench(*args, cwd):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_cli_quick_sweep_then_plot(tmp_path):
    result = _bench("sweep", "--quick", "--sizes", "64K,4M", "--experiments", "bandwidth,overlap",
                    "--axis", "host_memory=pinned", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (path,) = [p for p in (tmp_path / "results").glob("*.parquet") if "." not in p.stem]
    rows = pd.read_parquet(path)
    assert (rows["status"] == "ok").all(), rows[rows["status"] != "ok"]["error"].tolist()
    assert len(rows[rows["experiment"] == "bandwidth"]) == 6 and len(rows[rows["experiment"] == "overlap"]) == 48
    timeline = pd.read_parquet(path.with_name(path.stem + ".timeline.parquet"))
    assert {"stream", "chunk", "op", "start_ms", "end_ms", "streams", "run_id"} <= set(timeline.columns)
    for column in ("experiment", "direction", "host_memory", "bytes", "samples_ms", "median_ms", "min_ms",
                   "max_ms", "stdrel", "gbps", "verified", "gpu_name", "driver_version", "cuda_runtime",
                   "pcie_gen", "pcie_width", "gpu_uuid", "hostname", "git_commit"):
        assert column in rows.columns, column
    assert "configurations written to" in result.stdout
    plotted = _bench("plot", cwd=tmp_path)
    assert plotted.returncode == 0, plotted.stderr
    for name in ("bandwidth", "overlap_scaling", "overlap_heatmap", "overlap_timeline"):
        assert (tmp_path / "plots" / f"{name}.png").stat().st_size > 10_000, name


def test_cli_size_beyond_device_memory(tmp_path):
    result = _bench("sweep", "--sizes", "4T", cwd=tmp_path)
    assert result.returncode == 2 and "of device memory" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "results").exists()


def test_cli_bad_device(tmp_path):
    result = _bench("sweep", "--device", "99", cwd=tmp_path)
    assert result.returncode == 2 and "--device 99" in result.stderr


def test_launch_paths_cost_what_they_should(cupy):
    from bench.experiments.launch import EXPERIMENT as LAUNCH
    from bench.timing import Timer

    rows = pd.DataFrame(LAUNCH.run([{"path": p} for p in ("dispatcher", "precompiled", "graph")], Timer()))
    cost = rows.set_index("path")["host_us_per_launch"]
    assert 0 < cost["graph"] < cost["precompiled"] < cost["dispatcher"], cost.to_dict()


def test_overlap_small_pipeline(cupy):
    from bench import sweep
    from bench.experiments.overlap import EXPERIMENT as OVERLAP
    from bench.timing import StopRule, Timer

    axes = {**OVERLAP.axes, "total_bytes": (64 << 20,), "compute_ratio": (1.0,), "streams": (1, 4)}
    configs = sweep.expand(axes)
    rows = list(OVERLAP.run(configs, Timer(StopRule(min_samples=3, time_cap_s=0.1))))
    frame = pd.DataFrame(rows)
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
    assert (ok["kernel_split_ms"] > 0).all()
    best = pinned[(pinned["streams"] == 4) & (pinned["chunks_per_stream"] == 4)]["efficiency"].max()
    assert best > 0.5, best  # without overlap, three equal stages give about 1/3
    eager = [row for row in rows if row["launch"] == "eager" and row["status"] == "ok"]
    for row in eager:
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
    from bench.experiments.blocking import EXPERIMENT as BLOCKING

    (row,) = BLOCKING.run([{"call": call, "placement": placement, "spin_stream": spin_stream}], None)
    assert row["status"] == "ok", row["error"]
    assert row["verdict"] == verdict and row["stable"], row
    if verdict == "waits-for-device":
        assert row["host_ms"] > 0.5 * row["spin_left_ms"]


def test_serialization_controls(cupy):
    from bench.experiments.serialization import EXPERIMENT as SERIALIZATION

    configs = [{"call": "(nothing)", "placement": "none", "spin_stream": "non-blocking"},
               {"call": "cudaDeviceSynchronize", "placement": "none", "spin_stream": "non-blocking"},
               {"call": "kernel launch", "placement": "legacy", "spin_stream": "blocking"},
               {"call": "kernel launch", "placement": "legacy", "spin_stream": "non-blocking"}]
    rows = list(SERIALIZATION.run(configs, None))
    assert [row["status"] for row in rows] == ["ok"] * 4, [row["error"] for row in rows]
    nothing, device_sync, null_blocking, null_non_blocking = rows
    assert nothing["verdict"] == "overlaps" and nothing["overlap_ms"] > 15
    assert device_sync["verdict"] == "serializes" and device_sync["host_waited"]
    assert null_blocking["verdict"] == "serializes" and not null_blocking["host_waited"]  # NULL stream, on the GPU
    assert null_non_blocking["verdict"] == "overlaps"


def test_graphs_cases(cupy):
    from bench.experiments.graphs import CASES
    from bench.experiments.graphs import EXPERIMENT as GRAPHS
    from bench.timing import StopRule, Timer

    configs = [{"case": case, "iterations": 10, "bytes": 1 << 20} for case in CASES]
    rows = {row["case"]: row for row in GRAPHS.run(configs, Timer(StopRule(min_samples=3, time_cap_s=0.1)))}
    assert all(row["status"] == "ok" for row in rows.values()), {c: r["error"] for c, r in rows.items()}
    loop = rows["malloc-loop"]
    assert loop["verified"] and loop["graph_equals_eager"] and loop["graph_ms"] > 0 and loop["eager_ms"] > 0
    assert rows["stream-order"]["wrong_results"] == 0
    capture = rows["sync-in-capture"]
    assert capture["sync_error"] and capture["usable_after"], capture


def test_alloc_small_and_threshold_restored(cupy):
    from cupy.cuda import runtime

    from bench.experiments.alloc import EXPERIMENT as ALLOC

    configs = [{"api": api, "release_threshold": threshold, "pattern": pattern, "bytes": 1 << 20}
               for api, threshold in (("cudaMalloc", "none"), ("cudaMallocAsync", "0"), ("cudaMallocAsync", "max"))
               for pattern in ("single", "loop")]
    configs.append({"api": "cudaHostRegister", "release_threshold": "none", "pattern": "single", "bytes": 1 << 20})
    rows = list(ALLOC.run(configs, None))
    assert all(row["status"] == "ok" for row in rows), [row["error"] for row in rows]
    for row in rows:
        if row["pattern"] == "single":
            assert 0 < row["alloc_us"] < row["cycle_us"]
        else:
            assert row["gpu_us_per_iteration"] > 0 and row["host_us_per_iteration"] > 0
    pool = runtime.deviceGetDefaultMemPool(0)
    assert runtime.memPoolGetAttribute(pool, runtime.cudaMemPoolAttrReleaseThreshold) == 0


def test_cli_claims_runs_what_the_results_lack(tmp_path):
    from bench import store
    from synthetic import alloc_and_graphs_rows, blocking_rows

    rows = pd.concat([blocking_rows(), alloc_and_graphs_rows()], ignore_index=True)
    rows = rows[rows["experiment"] != "graphs"]
    store.write(tmp_path / "given.parquet", rows.to_dict("records"), {"run_id": "synthetic"})
    result = _bench("claims", "given.parquet", "--out", "results", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "measuring what the results lack: graphs" in result.stdout
    (measured,) = [p for p in (tmp_path / "results").glob("*.parquet") if "." not in p.stem]
    assert set(pd.read_parquet(measured)["experiment"]) == {"graphs"}
    assert "NOT MEASURED" not in result.stdout and "wrong results" in result.stdout


def test_benchmark_median_agrees_with_the_sweep(cupy, tmp_path):
    """pytest-benchmark (GPU clock) and the sweep measure the same thing: 16 MiB pinned H2D within 3%."""
    import json

    from bench.experiments.bandwidth import EXPERIMENT as BANDWIDTH
    from bench.timing import StopRule, Timer

    root = Path(__file__).resolve().parents[1]
    report = tmp_path / "benchmark.json"
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run([sys.executable, "-m", "pytest", "--benchmark-only", "-p", "no:cacheprovider", "-q",
                             "-k", "h2d-pinned-16MiB", f"--benchmark-json={report}"], cwd=root, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
    (entry,) = json.loads(report.read_text())["benchmarks"]
    benchmark_ms = entry["stats"]["median"] * 1e3
    assert entry["extra_info"]["gbps"] > 40 and entry["extra_info"]["verified"]
    (row,) = BANDWIDTH.run([{"direction": "H2D", "host_memory": "pinned", "bytes": 16 << 20}], Timer(StopRule()))
    assert row["status"] == "ok"
    assert abs(benchmark_ms / row["median_ms"] - 1) < 0.03, (benchmark_ms, row["median_ms"])
    assert 0.2 < benchmark_ms < 0.4  # GPU time of a 16 MiB copy at ~55 GB/s: ~0.3 ms


def test_cli_injected_illegal_address_ends_only_its_experiment(tmp_path):
    """A sticky CUDA error (an illegal-address kernel after the first launch row) fails the rest of that experiment
    only: the experiments before and after it keep every row."""
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "BENCH_INJECT_FAULT": "launch:1"}
    result = subprocess.run([sys.executable, "-m", "bench", "sweep", "--quick", "--experiments",
                             "bandwidth,launch,graphs", "--sizes", "1M", "--axis", "host_memory=pinned",
                             "--axis", "case=stream-order"], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    (path,) = [p for p in (tmp_path / "results").glob("*.parquet") if "." not in p.stem]
    rows = pd.read_parquet(path)
    by = {name: group for name, group in rows.groupby("experiment")}
    assert (by["bandwidth"]["status"] == "ok").all() and (by["graphs"]["status"] == "ok").all()
    launch = by["launch"]
    assert list(launch["status"]) == ["ok", "failed", "failed"], launch[["status", "error"]]
    assert launch["error"].iloc[1:].str.contains("IllegalAddress|illegal", case=False).all()


def test_cli_sigterm_then_resume(tmp_path):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    command = [sys.executable, "-m", "bench", "sweep", "--experiments", "blocking"]
    child = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    deadline = time.monotonic() + 120
    while not list((tmp_path / "results").glob("*.parquet")) and time.monotonic() < deadline:
        time.sleep(0.1)
    child.send_signal(15)
    stdout, stderr = child.communicate(timeout=120)
    assert child.returncode == 143, stderr
    assert "interrupted during blocking" in stdout
    (path,) = list((tmp_path / "results").glob("*.parquet"))
    first = pd.read_parquet(path)
    assert 0 < len(first) < 152
    resumed = subprocess.run(command + ["--resume", str(path)], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    rows = pd.read_parquet(path)
    assert len(rows) == 152 and rows[["call", "placement", "spin_stream"]].drop_duplicates().shape[0] == 152
    assert set(rows["run_id"]) >= set(first["run_id"]) and rows["run_id"].nunique() == 2
    assert {"throttled", "other_processes", "sm_clock_seen_mhz"} <= set(rows.columns)
