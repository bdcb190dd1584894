"""The environment a row records, as a record of its parts: the GPU, CUDA, the PCIe link, the clocks, the host and the
GPU's place in it (:class:`Environment`); :mod:`bench.platform.env` reads it. Imports nothing of bench."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class Device:
    """The GPU: its name, UUID, CUDA ordinal and PCI bus id, and what CUDA says it is."""

    gpu_name: str
    gpu_uuid: str
    gpu_index: int
    pci_bus_id: str
    compute_capability: str
    sm_count: int
    device_memory_bytes: int
    l2_cache_bytes: int
    async_engine_count: int


@dataclass(frozen=True)
class Cuda:
    """The NVIDIA driver's version, and the CUDA versions of the driver and of the runtime."""

    driver_version: str
    cuda_driver: str
    cuda_runtime: str


@dataclass(frozen=True)
class Link:
    """The GPU's PCIe link."""

    pcie_gen: int  # current link generation; an idle link may have dropped to a lower one to save power
    pcie_width: int
    pcie_gen_max: int  # what the GPU and the slot can reach together
    pcie_width_max: int


@dataclass(frozen=True)
class Clocks:
    """The GPU's SM and memory clocks, now and at most."""

    sm_clock_mhz: int
    mem_clock_mhz: int
    sm_clock_max_mhz: int
    mem_clock_max_mhz: int


@dataclass(frozen=True)
class Host:
    """The host and what ran on it: its name, Python's version, the measuring stack's libraries' (a field each:
    :data:`bench.platform.libraries.REQUIRED`), numpy's, bench's and the commit."""

    hostname: str
    python_version: str
    cupy_version: str
    numba_cuda_version: str
    numpy_version: str
    bench_version: str
    git_commit: str


@dataclass(frozen=True)
class Topology:
    """Where the GPU sits: the CPUs near it and its NVLinks."""

    host_cpus: str = ""  # the CPUs experiment processes run on: those NVML calls local to the GPU ("" if unknown)
    nvlinks: int = -1  # the GPU's active NVLink links (0: none; -1: unknown)


@dataclass(frozen=True)
class Environment:
    """One row's worth of environment columns (every result row carries them), in parts: the GPU, CUDA, the PCIe link,
    the clocks, the host and the GPU's place in it; :meth:`as_dict` is the columns, :meth:`fields` their fields, part
    after part, in the rows' order. The measuring stack's libraries (:data:`bench.platform.libraries.REQUIRED`) have a
    version field each; an optional library's version is a column of the rows that measured it or ran with it loaded
    (:func:`bench.results.schema.environment_columns`), never a field here: a sweep's environment columns replace a
    row's own."""

    device: Device
    cuda: Cuda
    link: Link
    clocks: Clocks
    host: Host
    topology: Topology = Topology()

    @staticmethod
    def fields() -> tuple[dataclasses.Field, ...]:
        """Every column's field, in the rows' order."""
        return tuple(column for part in PARTS.values() for column in dataclasses.fields(part))

    @classmethod
    def of(cls, **columns) -> Environment:
        """The environment of these columns (what :meth:`as_dict` gives); TypeError for a column it lacks or does not
        have."""
        unknown = set(columns) - {column.name for column in cls.fields()}
        if unknown:
            raise TypeError(f"Environment has no column {', '.join(sorted(unknown))}")
        return cls(**{name: part(**{column.name: columns[column.name] for column in dataclasses.fields(part)
                                    if column.name in columns}) for name, part in PARTS.items()})

    def as_dict(self) -> dict:
        return {name: value for part in PARTS for name, value in dataclasses.asdict(getattr(self, part)).items()}


PARTS = {"device": Device, "cuda": Cuda, "link": Link, "clocks": Clocks, "host": Host, "topology": Topology}  # the
# Environment's parts, in the rows' order
