"""The ``library`` experiment's view: which CuPy, numba-cuda, PyTorch and JAX calls wait for the GPU; their truth
table."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from bench.analysis.selection import contradicts_docs
from bench.platform.libraries import LIBRARIES
from bench.views import View, grouped, ok_rows
from bench.platform.vocabulary import SPIN_MS, DeviceVerdict, HostVerdict, LibraryPlacement, Status, values

PLACEMENTS = values(LibraryPlacement)  # a column each: the spin on the call's stream, on another, around it


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Per library: calls that waited for the GPU on their own stream, on another, that serialized, and that
    contradict their documentation."""
    ok = ok_rows(rows, "library", "call", "placement", "verdict", "matches_docs")
    lines = []
    for (library,), group in grouped(ok, "library").items():
        def calls(chosen: Callable[[dict], bool]) -> str:
            names = sorted({row["call"].split(" ", 1)[-1] for row in group if chosen(row)})
            return ", ".join(names) or "—"

        lines.append({"library": library,
                      "waits on its own stream": calls(_waits("same")),
                      "waits for other streams": calls(_waits("other")),
                      "serializes kernels": calls(lambda row: row["verdict"] == DeviceVerdict.SERIALIZES),
                      "contradicts its docs": calls(contradicts_docs)})
    return pd.DataFrame(lines)


def answer(rows: pd.DataFrame, table: pd.DataFrame) -> str | None:
    """How many library calls wait for the GPU, and how many contradict their documentation."""
    ok = ok_rows(rows, "call", "placement", "verdict", "matches_docs")
    if not ok:
        return None

    def calls(chosen: Callable[[dict], bool]) -> int:
        return len({row["call"] for row in ok if chosen(row) and not pd.isna(row["call"])})

    return (f"of {calls(lambda row: True)} calls, {calls(_waits('same'))} wait for a kernel on their own stream, "
            f"{calls(_waits('other'))} for other streams; {calls(contradicts_docs)} contradict their documentation")


def _waits(placement: str) -> Callable[[dict], bool]:
    """Whether a row (a dict) waited for the GPU with the spin ``placement``."""
    return lambda row: row["verdict"] == HostVerdict.WAITS_FOR_DEVICE and row["placement"] == placement


def library_figure(rows: pd.DataFrame, tables: dict) -> list:
    """The library truth table: one row per call (grouped by library), a column per placement, coloured by verdict,
    host ms in the cell; ``!`` where the measurement contradicts the library's documentation."""
    from bench.analysis.plots import VERDICT_COLORS, cell_ms, gpu_label, pyplot, truth_cell, truth_legend

    ok = rows[(rows["experiment"] == "library") & (rows["status"] == Status.OK)]
    if not len(ok):
        return []
    plt = pyplot()
    calls = list(dict.fromkeys(ok["call"]))
    cells = {(row["call"], row["placement"]): row for _, row in ok.iterrows()}
    figure, ax = plt.subplots(figsize=(10, 0.26 * len(calls) + 2.4), constrained_layout=True)
    ax.set_xlim(-0.5, len(PLACEMENTS) - 0.5)
    ax.set_ylim(len(calls) - 0.5, -0.5)
    for y, call in enumerate(calls):
        for x, placement in enumerate(PLACEMENTS):
            row = cells.get((call, placement))
            if row is None:
                continue
            text = "host" if placement == "between" and row["host_waited"] else (
                "" if placement == "between" else cell_ms(row["host_ms"]))
            truth_cell(plt, ax, x, y, row["verdict"], text, row["matches_docs"] is not pd.NA
                       and row["matches_docs"] is not None and not bool(row["matches_docs"]))
    ax.set_xticks(range(len(PLACEMENTS)), ["spin on the call's stream", "spin on another stream",
                                           "two spins around the call:\ndo they overlap?"], fontsize=8)
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(calls)), calls, fontsize=7)
    for y in range(1, len(calls)):
        if calls[y].split(" ", 1)[0] != calls[y - 1].split(" ", 1)[0]:
            ax.axhline(y - 0.5, color="k", linewidth=1.5)
    truth_legend(plt, figure, VERDICT_COLORS, "not measured (no such placement for the call)", 5)
    spin_ms = ok["spin_ms"].min() if ok["spin_ms"].notna().any() else SPIN_MS  # the run's: runs before differ
    names = [library.title for library in LIBRARIES if library.name in set(ok["library"])] or ["library"]
    held = "; JAX's own streams: every SM held" if "jax" in set(ok["library"]) else ""
    libraries = f"{', '.join(names[:-1])} and {names[-1]}" if len(names) > 1 else names[0]
    figure.suptitle(f"Do {libraries} calls block? {gpu_label(ok)}, {', '.join(versions(ok))}; cell: host time in ms "
                    f"while a kernel of {spin_ms:g} ms (or 4× the call's own time) runs{held}; ! = contradicts the "
                    "library's docs", fontsize=9)
    return [("library_truth_table", figure)]


def versions(rows: pd.DataFrame) -> list[str]:
    """The libraries' versions the rows recorded, each library's first (a file before a library's version column
    was added recorded none of it)."""
    return [str(rows[library.version_column].dropna().iloc[0]) for library in LIBRARIES
            if library.version_column in rows and rows[library.version_column].notna().any()]

VIEW = View("library", headline, answer, (library_figure,),
            columns=("call", "host_ms", "host_waited", "library", "matches_docs", "placement", "spin_ms", "verdict",
                     *(library.version_column for library in LIBRARIES)))
