"""Copy bandwidth with cudaMemcpyAsync: direction × host memory kind × size.

``H2D``, ``D2H`` and ``D2D`` are one copy stream each; ``BIDIR`` runs H2D and D2H at once on two streams and
reports their sum (``gbps``: both directions' bytes over the makespan) and each direction (``h2d_gbps``,
``d2h_gbps``: its bytes over the time from the common start to that stream's end). D2D counts each byte once,
as nvbandwidth does (device memory traffic is twice that). Pinned and registered copies are timed behind the gate;
pageable copies cannot be (see ``bench.timing``), and their time includes the host's staging work, which is the
point: that is what a pageable copy costs.

Every configuration is verified once before it is timed: the destination is poisoned with a byte the random source
never contains, one copy runs, and the destination must equal the source byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

import cupy
import numpy as np
import pandas as pd
from cupy.cuda import runtime

from bench.experiments import Config, Experiment, Row
from bench.memory import HOST_MEMORY, BufferSet, DeviceBuffer, HostBuffer
from bench.timing import MeasurementFailed, Timer, untimed_columns
from bench.units import format_size

DIRECTIONS = ("H2D", "D2H", "D2D", "BIDIR")
HOST_KINDS = (*HOST_MEMORY, "device")  # a D2D copy touches no host memory: its host_memory is "device"
POISON = 0xA5
_FILL_CHUNK = 64 << 20


@dataclass(frozen=True)
class _Copy:
    """One cudaMemcpyAsync, and where its result can be checked: ``dst`` must equal ``expected`` afterwards."""

    stream: cupy.cuda.Stream
    dst_ptr: int
    src_ptr: int
    kind: int
    dst: object  # numpy or CuPy uint8 view of the destination
    expected: object  # the same kind of view of memory holding the source's bytes

    def enqueue(self, nbytes: int) -> None:
        runtime.memcpyAsync(self.dst_ptr, self.src_ptr, nbytes, self.kind, self.stream.ptr)


class _Buffers(BufferSet):
    """Source and destination buffers of the largest size needed, shared by a host memory kind's configurations."""

    def __init__(self, host_memory: str, nbytes: int, seed: int = 0) -> None:
        super().__init__(streams=2)
        with self.freed_on_failure():
            self.device_src = self.take(DeviceBuffer("malloc", nbytes))
            self.device_dst = self.take(DeviceBuffer("malloc", nbytes))
            self.host_src = self.host_dst = None
            _fill_random(self.device_src.array, seed)
            if host_memory != "device":
                self.host_src = self.take(HostBuffer(host_memory, nbytes))
                self.host_dst = self.take(HostBuffer(host_memory, nbytes))
                runtime.memcpy(self.host_src.ptr, self.device_src.ptr, nbytes, runtime.memcpyDeviceToHost)

    def copies(self, direction: str) -> list[_Copy]:
        first, second = self.streams
        h2d = _Copy(first, self.device_dst.ptr, self.host_src.ptr, runtime.memcpyHostToDevice,
                    self.device_dst.array, self.device_src.array) if self.host_src else None
        if direction == "H2D":
            return [h2d]
        if direction == "D2H":
            return [_Copy(first, self.host_dst.ptr, self.device_src.ptr, runtime.memcpyDeviceToHost,
                          self.host_dst.array, self.host_src.array)]
        if direction == "BIDIR":
            return [h2d, _Copy(second, self.host_dst.ptr, self.device_src.ptr, runtime.memcpyDeviceToHost,
                               self.host_dst.array, self.host_src.array)]
        return [_Copy(first, self.device_dst.ptr, self.device_src.ptr, runtime.memcpyDeviceToDevice,
                      self.device_dst.array, self.device_src.array)]


def _fill_random(device_bytes: cupy.ndarray, seed: int) -> None:
    """Random bytes that are never POISON, so an unwritten destination byte can never pass for a copied one."""
    generator = cupy.random.RandomState(seed)
    for offset in range(0, device_bytes.size, _FILL_CHUNK):
        count = min(_FILL_CHUNK, device_bytes.size - offset)
        chunk = generator.randint(0, 255, size=count, dtype=cupy.int32).astype(cupy.uint8)  # 0..254
        chunk += chunk >= POISON  # 0..255 without POISON
        device_bytes[offset : offset + count] = chunk
    cupy.cuda.runtime.deviceSynchronize()


