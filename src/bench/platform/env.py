"""The environment a result came from: GPU, driver, CUDA, PCIe link, clocks, library versions, host, commit."""

from __future__ import annotations

import ctypes
import importlib.util
import os
import platform
import socket
import subprocess
from pathlib import Path

from bench.platform import lazy
from bench.platform.distribution import DISTRIBUTION, __version__
from bench.platform.environment import Environment
from bench.platform.errors import UsageError
from bench.platform.libraries import LIBRARIES, REQUIRED, distribution_version

# What measuring imports (the cu12 or cu13 extra), top-level module -> name; reading results needs none of it.
MEASURING_LIBRARIES = {**{library.versioned[0]: library.title for library in REQUIRED}, "pynvml": "nvidia-ml-py"}


def missing_libraries() -> str | None:
    """None when the measuring libraries are installed; otherwise which are not and how to install them, in one line
    (finding a module imports nothing)."""
    missing = [name for module, name in MEASURING_LIBRARIES.items() if importlib.util.find_spec(module) is None]
    if not missing:
        return None
    return (f"measuring needs {', '.join(missing)} (not installed): pip install \"{DISTRIBUTION}[cu12]\", "
            f"or [cu13] for CUDA 13 (in a checkout: pip install -e \".[cu12]\")")


DRIVER_LIBRARY = "libcuda.so.1"  # installed by the NVIDIA driver, never by a wheel
WITHOUT_GPU = "report, plot, compare and claims read results without a GPU"  # what works without one


def no_driver_reason() -> str | None:
    """None when the NVIDIA driver's CUDA library loads; otherwise that no driver was found, in one line (loading the
    library creates no CUDA context)."""
    try:
        ctypes.CDLL(DRIVER_LIBRARY)
    except OSError:
        return f"no NVIDIA driver found ({DRIVER_LIBRARY} cannot be loaded)"
    return None


def no_gpu_reason() -> str | None:
    """None when a CUDA GPU is usable; otherwise why not, in one line."""
    reason = missing_libraries() or no_driver_reason()
    if reason:
        return reason
    try:
        from cupy_backends.cuda.api import runtime  # cupy.cuda.runtime, without importing CuPy

        if runtime.getDeviceCount() > 0:
            return None
        return "no CUDA GPU visible"
    except Exception as error:  # ImportError, CUDARuntimeError (no driver, no device, ...)
        return f"no CUDA GPU visible ({type(error).__name__}: {error})".replace("\n", " ")


def gpu_skip_reason() -> str | None:
    """Why a test that needs a GPU is skipped here, as every bench test that needs one says it ("needs a GPU: ..."),
    or None where a GPU is usable."""
    reason = no_gpu_reason()
    return f"needs a GPU: {reason}" if reason else None


def pcie_gbps_per_direction(generation: int, width: int) -> float | None:
    """Theoretical one-direction data rate of a PCIe link, GB/s (line rate after encoding, before packet overhead)."""
    gigatransfers = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0}.get(generation)
    if gigatransfers is None or width <= 0:
        return None
    encoding = 8 / 10 if generation <= 2 else 128 / 130
    return gigatransfers * encoding * width / 8


def _cuda_version(number: int) -> str:
    return f"{number // 1000}.{number % 1000 // 10}"


HOST_PACKAGES = ("numpy", "pandas", "pyarrow", "matplotlib")  # what reading results needs, besides the GPU libraries


def host_readings() -> dict[str, str]:
    """What needs no GPU: host, Python, bench, every GPU library's version and those of what reading results needs,
    the commit, and the NVIDIA driver's version (or that there is none)."""
    return {"hostname": socket.gethostname(), "python_version": platform.python_version(),
            "bench_version": __version__, "git_commit": git_commit(), "driver_version": driver_version(),
            **{library.version_column: library.version() for library in LIBRARIES},
            **{f"{module}_version": distribution_version(module) for module in HOST_PACKAGES}}


def driver_version() -> str:
    """The NVIDIA driver's version as NVML reads it (no CUDA context): 'not found' without a driver, 'unknown (why)'
    where NVML cannot say."""
    if no_driver_reason():
        return "not found"
    try:
        import pynvml
    except ImportError:
        return "unknown (nvidia-ml-py is not installed)"
    try:
        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError as error:
        return f"unknown ({error})"
    return version.decode() if isinstance(version, bytes) else version


