"""A trace's timeline (rows of a ``trace`` table of one target), as ``bench trace --plot`` draws it and the report
shows it: a lane per stream, the GPU's idle gaps and the host's waits. The analysis side: pandas and matplotlib
through :mod:`bench.analysis.plots`."""

from __future__ import annotations

import pandas as pd

from bench.analysis.plots import literal, pyplot
from bench.usercode.trace.collectives import is_collective

COMMUNICATION = "communication"  # NCCL's kernels, drawn in a colour of their own
COLORS = {"kernel": "#4c72b0", COMMUNICATION: "#64b5cd", "memset": "#8172b3", "H2D": "#55a868", "D2H": "#dd8452",
          "D2D": "#937860", "H2H": "#da8bc3", "P2P": "#8c8c8c", "idle": "#c44e52", "wait": "#c44e52"}


def _devices_of(rows: pd.DataFrame) -> list[int]:
    """Each row's GPU: -1 for a host wait, 0 where its file predates the column (read with newer files, its rows
    hold it empty)."""
    if "device" not in rows:
        return [0] * len(rows)
    return [-1 if int(stream) == -2 else 0 if pd.isna(device) else int(device)
            for device, stream in zip(rows["device"], rows["stream"])]


def _lanes(rows: pd.DataFrame) -> tuple[dict[tuple[int, int], int], list[str]]:
    """The lane of each (device, stream) and the lanes' labels: each GPU's streams, then its idle gaps (of one GPU:
    "GPU idle" after its streams), then the host's waits, key (-1, -2)."""
    devices = sorted(set(rows.loc[rows["stream"] >= -1, "device"]) - {-1})
    several = len(devices) > 1
    keys: list[tuple[int, int]] = []
    labels: list[str] = []
    for device in devices:
        mine = rows[(rows["device"] == device) & (rows["stream"] >= 0)]
        for stream in sorted(int(stream) for stream in mine["stream"].unique()):
            keys.append((device, stream))
            labels.append(f"GPU {device} stream {stream}" if several else f"stream {stream}")
        keys.append((device, -1))
        labels.append(f"GPU {device} idle" if several else "GPU idle")
    if not devices:
        keys.append((0, -1))
        labels.append("GPU idle")
    keys.append((-1, -2))
    labels.append("host waits")
    return {key: lane for lane, key in enumerate(keys)}, labels


def _bars(ax, rows: pd.DataFrame, lanes: dict[tuple[int, int], int]) -> None:
    """A bar per row in its lane (rows in no lane are left out), in its op's colour: one collection per look (plain,
    pageable copies hatched, the host's waits faint), not one per bar, which made a trace's figure slow to draw."""
    from matplotlib.collections import PolyCollection

    memory = rows["host_memory"] if "host_memory" in rows else pd.Series("", index=rows.index)
    pageable = (memory == "pageable").fillna(False).to_numpy(dtype=bool)
    looks: dict[tuple[bool, bool], list] = {}
    for start, end, op, stream, device, paged in zip(rows["start_ms"], rows["end_ms"], rows["op"], rows["stream"],
                                                      rows["device"], pageable):
        lane = lanes.get((-1, -2) if int(stream) == -2 else (int(device), int(stream)))
        if lane is not None:
            x1 = start + max(end - start, 1e-4)
            looks.setdefault((bool(paged), op == "wait"), []).append(
                ([(start, lane - 0.4), (start, lane + 0.4), (x1, lane + 0.4), (x1, lane - 0.4)],
                 COLORS.get(op, "#999999")))
    for (paged, wait), bars in looks.items():
        ax.add_collection(PolyCollection([corners for corners, _ in bars], facecolors=[color for _, color in bars],
                                         edgecolors="black" if paged else "none", linewidths=0.4,
                                         hatch="//" if paged else None, alpha=0.55 if wait else 1))
    if looks:
        ax.autoscale_view()


def timeline(rows: pd.DataFrame, title: str):
    """One trace's timeline (rows of a ``trace`` table of one target): a lane per stream with its kernels (NCCL's as
    communication) and each copy direction in their own colours (pageable copies hatched), the GPU's idle gaps and
    the host's waits below; with several GPUs, a group of lanes per GPU, each with its idle lane. ``title`` is drawn
    as written (:func:`bench.analysis.plots.literal`)."""
    plt = pyplot()
    from matplotlib.patches import Patch

    if not len(rows):
        figure, ax = plt.subplots(figsize=(11, 1.5))
        ax.text(0.5, 0.5, "nothing ran on the GPU", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        ax.set_title(literal(title), fontsize=10, loc="left")
        return figure
    rows = rows.assign(device=_devices_of(rows))
    rows = rows.assign(op=[COMMUNICATION if op == "kernel" and is_collective(name) else op
                           for op, name in zip(rows["op"], rows["name"].fillna("").astype(str))])
    work = rows[rows["stream"] >= 0]
    lanes, labels = _lanes(rows)
    figure, ax = plt.subplots(figsize=(11, 1.2 + 0.42 * len(labels)))
    _bars(ax, rows, lanes)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("ms from the first GPU start")
    shown = [op for op in COLORS if op in set(rows["op"]) and op != "wait"]
    handles = [Patch(facecolor=COLORS[op], label=op) for op in shown]
    if (work["host_memory"] == "pageable").any():
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="//", label="pageable copy"))
    figure.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.1 / figure.get_figheight()),
                  ncol=len(handles), frameon=False, fontsize=8)
    ax.set_title(literal(title), fontsize=10, loc="left")
    figure.tight_layout(rect=(0, 0.4 / figure.get_figheight(), 1, 1))  # the legend's row below the axis label
    return figure
