"""The checks before a sweep writes or runs anything: the GPUs it selects, the output path (never an existing
results file, unless resuming it), the file it resumes, the memory its plans need. A problem is a
:class:`bench.platform.errors.UsageError` and nothing is written. What the checks establish is a :class:`Checked`, all
the run needs besides the request.

It imports :mod:`bench.platform.env` (the GPU's environment, read without a CUDA context in this process),
:mod:`bench.results.store` and :mod:`bench.sweep.plan` / :mod:`bench.sweep.resume`; nothing CUDA is imported until the
GPU is asked about.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.platform import env
from bench.results import store, writes
from bench.platform.errors import UsageError
from bench.sweep import resume
from bench.sweep.plan import Plan, Planned, Request, experiments_of
from bench.sweep.processes import cache_directory
from bench.platform.units import format_size


class Gpu:
    """The GPU a sweep checks and runs on (tests hand the runner a stand-in)."""

    def select(self, device: int):
        """The :class:`bench.platform.env.Environment` of ``device``. UsageError when there is none."""
        return env.gpu_environment(device)

    def count(self) -> int:
        """How many GPUs are visible. UsageError when there is none."""
        return env.gpu_count()

    def free_bytes(self, environment) -> int:
        return env.free_memory_bytes(environment.device.pci_bus_id)

    def child_device(self, device: int) -> int | None:
        """The device an experiment's process selects (None: leave it alone)."""
        return device

    def child_sees(self, environment) -> str | None:
        """What CUDA shows an experiment's process of one GPU (``CUDA_VISIBLE_DEVICES``): that GPU alone, by its
        UUID (None: leave it, where NVML named none)."""
        return environment.device.gpu_uuid if environment.device.gpu_uuid.startswith("GPU-") else None

    def warm_markers(self, environment) -> Path | None:
        """A directory of one file per experiment whose existence says that this machine's kernel caches
        (numba-cuda's beside this source tree, CuPy's in the home directory) hold that experiment's kernels, of this
        bench, for this GPU architecture (None: never warm up)."""
        import hashlib

        package = Path(__file__).resolve().parents[1]  # bench/
        tree = hashlib.sha1(str(package).encode()).hexdigest()[:8]
        key = "-".join([environment.host.bench_version, environment.host.git_commit[:12], environment.host.cupy_version,
                        environment.host.numba_cuda_version, f"sm{environment.device.compute_capability}", tree])
        return cache_directory() / ("warm-" + "".join(c if c.isalnum() or c in ".-" else "_" for c in key))

    def child_cpus(self, environment) -> list[int]:
        """The CPUs an experiment's process runs on (empty: leave it alone): those local to the GPU, as its
        environment read them."""
        return env.parse_cpu_ranges(environment.topology.host_cpus)


@dataclass(frozen=True)
class Checked:
    """What the checks established: the plans left to run and where their rows go, on which GPUs."""

    plans: list[Plan]  # the planned ones, minus what a resumed file finished
    devices: tuple[int, ...]  # the sweep's GPUs; the first names the file and carries its metadata
    path: Path  # the results file: the resumed one, or a new sweep's name (its first save may take the next free one)
    run_id: str
    selected: Mapping[int, object]  # by device ordinal: its bench.platform.env.Environment
    environments: Mapping[int, dict]  # by device ordinal: the columns its rows carry
    earlier: resume.Earlier | None = None  # the resumed file's rows and side tables

    @property
    def environment(self) -> dict:
        """The first GPU's environment: the file's metadata and name."""
        return self.environments[self.devices[0]]


def selected_devices(request: Request, gpu: Gpu) -> tuple[int, ...]:
    """The GPUs of ``--devices`` (all visible ones for "all"; a resumed sweep's own), else ``--device``; UsageError
    for one that does not exist, for --concurrent with fewer than two, or for --concurrent with --one-at-a-time."""
    devices: tuple[int, ...] = (request.device,)
    chosen = request.devices
    if not chosen and request.resume is not None:  # a sweep of several GPUs resumes on the same GPUs
        chosen = resume.devices_of(request.resume)
    if chosen:
        count = gpu.count()
        if chosen == "all":
            devices = tuple(range(count))
        else:
            devices = tuple(sorted(set(chosen)))  # in order: a multi-GPU plan's rows carry its first GPU
            for device in devices:
                if not 0 <= device < count:
                    raise UsageError(f"--devices {device}: {count} GPU(s) visible, ordinals 0..{count - 1}")
    if request.concurrent and len(devices) < 2:
        raise UsageError("--concurrent runs several GPUs at once: select two or more with --devices")
    if request.one_at_a_time and len(devices) < 2:
        raise UsageError("--one-at-a-time runs several GPUs one after another: select two or more with --devices")
    if request.concurrent and request.one_at_a_time:
        raise UsageError("--concurrent and --one-at-a-time contradict each other: choose one")
    return devices


