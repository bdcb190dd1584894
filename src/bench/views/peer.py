"""The ``peer`` experiment's view: GB/s between GPUs by copy method, GPU × GPU matrices per size."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.analysis.selection import row_dicts
from bench.platform.units import format_size
from bench.views import View
from bench.platform.vocabulary import Status


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Per pair: the largest size's GB/s of each copy method, and the chase's latency."""
    ok = rows[rows["status"] == Status.OK]
    lines = []
    for (src, dst), pair in ok.groupby(["src", "dst"], sort=True):
        copies = pair[pair["method"] != "chase"]
        largest = copies[copies["bytes"] == copies["bytes"].max()] if len(copies) else copies
        line = {"pair": f"GPU {src} → GPU {dst}"}
        for row in row_dicts(largest):
            name = f"{row['method']} {row['side']} {row['direction']}"
            name += "" if row["peer_access"] == "enabled" else " staged"
            line[f"{name} GB/s"] = f"{row['gbps']:.1f}"
        chase = pair[pair["method"] == "chase"]
        for row in row_dicts(chase):
            line[f"chase {format_size(int(row['bytes']))} ns"] = f"{row['ns_per_access']:.0f}"
        if len(largest):
            line["size"] = format_size(int(largest["bytes"].iloc[0]))
        lines.append(line)
    return pd.DataFrame(lines)


def answer(rows: pd.DataFrame, table: pd.DataFrame) -> str | None:
    """Peak one-way GB/s between GPUs: copy engine with peer access, staged via host, SM kernel."""
    ok = rows[(rows["status"] == Status.OK) & (rows["method"] != "chase") & (rows["direction"] == "uni")]
    kinds = {"copy engine with peer access": (ok["method"] == "ce") & (ok["peer_access"] == "enabled"),
             "staged via host": ok["peer_access"] == "disabled", "SM kernel": ok["method"] == "sm"}
    parts = [f"{kind} {ok.loc[chosen, 'gbps'].max():.0f}" for kind, chosen in kinds.items() if chosen.any()]
    return "peak one-way GB/s between GPUs: " + ", ".join(parts) if parts else None


PANELS = (("ce", "read", "enabled", "uni"), ("ce", "write", "enabled", "uni"), ("ce", "read", "enabled", "bidir"),
          ("ce", "read", "disabled", "uni"), ("sm", "read", "enabled", "uni"), ("sm", "write", "enabled", "uni"))


def _panel_title(method: str, side: str, access: str, direction: str) -> str:
    what = {"ce": "copy engine", "sm": "SM kernel"}[method]
    how = "staged via host" if access == "disabled" else "peer access"
    return f"{what}, {side}, {'bidirectional (sum)' if direction == 'bidir' else 'one way'}\n({how})"


PANELS_PER_ROW = 3


def matrix_figures(rows: pd.DataFrame, tables: dict) -> list:
    """One figure per size: GPU × GPU matrices of GB/s (row: source, column: destination), a panel per method."""
    from bench.analysis.plots import gpu_label, pyplot

    ok = rows[(rows["experiment"] == "peer") & (rows["status"] == Status.OK) & (rows["method"] != "chase")]
    if not len(ok):
        return []
    plt = pyplot()
    gpus = sorted(set(ok["src"]) | set(ok["dst"]))
    index = {gpu: position for position, gpu in enumerate(gpus)}
    figures = []
    for nbytes, at_size in ok.groupby("bytes", sort=True):
        panels = [panel for panel in PANELS if len(_select(at_size, panel))]
        if not panels:  # only methods, sides or directions bench does not know
            continue
        columns = min(len(panels), PANELS_PER_ROW)  # at most three abreast: the figure fits a laptop's screen
        rows_of_panels = -(-len(panels) // columns)
        figure, axes = plt.subplots(rows_of_panels, columns, figsize=(3.3 * columns, 3.3 * rows_of_panels + 0.4),
                                    squeeze=False, constrained_layout=True)
        for ax in axes.flat[len(panels):]:
            ax.set_visible(False)
        for ax, panel in zip(axes.flat, panels):
            matrix = np.full((len(gpus), len(gpus)), np.nan)
            for _, row in _select(at_size, panel).iterrows():
                matrix[index[row["src"]], index[row["dst"]]] = row["gbps"]
            ax.imshow(matrix, cmap="viridis", vmin=0, vmax=np.nanmax(ok["gbps"]))
            for (y, x), value in np.ndenumerate(matrix):
                ax.text(x, y, "—" if np.isnan(value) else f"{value:.0f}", ha="center", va="center",
                        color="k" if np.isnan(value) else "w", fontsize=9)
            ax.set_xticks(range(len(gpus)), [f"GPU {gpu}" for gpu in gpus], fontsize=8)
            ax.set_yticks(range(len(gpus)), [f"GPU {gpu}" for gpu in gpus], fontsize=8)
            ax.set_xlabel("to (destination)", fontsize=8)
            ax.set_ylabel("from (source)", fontsize=8)
            ax.set_title(_panel_title(*panel), fontsize=9)
        links = ok["nvlinks"].iloc[0] if "nvlinks" in ok else None
        link = f", {int(links)} NVLinks per GPU" if pd.notna(links) and links > 0 else ""
        figure.suptitle(f"Peer copies, {format_size(int(nbytes))} per copy, GB/s (10⁹ bytes/s), median — "
                        f"{gpu_label(ok)} × {len(gpus)}{link}", fontsize=10)
        figures.append((f"peer_matrix_{format_size(int(nbytes)).replace(' ', '').lower()}", figure))
    return figures


def _select(rows: pd.DataFrame, panel: tuple[str, str, str, str]) -> pd.DataFrame:
    method, side, access, direction = panel
    return rows[(rows["method"] == method) & (rows["side"] == side) & (rows["peer_access"] == access)
                & (rows["direction"] == direction)]


VIEW = View("peer", headline, answer, (matrix_figures,),
            columns=("bytes", "direction", "dst", "gbps", "method", "ns_per_access", "nvlinks", "peer_access", "side",
                     "src"))
