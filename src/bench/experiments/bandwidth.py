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

from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd

from bench.experiments import Config, Experiment, Row
from bench.measure import columns
from bench.measure.copies import FILL_CHUNK, CopyBuffers, by_host_memory, verified_and_timed
from bench.measure.memory import HOST_MEMORY
from bench.schema import FLOAT, TEXT, column
from bench.timing import Context, Samples, StopRule
from bench.units import format_size

DIRECTIONS = ("H2D", "D2H", "D2D", "BIDIR")
HOST_KINDS = (*HOST_MEMORY, "device")  # a D2D copy touches no host memory: its host_memory is "device"
PAGEABLE_TIME_CAP_S = 0.12  # pageable copies vary run to run by far more than longer sampling would pin down
_TYPICAL_GBPS = {"pinned": 50.0, "registered": 50.0, "pageable": 10.0, "device": 1500.0}  # for the time estimate

COLUMNS = (
    column("host_memory", TEXT, "pinned (cudaHostAlloc), pageable, registered (cudaHostRegister), or device for "
                                "D2D", HOST_KINDS),
    column("direction", TEXT, "H2D, D2H, D2D, or BIDIR (H2D and D2H at once on two streams)", DIRECTIONS),
    columns.BYTES_PER_COPY,
    column("gbps", FLOAT, "GB/s (1e9 bytes/s) at the median; BIDIR: both directions' bytes over the makespan"),
    column("h2d_gbps", FLOAT, "BIDIR: the H2D stream's bytes over its own time"),
    column("d2h_gbps", FLOAT, "BIDIR: the D2H stream's bytes over its own time"),
    columns.VERIFIED_COPY,
)


# --- description ---------------------------------------------------------------------------------------------

def valid(config: Config) -> bool:
    return (config["direction"] == "D2D") == (config["host_memory"] == "device")


def lean(config: Config) -> bool:
    """The default sweep leaves 1 GiB pageable copies (a second or two each, no new answer) to --full."""
    return not (config["host_memory"] == "pageable" and config["bytes"] >= 1 << 30)


def seconds(config: Config, rule: StopRule) -> float:
    """Expected wall time: verification and two sizing copies, a warm-up batch, then ``min_samples`` batches of
    about ``batch_ms`` (or of one copy, for longer copies); pageable copies are noisy and sample longer."""
    copies = 2 if config["direction"] == "BIDIR" else 1
    copy_s = copies * config["bytes"] / (_TYPICAL_GBPS[config["host_memory"]] * 1e9)
    batch_s = max(copy_s, rule.batch_ms / 1e3)
    sampling_s = rule.min_samples * batch_s
    if config["host_memory"] == "pageable":  # noisy: several times the minimum, up to the time cap
        sampling_s = max(sampling_s, min(rule.time_cap_s, PAGEABLE_TIME_CAP_S, 8 * sampling_s))
    # poisoning and comparing a host destination runs at a few GB/s
    checking_s = config["bytes"] / 1.5e9 if config["direction"] in ("D2H", "BIDIR") else 0.0
    return 0.01 + 3 * copy_s + checking_s + (1 + rule.warmup_batches) * batch_s + sampling_s


def memory_needed(configs: Sequence[Config]) -> tuple[int, int]:
    largest = max(config["bytes"] for config in configs)
    on_host = any(config["host_memory"] != "device" for config in configs)
    return 2 * largest + 4 * FILL_CHUNK, 2 * largest if on_host else 0


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


def answer(rows: pd.DataFrame) -> str | None:
    """Peak GB/s of each direction and kind of memory."""
    table = headline(rows)
    if not len(table):
        return None
    return "peak GB/s: " + ", ".join(f"{line['direction']} {line['host memory']} {line['peak GB/s']}"
                                     for _, line in table.iterrows())


HOST_STYLES = {"pinned": ("-", "o"), "registered": ("--", "s"), "pageable": (":", "^"), "device": ("-", "D")}


