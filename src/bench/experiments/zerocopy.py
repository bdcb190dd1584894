"""Copies done by the SMs instead of the copy engines: a kernel reading or writing mapped pinned host memory.

``H2D``: a numba-cuda kernel reads pinned host memory (``cudaHostAlloc``, mapped into the GPU's address space) and
writes device memory; ``D2H`` reads device memory and writes the host. The kernel moves 8-byte words, a full wave of
resident blocks (``SmCopy`` in :mod:`bench.measure.kernels`) striding over them with four loads in flight per
thread, the shape of nvbandwidth's ``host_to_device_memcpy_sm`` / ``device_to_host_memcpy_sm`` tests. Timed with
CUDA events behind the gate like the copy-engine copies of the ``bandwidth`` experiment, which its figure shows
beside them; the data is verified once per configuration (random source, poisoned destination, byte for byte).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bench.cuda import kernels
from bench.experiments import Config, Experiment, Row
from bench.measure import columns
from bench.measure.copies import CopyBuffers, verified_and_timed
from bench.schema import TEXT, column
from bench.timing import Context, Samples, StopRule
from bench.units import format_size

DIRECTIONS = ("H2D", "D2H")
_TYPICAL_GBPS = 50.0
METRIC = "GPU time per SM copy"

COLUMNS = (
    column("direction", TEXT, "H2D (the kernel reads mapped host memory) or D2H (it writes it)", DIRECTIONS),
    columns.BYTES_PER_COPY,
    columns.GBPS,
    columns.VERIFIED_COPY,
)


def seconds(config: Config, rule: StopRule) -> float:
    copy_s = config["bytes"] / (_TYPICAL_GBPS * 1e9)
    batch_s = max(copy_s, rule.batch_ms / 1e3)
    checking_s = config["bytes"] / 1.5e9 if config["direction"] == "D2H" else 0.0
    return 0.01 + 3 * copy_s + checking_s + (1 + rule.warmup_batches + rule.min_samples) * batch_s


def memory_needed(configs: Sequence[Config]) -> tuple[int, int]:
    largest = max(config["bytes"] for config in configs)
    return 2 * largest + (256 << 20), 2 * largest


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Per direction: the SM copy's peak and its rate at 16 MiB."""
    ok = rows[rows["status"] == "ok"]
    lines = []
    for direction, group in ok.groupby("direction", sort=False):
        peak = group.loc[group["gbps"].idxmax()]
        at_16mib = group.loc[group["bytes"] == 16 << 20, "gbps"]
        lines.append({"direction": direction, "GB/s at 16 MiB": f"{at_16mib.iloc[0]:.1f}" if len(at_16mib) else "—",
                      "peak GB/s": f"{peak['gbps']:.1f}", "peak at": format_size(int(peak["bytes"]))})
    return pd.DataFrame(lines)


def answer(rows: pd.DataFrame) -> str | None:
    """Peak GB/s of a kernel reading and writing mapped pinned host memory."""
    table = headline(rows)
    if not len(table):
        return None
    return "a kernel on mapped pinned host memory, peak GB/s: " + ", ".join(
        f"{line['direction']} {line['peak GB/s']}" for _, line in table.iterrows())


def zerocopy_figure(rows: pd.DataFrame, tables: dict) -> list:
    """GB/s vs size: SM copies (solid) beside the copy engines' pinned copies from the same run (dashed)."""
    from bench.plots import DIRECTION_COLORS, gpu_label, pyplot, size_axis

    sm = rows[(rows["experiment"] == "zerocopy") & (rows["status"] == "ok")]
    if not len(sm):
        return []
    ce = rows[(rows["experiment"] == "bandwidth") & (rows["status"] == "ok") & (rows["host_memory"] == "pinned")]
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(9, 5.5), constrained_layout=True)
    for direction in DIRECTIONS:
        color = DIRECTION_COLORS[direction]
        for frame, style, label in ((sm, "-", "SM copy (kernel, mapped host memory)"),
                                    (ce, "--", "copy engine (cudaMemcpyAsync, pinned)")):
            group = frame[frame["direction"] == direction].sort_values("bytes")
            if len(group):
                ax.plot(group["bytes"].astype(float), group["gbps"], style, marker="o", markersize=3, color=color,
                        label=f"{direction} {label}")
    size_axis(ax, sm["bytes"].to_numpy(dtype=float))
    ax.set_ylim(bottom=0)
    ax.set_ylabel("GB/s (10⁹ bytes/s), median")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"SM copies vs copy engines on {gpu_label(sm)}")
    return [("zerocopy", figure)]


# --- measuring code --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _SmCopy:
    """A copy the kernel does, with what :func:`bench.measure.copies.mismatch` needs to check it."""

    stream: object
    dst_ptr: int
    src_ptr: int
    dst: object
    expected: object
    kernel: object

    def enqueue(self, nbytes: int) -> None:
        self.kernel.launch(self.stream, self.dst_ptr, self.src_ptr, nbytes)


def _copy(buffers: CopyBuffers, direction: str, kernel) -> _SmCopy:
    stream = buffers.streams[0]
    if direction == "H2D":
        return _SmCopy(stream, buffers.device_dst.ptr, buffers.host_src.ptr, buffers.device_dst.array,
                       buffers.device_src.array, kernel)
    return _SmCopy(stream, buffers.host_dst.ptr, buffers.device_src.ptr, buffers.host_dst.array,
                   buffers.host_src.array, kernel)


def _measure(config: Config, copy: _SmCopy, context: Context) -> Row:
    row = {**config, **Samples.missing("ms", "gpu", METRIC, True), "gbps": np.nan, "verified": False,
           "status": "failed", "error": ""}
    verified_and_timed(row, [copy], config["bytes"], context.timer(), METRIC)
    return row


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    kernel = kernels.SmCopy()
    with CopyBuffers("pinned", max(config["bytes"] for config in configs)) as buffers:
        for config in configs:
            yield _measure(config, _copy(buffers, config["direction"], kernel), context)


EXPERIMENT = Experiment(
    name="zerocopy",
    description="SM copies: a kernel reading (H2D) or writing (D2H) mapped pinned host memory, × size",
    axes={"direction": DIRECTIONS, "bytes": tuple(1 << p for p in range(12, 31, 2))},
    quick={"bytes": (64 << 10, 16 << 20)},
    full={"bytes": tuple(1 << p for p in range(12, 31))},
    columns=COLUMNS,
    measure=measure,
    headline=headline,
    answer=answer,
    seconds=seconds,
    memory_needed=memory_needed,
    figures=(zerocopy_figure,),
    order=11,
    setup_s=1.2,  # compiling the copy kernel (a fresh machine has no cache), 1 GiB buffers filled
    share_s=4,
)