def git_commit() -> str:
    """The suite's commit: BENCH_GIT_COMMIT when set (a copy of the tree whose .git is not its own, as on a
    remote GPU machine), else git's HEAD with '-dirty' for local changes."""
    if os.environ.get("BENCH_GIT_COMMIT"):
        return os.environ["BENCH_GIT_COMMIT"]
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _nvml_readings(pci_bus_id: str) -> dict:
    """Driver, PCIe and clock readings from NVML; -1 / 'unknown' for any it cannot give."""
    import pynvml

    readings = {
        "gpu_uuid": "unknown", "driver_version": "unknown", "pcie_gen": -1, "pcie_width": -1,
        "pcie_gen_max": -1, "pcie_width_max": -1, "sm_clock_mhz": -1, "mem_clock_mhz": -1,
        "sm_clock_max_mhz": -1, "mem_clock_max_mhz": -1, "nvlinks": -1,
    }
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return readings
    try:
        handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
        queries = {
            "gpu_uuid": lambda: pynvml.nvmlDeviceGetUUID(handle),
            "driver_version": pynvml.nvmlSystemGetDriverVersion,
            "pcie_gen": lambda: pynvml.nvmlDeviceGetCurrPcieLinkGeneration(handle),
            "pcie_width": lambda: pynvml.nvmlDeviceGetCurrPcieLinkWidth(handle),
            "pcie_gen_max": lambda: pynvml.nvmlDeviceGetMaxPcieLinkGeneration(handle),
            "pcie_width_max": lambda: pynvml.nvmlDeviceGetMaxPcieLinkWidth(handle),
            "sm_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "mem_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
            "sm_clock_max_mhz": lambda: pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "mem_clock_max_mhz": lambda: pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM),
            "nvlinks": lambda: _active_nvlinks(handle),
        }
        for key, query in queries.items():
            try:
                value = query()
                readings[key] = value.decode() if isinstance(value, bytes) else value
            except pynvml.NVMLError:
                pass
    except pynvml.NVMLError:
        pass
    finally:
        pynvml.nvmlShutdown()
    return readings


def _active_nvlinks(handle) -> int:
    """How many of the GPU's NVLink links are up (0 on a GPU without NVLink)."""
    import pynvml

    active = 0
    for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
        try:
            active += pynvml.nvmlDeviceGetNvLinkState(handle, link) == pynvml.NVML_FEATURE_ENABLED
        except pynvml.NVMLError:  # not supported, or no such link
            break
    return active


def gpu_uuid(pci_bus_id: str) -> str:
    """The UUID NVML gives the GPU at ``pci_bus_id`` ('unknown' without NVML)."""
    return _nvml_readings(pci_bus_id)["gpu_uuid"]


def local_cpus(pci_bus_id: str) -> list[int]:
    """The CPUs NVML calls local to the GPU (its NUMA node), that this process may use; [] if NVML cannot say.
    Experiment processes run there, so their pinned and pageable buffers land in the GPU's NUMA node and run-to-run
    differences do not come from which socket a process happened to start on."""
    import pynvml

    words = -(-(os.cpu_count() or 1) // 64)
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return []
    try:
        masks = pynvml.nvmlDeviceGetCpuAffinity(pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id), words)
    except pynvml.NVMLError:
        return []
    finally:
        pynvml.nvmlShutdown()
    cpus = {64 * word + bit for word, mask in enumerate(masks) for bit in range(64) if int(mask) >> bit & 1}
    return sorted(cpus & os.sched_getaffinity(0))


def cpu_ranges(cpus: list[int]) -> str:
    """``[0, 1, 2, 5]`` → ``"0-2,5"``."""
    ranges: list[list[int]] = []
    for cpu in sorted(cpus):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(f"{low}-{high}" if high > low else str(low) for low, high in ranges)


def parse_cpu_ranges(text: str) -> list[int]:
    """``"0-2,5"`` → ``[0, 1, 2, 5]`` (the inverse of :func:`cpu_ranges`; ``""`` → ``[]``)."""
    cpus = []
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        cpus.extend(range(int(low), int(high or low) + 1))
    return cpus


def collect(device: int = 0) -> Environment:
    """Read the environment of CUDA device ``device`` (needs a GPU)."""
    from cupy_backends.cuda.api import runtime

    properties = runtime.getDeviceProperties(device)
    pci_bus_id = runtime.deviceGetPCIBusId(device)
    name = properties["name"]
    return Environment.of(
        gpu_name=name.decode() if isinstance(name, bytes) else name,
        gpu_index=device,
        pci_bus_id=pci_bus_id,
        compute_capability=f"{properties['major']}.{properties['minor']}",
        sm_count=properties["multiProcessorCount"],
        device_memory_bytes=properties["totalGlobalMem"],
        l2_cache_bytes=properties["l2CacheSize"],
        async_engine_count=properties["asyncEngineCount"],
        cuda_driver=_cuda_version(runtime.driverGetVersion()),
        cuda_runtime=_cuda_version(runtime.runtimeGetVersion()),
        hostname=socket.gethostname(),
        python_version=platform.python_version(),
        **{library.version_column: library.version() for library in REQUIRED},
        numpy_version=distribution_version("numpy"),
        bench_version=__version__,
        git_commit=git_commit(),
        host_cpus=cpu_ranges(local_cpus(pci_bus_id)),
        **_nvml_readings(pci_bus_id),
    )


