"""A GPU without a GPU, for tests of the runner. Apart from :mod:`fake_experiments`, which every experiment process
imports to unpickle its experiment: this module's preflight (and the pandas under it) stays out of them."""

from __future__ import annotations

from bench.sweep import preflight


class FakeGpu(preflight.Gpu):
    """A GPU that selects without CUDA; it records what the runner asked of it."""

    def __init__(self, uuid: str = "GPU-fake", free: int = 1 << 40, gpus: int = 1, marker=None,
                 sees: bool = False) -> None:
        self.uuid, self.free, self.gpus, self.marker = uuid, free, gpus, marker
        self.sees = sees  # its processes are shown their GPU alone (real GPUs are; fakes leave CUDA alone)
        self.selected: list[int] = []

    def warm_markers(self, environment):
        return self.marker

    def select(self, device: int):
        from synthetic import environment

        self.selected.append(device)
        uuid = self.uuid if device == 0 else f"{self.uuid}-{device}"
        return environment(gpu_name="Fake GPU", gpu_uuid=uuid, gpu_index=device, pci_bus_id="")

    def count(self) -> int:
        return self.gpus

    def free_bytes(self, environment) -> int:
        return self.free

    def child_device(self, device: int):
        return None

    def child_sees(self, environment):
        return environment.device.gpu_uuid if self.sees else None

    def child_cpus(self, environment) -> list[int]:
        return []