def bandwidth_figure(rows: pd.DataFrame, tables: dict) -> list:
    """GB/s vs size: host↔device on the left with the PCIe link's theoretical rate, device↔device on the right."""
    from bench.env import pcie_gbps_per_direction
    from bench.plots import DIRECTION_COLORS, pyplot, size_axis

    rows = rows[rows["experiment"] == "bandwidth"]
    ok = rows[rows["status"] == "ok"]
    if not len(rows):
        return []
    plt = pyplot()
    env = rows.iloc[0]
    figure, (pcie_ax, device_ax) = plt.subplots(
        1, 2, figsize=(14, 7.2), gridspec_kw={"width_ratios": [2.3, 1]}, constrained_layout=True
    )
    for (direction, host_memory), group in ok.groupby(["direction", "host_memory"], sort=False):
        group = group.sort_values("bytes")
        sizes = group["bytes"].astype(float)
        ax = device_ax if direction == "D2D" else pcie_ax
        linestyle, marker = HOST_STYLES.get(host_memory, ("-", "o"))
        color = DIRECTION_COLORS.get(direction, "k")
        copies = 2 if direction == "BIDIR" else 1
        label = f"{direction} {host_memory}" + (" (sum of both)" if direction == "BIDIR" else "")
        ax.plot(sizes, group["gbps"], linestyle=linestyle, marker=marker, markersize=4, color=color, label=label)
        # Samples' range as a band: the slowest sample gives the lowest rate.
        ax.fill_between(sizes, copies * sizes / (group["max"] * 1e6), copies * sizes / (group["min"] * 1e6),
                        color=color, alpha=0.12, linewidth=0)
    link = pcie_gbps_per_direction(int(env["pcie_gen_max"]), int(env["pcie_width_max"]))
    if link:
        name = f"PCIe Gen{int(env['pcie_gen_max'])} x{int(env['pcie_width_max'])}"
        pcie_ax.axhline(link, color="0.3", linestyle="-.", linewidth=1,
                        label=f"{name} theoretical, one direction ({link:.1f} GB/s)")
        pcie_ax.axhline(2 * link, color="0.6", linestyle="-.", linewidth=1,
                        label=f"{name} theoretical, both directions ({2 * link:.1f} GB/s)")
    l2_bytes = int(env["l2_cache_bytes"]) if pd.notna(env.get("l2_cache_bytes")) else 0
    if l2_bytes and (ok["direction"] == "D2D").any():
        # Repeated copies between two buffers that together fit in L2 measure the cache, not device memory.
        device_ax.axvline(l2_bytes / 2, color="0.5", linestyle=":", linewidth=1,
                          label=f"source + destination = L2 ({l2_bytes / 1e6:.0f} MB):\ncache-assisted to the left")
    for ax, title in ((pcie_ax, "Host ↔ device (cudaMemcpyAsync)"), (device_ax, "Device → device")):
        ax.set_title(title)
        ax.set_ylabel("GB/s (10⁹ bytes/s), median")
        ax.set_ylim(bottom=0)
        ax.grid(True, which="major", alpha=0.3)
        if len(ok):
            size_axis(ax, ok["bytes"].to_numpy(dtype=float))
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3 if ax is pcie_ax else 1)
    failed = int((rows["status"] != "ok").sum())
    figure.suptitle(
        f"Copy bandwidth on {env['gpu_name']} — driver {env['driver_version']}, CUDA runtime {env['cuda_runtime']}, "
        f"link now Gen{env['pcie_gen']} x{env['pcie_width']}"
        + (f" — {failed} configuration(s) failed, not shown" if failed else "")
    )
    figure.supxlabel("band: min–max of samples; pageable copies are timed without the gate, so their time includes "
                     f"the host's staging work.   run {env['run_id']}, commit {str(env['git_commit'])[:12]}",
                     fontsize=7, color="0.4")
    return [("bandwidth", figure)]


# --- measuring code --------------------------------------------------------------------------------------------

def _metric(direction: str) -> str:
    return "GPU time per pair of copies (H2D and D2H at once)" if direction == "BIDIR" else "GPU time per copy"


def _measure(config: Config, buffers: CopyBuffers, context: Context) -> Row:
    nbytes, direction = config["bytes"], config["direction"]
    gated = config["host_memory"] != "pageable"
    row = {**config, **Samples.missing("ms", "gpu", _metric(direction), gated), "gbps": np.nan, "h2d_gbps": np.nan,
           "d2h_gbps": np.nan, "verified": False, "status": "failed", "error": ""}
    timing = verified_and_timed(row, buffers.copies(direction), nbytes, context.timer("default" if gated else "pageable"),
                                _metric(direction), gated)
    if timing is not None and direction == "BIDIR":
        row["h2d_gbps"] = nbytes / (timing.stream_median_ms(0) * 1e6)
        row["d2h_gbps"] = nbytes / (timing.stream_median_ms(1) * 1e6)
    return row


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    """One row per configuration, one host memory kind at a time so its buffers are allocated once."""
    return by_host_memory(configs, CopyBuffers, lambda config, buffers: _measure(config, buffers, context))


EXPERIMENT = Experiment(
    name="bandwidth",
    description="cudaMemcpyAsync bandwidth: H2D, D2H, D2D, BIDIR × pinned/pageable/registered × size",
    axes={"host_memory": HOST_KINDS, "direction": DIRECTIONS, "bytes": tuple(1 << p for p in range(12, 31, 2))},
    quick={"bytes": (64 << 10, 16 << 20)},
    full={"bytes": tuple(1 << p for p in range(12, 31))},
    columns=COLUMNS,
    measure=measure,
    headline=headline,
    answer=answer,
    seconds=seconds,
    valid=valid,
    lean=lean,
    memory_needed=memory_needed,
    figures=(bandwidth_figure,),
    order=10,
    stop_rules={"pageable": {"time_cap_s": PAGEABLE_TIME_CAP_S}},
    share_s=15,
)