def _mismatch(copies: Sequence[_Copy], nbytes: int) -> str | None:
    """Poison, copy once, compare. None when every destination byte equals the source; else what went wrong."""
    for copy in copies:
        with copy.stream:
            copy.dst[:nbytes].fill(POISON)
    for copy in copies:
        copy.enqueue(nbytes)
    for copy in copies:
        copy.stream.synchronize()
    for copy in copies:
        xp = cupy.get_array_module(copy.dst)
        with copy.stream:
            differ = xp.flatnonzero(copy.dst[:nbytes] != copy.expected[:nbytes])
            if differ.size:
                return (f"data mismatch after copy: {differ.size} of {nbytes} bytes differ "
                        f"(first at offset {int(differ[0])})")
    return None


def _measure(config: Config, buffers: _Buffers, timer: Timer) -> Row:
    nbytes, direction = config["bytes"], config["direction"]
    copies = buffers.copies(direction)
    gated = config["host_memory"] != "pageable"
    row = {**config, **untimed_columns(gated), "gbps": np.nan, "h2d_gbps": np.nan, "d2h_gbps": np.nan,
           "verified": False, "status": "failed", "error": ""}
    mismatch = _mismatch(copies, nbytes)
    if mismatch:
        row["error"] = mismatch
        return row
    row["verified"] = True

    def enqueue(ops: int) -> None:
        for _ in range(ops):
            for copy in copies:
                copy.enqueue(nbytes)

    try:
        timing = timer.measure(enqueue, [copy.stream for copy in copies], gated=gated)
    except MeasurementFailed as error:
        row["error"] = str(error)
        return row
    row.update(timing.columns(), status="ok", gbps=len(copies) * nbytes / (timing.summary.median_ms * 1e6))
    if direction == "BIDIR":
        row["h2d_gbps"] = nbytes / (timing.stream_median_ms(0) * 1e6)
        row["d2h_gbps"] = nbytes / (timing.stream_median_ms(1) * 1e6)
    return row


@contextmanager
def verified_copy(direction: str, host_memory: str, nbytes: int, stream) -> Iterator[Callable[[], None]]:
    """One ``direction`` copy (H2D, D2H or D2D) of ``nbytes`` on ``stream``, its data verified once as the
    experiment does; yields the function that enqueues it. MeasurementFailed if the data did not arrive."""
    with _Buffers(host_memory, nbytes) as buffers:
        (copy,) = buffers.copies(direction)
        copy = replace(copy, stream=stream)
        mismatch = _mismatch([copy], nbytes)
        if mismatch:
            raise MeasurementFailed(mismatch)
        yield lambda: copy.enqueue(nbytes)
        stream.synchronize()


def run(configs: Sequence[Config], timer: Timer) -> Iterator[Row]:
    """One row per configuration, one host memory kind at a time so its buffers are allocated once."""
    for host_memory in dict.fromkeys(config["host_memory"] for config in configs):
        group = [config for config in configs if config["host_memory"] == host_memory]
        with _Buffers(host_memory, max(config["bytes"] for config in group)) as buffers:
            for config in group:
                yield _measure(config, buffers, timer)


def memory_needed(configs: Sequence[Config]) -> tuple[int, int]:
    largest = max(config["bytes"] for config in configs)
    on_host = any(config["host_memory"] != "device" for config in configs)
    return 2 * largest + 4 * _FILL_CHUNK, 2 * largest if on_host else 0


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Per direction × host memory: GB/s at 16 MiB and the peak (with the size it was reached at)."""
    ok = rows[rows["status"] == "ok"]
    lines = []
    for (direction, host_memory), group in ok.groupby(["direction", "host_memory"], sort=False):
        at_16mib = group.loc[group["bytes"] == 16 << 20, "gbps"]
        peak = group.loc[group["gbps"].idxmax()]
        lines.append({
            "direction": direction,
            "host memory": host_memory,
            "GB/s at 16 MiB": f"{at_16mib.iloc[0]:.1f}" if len(at_16mib) else "—",
            "peak GB/s": f"{peak['gbps']:.1f}",
            "peak at": format_size(int(peak["bytes"])),
        })
    return pd.DataFrame(lines)


EXPERIMENT = Experiment(
    name="bandwidth",
    description="cudaMemcpyAsync bandwidth: H2D, D2H, D2D, BIDIR × pinned/pageable/registered × size",
    axes={"host_memory": HOST_KINDS, "direction": DIRECTIONS, "bytes": tuple(1 << p for p in range(12, 31))},
    quick_axes={"bytes": tuple(1 << p for p in range(12, 31, 3))},
    valid=lambda config: (config["direction"] == "D2D") == (config["host_memory"] == "device"),
    run=run,
    memory_needed=memory_needed,
    headline=headline,
)