def free_memory_bytes(pci_bus_id: str) -> int:
    """Device memory free now, from NVML (no CUDA context needed), else from the CUDA runtime."""
    import pynvml

    try:
        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)).free)
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        from bench.platform.cuda import runtime

        return runtime.memGetInfo()[0]


def host_memory_available() -> int:
    """Host memory available now (MemAvailable), else the host's physical memory."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def use_device(device: int, load_numba: bool = True) -> None:
    """Make ``device`` current for CuPy and numba-cuda in this process. ``load_numba=False`` tells numba-cuda only
    where it is loaded already (its import takes most of a second): loaded later, it works in the calling thread's
    current context, the runtime's device's, as it finds it."""
    import sys

    from bench.platform.cuda import runtime

    runtime.setDevice(device)
    if load_numba or "numba.cuda" in sys.modules:
        lazy.now("numba.cuda").select_device(device)


def gpu_count() -> int:
    """How many GPUs are visible, counted without creating a CUDA context in this process (the sweep's parent
    leaves the GPU to its experiments' processes). UsageError when there is none, saying why and what works
    without one."""
    reason = no_gpu_reason()
    if reason:
        raise UsageError(f"{reason}; {WITHOUT_GPU}")
    from bench.platform.cuda import runtime

    return runtime.getDeviceCount()


def gpu_environment(device: int) -> Environment:
    """The environment of ``device``, read without creating a CUDA context in this process. UsageError when there
    is no such GPU."""
    _existing(device)
    return collect(device)


def gpu_name(device: int) -> str:
    """The name of GPU ``device`` (what a tool's answer says it ran on), read without NVML, git or the libraries'
    versions. UsageError when there is no such GPU."""
    from cupy_backends.cuda.api import runtime

    _existing(device)
    name = runtime.getDeviceProperties(device)["name"]
    return name.decode() if isinstance(name, bytes) else name


def _existing(device: int) -> None:
    count = gpu_count()
    if not 0 <= device < count:
        raise UsageError(f"--device {device}: {count} GPU(s) visible, ordinals 0..{count - 1}")


# NVML clock-event ("throttle") reasons that slow the GPU below what the workload asks for. Idle, the application
# clock setting, sync boost and display clocks are not throttling.
THROTTLE_REASONS = {0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal",
                    0x80: "hw_power_brake"}


def throttle_names(bits: int) -> list[str]:
    return [name for bit, name in THROTTLE_REASONS.items() if bits & bit]


def over_interval(before: dict, after: dict) -> dict:
    """The monitor columns of one configuration, from readings before and after it: the lowest SM clock seen, the
    throttle reasons active at either end, and the most processes besides the suite's own seen on the GPU."""
    if not before or not after:
        return {}
    bits = before["throttle_bits"] | after["throttle_bits"]
    return {"sm_clock_seen_mhz": min(before["sm_clock_mhz"], after["sm_clock_mhz"]),
            "throttle_reasons": ",".join(throttle_names(bits)), "throttled": bool(throttle_names(bits)),
            "other_processes": max(before["other_processes"], after["other_processes"])}


def other_processes(pids: set[int], own: set[int]) -> int:
    """Processes on the GPU that are not the suite's. Inside a PID namespace NVML may report host PIDs, which match
    none of ours; then the suite's own processes are assumed to be among them and are subtracted by count."""
    if pids & own:
        return len(pids - own)
    return max(0, len(pids) - len(own))


def monitor(pci_bus_id: str):
    """A function reading the GPU's SM clock, throttle reasons and the other processes using it (NVML), or None
    when NVML is unavailable."""
    import multiprocessing

    import pynvml

    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
    except pynvml.NVMLError:
        return None

    def read() -> dict:
        try:
            pids = {process.pid for process in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)}
            own = {os.getpid(), *(child.pid for child in multiprocessing.active_children())}
            return {"sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                    "throttle_bits": pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle),
                    "other_processes": other_processes(pids, own)}
        except pynvml.NVMLError:
            return {}

    return read