class _Uncounted(Gpu):
    """The GPUs of a machine that may have none (``sweep --list``): the visible ones; where there are none,
    ``--devices all`` plans for as many as any experiment needs, and a GPU named by its ordinal is refused (there
    is none to check it against)."""

    def count(self) -> int:
        from bench.experiments import registry

        if env.no_gpu_reason() is None:
            return env.gpu_count()
        return max(item.processes.gpus for item in registry().values())


def listing_devices(request: Request) -> tuple[int, ...]:
    """The GPUs ``sweep --list`` plans for, checked as :func:`selected_devices` checks a sweep's; needs no GPU, but
    a GPU named by its ordinal must exist."""
    named = request.devices if request.devices not in ((), "all") else (request.device,) * (request.device != 0)
    reason = env.no_gpu_reason()
    if named and reason:
        option = "--devices" if request.devices else "--device"
        raise UsageError(f"{option} {','.join(map(str, named))}: no GPU is visible here to check it against "
                         f"({reason}); sweep --list plans for GPU 0 without it, or for every GPU an experiment "
                         "needs with --devices all")
    if not request.devices and reason is None:
        env.gpu_environment(request.device)  # UsageError for a GPU that is not there
    return selected_devices(request, _Uncounted())


def check(request: Request, planned: Planned, gpu: Gpu, run_id: str) -> Checked:
    """Output path, GPU, resume file and memory; UsageError for the first problem, with nothing written."""
    earlier = check_paths(request, planned)
    devices = planned.devices
    selected = {device: gpu.select(device) for device in devices}
    environments = {device: environment.as_dict() for device, environment in selected.items()}
    plans = list(planned.plans)
    if earlier is not None:
        uuids = {device: selected[device].device.gpu_uuid for device in devices}
        resume.check_gpus(earlier, uuids)
        plans = resume.remaining(plans, earlier, uuids)
        path = request.resume
    else:
        path = results_path(request.out, run_id, selected[devices[0]].device.gpu_name)
    host_available = env.host_memory_available()
    if len(selected) > 1 and any(request.at_once(item.experiment) for item in plans):
        host_available //= len(selected)  # every GPU's buffers at once
    for device, environment in selected.items():
        mine = [item for item in plans if device in item.devices]
        problem = memory_problem(mine, environment.device.gpu_name, gpu.free_bytes(environment), host_available)
        if problem:
            raise UsageError(problem if len(selected) == 1 else f"{problem} (GPU {device})")
    return Checked(plans, devices, path, run_id, selected, environments, earlier)


def check_paths(request: Request, planned: Planned) -> resume.Earlier | None:
    """Where the sweep writes, checked: the file it resumes (read), else --out; UsageError for the first problem."""
    if request.resume is not None:
        return resume.read(request.resume, store.suite_schema(experiments_of(planned.plans)))
    writes.claim(request.out, writes.writer("sweep", "--out"))
    return None


def memory_problem(plans: Sequence[Plan], gpu_name: str, device_free: int, host_available: int) -> str | None:
    """Why the plans cannot run in this much device and host memory, or None."""
    for item in plans:
        if not item.configs:
            continue
        device_bytes, host_bytes = item.experiment.cost.memory_needed(item.configs)
        if device_bytes > device_free:
            return (f"--sizes: {item.experiment.name} needs {format_size(device_bytes)} of device memory; "
                    f"{gpu_name} has {format_size(device_free)} free")
        if host_bytes > host_available:
            return (f"--sizes: {item.experiment.name} needs {format_size(host_bytes)} of host memory; "
                    f"{format_size(host_available)} is available")
    return None


def results_path(out: Path, run_id: str, gpu_name: str) -> Path:
    """Where a new sweep writes: ``out`` itself if it names a .parquet file, else ``out/<run_id>-<gpu>.parquet``
    (where another run took that name first, its first save takes the next free one: see
    :func:`bench.results.store.write_table`)."""
    if out.suffix == ".parquet":
        return out
    slug = "".join(c if c.isalnum() else "-" for c in gpu_name).strip("-")
    return out / f"{run_id}-{slug}.parquet"
