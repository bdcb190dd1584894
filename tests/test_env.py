"""The environment's pure parts: the monitor's columns over an interval, other processes, throttle reasons, PCIe
rates and the commit (GPU reads: tests/test_gpu.py)."""

import re

import pytest

from bench.platform import env


def test_monitor_columns_over_an_interval():
    calm = {"sm_clock_mhz": 1980, "throttle_bits": 0x1, "other_processes": 0}  # idle is not throttling
    hot = {"sm_clock_mhz": 1500, "throttle_bits": 0x20 | 0x4, "other_processes": 1}
    assert env.over_interval(calm, calm) == {"sm_clock_seen_mhz": 1980, "throttle_reasons": "", "throttled": False,
                                             "other_processes": 0}
    seen = env.over_interval(calm, hot)
    assert seen == {"sm_clock_seen_mhz": 1500, "throttle_reasons": "sw_power_cap,sw_thermal", "throttled": True,
                    "other_processes": 1}
    assert env.over_interval(hot, calm) == seen  # either end counts
    assert env.over_interval({}, hot) == {} and env.over_interval(hot, {}) == {}


def test_throttle_names():
    assert env.throttle_names(0) == [] and env.throttle_names(0x1 | 0x2 | 0x10 | 0x100) == []
    assert env.throttle_names(0x4 | 0x8 | 0x20 | 0x40 | 0x80) == ["sw_power_cap", "hw_slowdown", "sw_thermal",
                                                                 "hw_thermal", "hw_power_brake"]


def test_other_processes():
    assert env.other_processes({10, 11, 99}, {10, 11}) == 1
    assert env.other_processes(set(), {10}) == 0
    assert env.other_processes({5000, 5001}, {10, 11}) == 0  # host PIDs seen from a container: ours by count
    assert env.other_processes({5000, 5001, 5002}, {10, 11}) == 1
    assert env.other_processes({5000}, {10, 11}) == 0


@pytest.mark.parametrize("generation, width, rate", [(5, 16, 63.0), (4, 16, 31.5), (3, 16, 15.75), (2, 8, 4.0),
                                                     (1, 1, 0.25), (6, 16, None), (0, 16, None), (5, 0, None),
                                                     (-1, -1, None)])
def test_pcie_rate_per_direction(generation, width, rate):
    got = env.pcie_gbps_per_direction(generation, width)
    assert got == (pytest.approx(rate, rel=2e-3) if rate is not None else None)


def test_git_commit(monkeypatch):
    monkeypatch.setenv("BENCH_GIT_COMMIT", "0123456789abcdef")
    assert env.git_commit() == "0123456789abcdef"
    monkeypatch.delenv("BENCH_GIT_COMMIT")
    commit = env.git_commit()
    assert commit == "unknown" or re.fullmatch(r"[0-9a-f]{40}(-dirty)?", commit)


def test_no_gpu_reason_is_one_line(no_gpu):
    assert no_gpu.startswith(("no CUDA GPU visible", "no NVIDIA driver found", "measuring needs")) and "\n" not in no_gpu


def test_missing_measuring_libraries_name_the_extra(monkeypatch):
    monkeypatch.setattr(env, "MEASURING_LIBRARIES", {"json": "JSON", "bench_no_such_module": "Nothing"})
    reason = env.missing_libraries()
    assert reason.startswith("measuring needs Nothing (not installed): ") and "\n" not in reason
    assert 'pip install "cuda-sync-bench[cu12]", or [cu13] for CUDA 13' in reason
    assert env.no_gpu_reason() == reason
    monkeypatch.setattr(env, "MEASURING_LIBRARIES", {"json": "JSON"})
    assert env.missing_libraries() is None


def test_cpu_ranges_round_trip():
    from bench.platform.env import cpu_ranges, parse_cpu_ranges

    assert cpu_ranges([5, 0, 1, 2, 7, 8]) == "0-2,5,7-8"
    assert parse_cpu_ranges("0-2,5,7-8") == [0, 1, 2, 5, 7, 8]
    assert cpu_ranges([]) == "" and parse_cpu_ranges("") == []


def test_no_driver_is_said_before_cuda_is_asked(monkeypatch):
    import bench

    monkeypatch.setattr(env, "MEASURING_LIBRARIES", {})  # as if installed
    monkeypatch.setattr(env, "DRIVER_LIBRARY", "libbench-no-such-driver.so.1")
    reason = "no NVIDIA driver found (libbench-no-such-driver.so.1 cannot be loaded)"
    assert env.no_driver_reason() == env.no_gpu_reason() == reason
    assert env.gpu_skip_reason() == f"needs a GPU: {reason}"  # what every test that needs a GPU says
    readings = env.host_readings()  # what needs no GPU
    assert readings["driver_version"] == "not found" and readings["bench_version"] == bench.__version__
    assert readings["pandas_version"].startswith("pandas ") and readings["python_version"].count(".") == 2
