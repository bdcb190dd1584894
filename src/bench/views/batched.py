"""The ``batched`` experiment's view: one batch call against the same copies issued one by one."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd

from bench.platform.units import format_size
from bench.views import View, grouped, numbers, ok_rows, span
from bench.platform.vocabulary import AccessOrder, HostMemory, Status, values


def _size(nbytes) -> str:
    return format_size(int(nbytes))


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Per host memory × access order, at the most copies and the smallest copy measured: the batch's host time and
    GB/s beside the same copies issued one by one."""
    ok = ok_rows(rows, "host_memory", "copies", "bytes", "issue", "access_order", "host_ms", "gbps")
    lines = []
    for (host_memory,), group in grouped(ok, "host_memory").items():
        copies = int(max(row["copies"] for row in group if row["copies"] is not None))
        at_most = [row for row in group if row["copies"] == copies]
        nbytes = int(min(row["bytes"] for row in at_most if row["bytes"] is not None))
        point = [row for row in at_most if row["bytes"] == nbytes]
        loop = [row for row in point if row["issue"] == "one-by-one"]
        loop_ms = float(loop[0]["host_ms"]) if loop else None
        loop_gbps = float(loop[0]["gbps"]) if loop else None
        batches = [row for row in point if row["issue"] == "batch"]
        for batch in batches:
            lines.append({
                "host memory": host_memory,
                "access order": batch["access_order"],
                "copies": f"{copies} × {_size(nbytes)}",
                "batch host ms": f"{batch['host_ms']:.3g}",
                "one-by-one host ms": "—" if loop_ms is None else f"{loop_ms:.3g}",
                "host time saved": "—" if loop_ms is None or not batch["host_ms"] > 0
                else f"{loop_ms / batch['host_ms']:.1f}×",
                "batch GB/s": f"{batch['gbps']:.1f}",
                "one-by-one GB/s": "—" if loop_gbps is None else f"{loop_gbps:.1f}",
            })
        if not batches and loop_ms is not None:
            lines.append({"host memory": host_memory, "access order": "—", "copies": f"{copies} × {_size(nbytes)}",
                          "batch host ms": "—", "one-by-one host ms": f"{loop_ms:.3g}", "host time saved": "—",
                          "batch GB/s": "—", "one-by-one GB/s": f"{loop_gbps:.1f}"})
    return pd.DataFrame(lines)


def answer(rows: pd.DataFrame, table: pd.DataFrame) -> str | None:
    """How many times longer a cudaMemcpyAsync loop holds the host than one batch."""
    saved = numbers(table["host time saved"]).dropna() if len(table) else []
    if not len(saved):
        return None
    return (f"a cudaMemcpyAsync loop holds the host {span(saved)}× as long as one "
            f"cudaMemcpyBatchAsync of the same copies ({table['copies'].iloc[0]})")


ORDER_COLORS = {"stream": "#1f77b4", "during-call": "#d62728", "any": "#2ca02c"}
LOOP_COLOR = "0.2"
BYTES_STYLES = ("-", "--", ":", "-.")


def _series(ok: pd.DataFrame) -> Iterator[tuple[str, str, pd.DataFrame]]:
    """(label, color, rows) for the loop and each access order of the batch."""
    loop = ok[ok["issue"] == "one-by-one"]
    if len(loop):
        yield "one by one (cudaMemcpyAsync)", LOOP_COLOR, loop
    for order in values(AccessOrder):
        batch = ok[(ok["issue"] == "batch") & (ok["access_order"] == order)]
        if len(batch):
            yield f"batch, source order {order}", ORDER_COLORS[order], batch


def batched_figure(rows: pd.DataFrame, tables: dict) -> list:
    """Host-blocked time (top) and GB/s (bottom) vs copies per batch, pinned and pageable sources side by side:
    one batch call against the same copies issued one by one; one line style per copy size."""
    from matplotlib.ticker import FixedLocator, NullFormatter

    from bench.analysis.plots import gpu_label, pyplot

    mine = rows[rows["experiment"] == "batched"]
    ok = mine[mine["status"] == Status.OK]
    kinds = [kind for kind in values(HostMemory) if (ok["host_memory"] == kind).any()]
    if not kinds:  # no ok rows, or only host memories bench does not know
        return []
    plt = pyplot()
    figure, axes = plt.subplots(2, len(kinds), figsize=(6.5 * len(kinds), 8.5), squeeze=False, sharex=True,
                                constrained_layout=True)
    sizes = sorted(int(size) for size in ok["bytes"].unique())
    styles = {size: BYTES_STYLES[index % len(BYTES_STYLES)] for index, size in enumerate(sizes)}
    counts = np.unique(ok["copies"].to_numpy(dtype=float))
    for column_index, kind in enumerate(kinds):
        host_ax, rate_ax = axes[0][column_index], axes[1][column_index]
        for label, color, group in _series(ok[ok["host_memory"] == kind]):
            for size in sizes:
                line = group[group["bytes"] == size].sort_values("copies")
                if not len(line):
                    continue
                x = line["copies"].to_numpy(dtype=float)
                name = f"{label}, {_size(size)} each"
                host_ax.plot(x, line["host_ms"].to_numpy(dtype=float), linestyle=styles[size], marker="o",
                             markersize=3, color=color, label=name)
                rate_ax.plot(x, line["gbps"].to_numpy(dtype=float), linestyle=styles[size], marker="o",
                             markersize=3, color=color, label=name)
        host_ax.set_title(f"{kind} source: host time blocked issuing the copies")
        rate_ax.set_title(f"{kind} source: GB/s from the first copy issued to the last one done")
        host_ax.set_yscale("log")
        host_ax.set_ylabel("host ms per batch (median), log")
        rate_ax.set_ylabel("GB/s (10⁹ bytes/s), median")
        rate_ax.set_ylim(bottom=0)
        for ax in (host_ax, rate_ax):
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_locator(FixedLocator(counts))
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xticks(counts, [str(int(count)) for count in counts])
            ax.grid(True, which="major", alpha=0.3)
        rate_ax.set_xlabel("copies per batch")
    legend = {label: handle for ax in axes[0] for handle, label in zip(*ax.get_legend_handles_labels())}
    if legend:  # once, in the first panel: every panel draws the same series
        axes[0][0].legend(list(legend.values()), list(legend), fontsize=7)
    env = ok.iloc[0]
    failed = int((mine["status"] == Status.FAILED).sum())
    unsupported = int((mine["status"] == Status.UNSUPPORTED).sum())
    notes = [f"{failed} failed"] if failed else []
    notes += [f"{unsupported} unsupported"] if unsupported else []
    figure.suptitle(f"Batched H2D copies (cudaMemcpyBatchAsync) vs one by one on {gpu_label(ok)} — driver "
                    f"{env.get('driver_version', '?')}" + (f" — {', '.join(notes)}, not shown" if notes else ""))
    figure.supxlabel("not timed behind the gate: GB/s includes issuing the copies (and staging pageable ones).   "
                     f"run {env.get('run_id', '?')}, commit {str(env.get('git_commit', ''))[:12]}", fontsize=7,
                     color="0.4")
    return [("batched", figure)]


VIEW = View("batched", headline, answer, (batched_figure,),
            columns=("access_order", "bytes", "copies", "gbps", "host_memory", "host_ms", "issue"))
