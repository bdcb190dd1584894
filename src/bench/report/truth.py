"""The report's truth tables: calls × where a spinning kernel runs, each cell coloured by the verdict, with the host's
time or whether the call held the host, "!" where the measurement contradicts the documentation, and the
documentation's statement on hover. HTML tables, not the figures ``bench plot`` draws of them: as wide or as long as
they are, a reader scrolls them, searches them and reads their cells' text, and they take no time to draw."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from bench.analysis.selection import records
from bench.report.markup import cell, legend, text
from bench.platform.vocabulary import (PLACEMENTS, SPIN_MS, SPIN_STREAMS, DeviceVerdict, HostVerdict, LibraryPlacement,
                                       Status, values)

QUESTIONS = {  # experiment -> the question its truth table answers
    "blocking": "Host: does the call return while a {spin_ms} ms kernel runs? Cell: host ms.",
    "serialization": "Device: do kernels on two streams around the call still overlap? \"host\": the call held the "
                     "host until the first kernel ended.",
    "library": "Host: does the call return while a {spin_ms} ms kernel (or one of 4× the call's own time) runs on "
               "its stream or another? Cell: host ms. Device: do two spins around the call still overlap? \"host\": "
               "the call held the host until the first spin ended.",
    "crossgpu": "Host: does a call made on one GPU return while a {spin_ms} ms kernel runs on that GPU or on "
                "another? Cell: host ms.",
}  # these experiments get HTML tables instead of their figure (too wide or too long to read, and slow to draw)
TRUTH_ONLY = ("blocking", "serialization", "crossgpu")  # their truth table says all their headline does
LIBRARY_PLACEMENTS = dict(zip(values(LibraryPlacement), ("on the call's stream", "on another stream",
                                                         "two spins around the call")))  # the library table's columns
VERDICT_CLASSES = {HostVerdict.RETURNS: "good", DeviceVerdict.OVERLAPS: "good", HostVerdict.OWN_WORK: "fair",
                   DeviceVerdict.PARTIAL: "poor", HostVerdict.WAITS_FOR_DEVICE: "bad", DeviceVerdict.SERIALIZES: "bad",
                   HostVerdict.UNCLEAR: "none"}
VERDICT_MEANINGS = {
    "blocking": ((HostVerdict.RETURNS, "returned in under 1 ms, the kernel still running"),
                 (HostVerdict.OWN_WORK, "took over 1 ms, but did not wait for the kernel"),
                 (HostVerdict.WAITS_FOR_DEVICE, "returned only after the running kernel ended"),
                 (HostVerdict.UNCLEAR, "the repeats could not tell")),
    "serialization": ((DeviceVerdict.OVERLAPS, "the kernels ran together for at least half a spin"),
                      (DeviceVerdict.PARTIAL, "they overlapped less than that"),
                      (DeviceVerdict.SERIALIZES, "the second started only after the first ended")),
}
VERDICT_MEANINGS["library"] = VERDICT_MEANINGS["blocking"] + VERDICT_MEANINGS["serialization"]
VERDICT_MEANINGS["crossgpu"] = VERDICT_MEANINGS["blocking"]



def truth_table(name: str, rows: pd.DataFrame, label: str = "") -> str:
    """Calls × (spinning stream, placement), for ``library`` × placement of the spin, for ``crossgpu`` × (GPU of
    the call, GPU and stream of the spin); each cell coloured by the verdict, with host ms (where the host may wait)
    or "host" where the call held the host (where kernels may serialize), "!" where the measurement contradicts the
    documentation, and the documentation's statement on hover."""
    groups = _columns(name, rows)
    cells = {(row["call"], *_column_of(name, row)): row for row in records(rows)}
    headings = "".join(f"<th class='group' colspan='{len(columns)}'>{text(heading)}</th>"
                       for heading, columns in groups.items())
    columns = "".join(f"<th{' class=group' if index == 0 else ''}>{text(heading)}</th>"
                      for columns in groups.values() for index, (_, heading) in enumerate(columns))
    absent = {"library": "no such placement for the call", "crossgpu": "not measured"}.get(
        name, "the call takes no such stream")
    body, library = [], None
    for call in dict.fromkeys(rows["call"]):
        tds = []
        for columns_of_group in groups.values():
            for index, (key, _) in enumerate(columns_of_group):
                group = " group" if index == 0 else ""
                row = cells.get((call, *key))
                tds.append(f"<td class='absent{group}' title='{absent}'></td>" if row is None
                           else _truth_cell(name, row, group))
        first = name == "library" and library is not None and cell(call).split(" ", 1)[0] != library
        library = cell(call).split(" ", 1)[0]
        body.append(f"<tr{' class=library' if first else ''}><th>{text(call)}</th>{''.join(tds)}</tr>")
    spin_ms = rows["spin_ms"].dropna().median() if "spin_ms" in rows and rows["spin_ms"].notna().any() else SPIN_MS
    caption = (QUESTIONS[name].format(spin_ms=cell(spin_ms))
               + " \"!\": contradicts the documentation (hover a cell for what it says).")
    if label:
        caption = f"GPU {label}. {caption}"
    meanings = legend((VERDICT_CLASSES[verdict], verdict, meaning) for verdict, meaning in VERDICT_MEANINGS[name])
    return (f"{meanings}<div class='scroll truth'><table class='truth'><caption>{text(caption)}</caption>"
            f"<thead><tr><th class='corner' rowspan='2'>call</th>{headings}</tr><tr>{columns}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>")


def _columns(name: str, rows: pd.DataFrame) -> dict[str, list[tuple[tuple, str]]]:
    """A truth table's columns that ``rows`` fill: heading of a group -> [(key, heading)] of its columns (the key:
    :func:`_column_of` of a row in that column)."""
    if name == "library":
        present = set(map(cell, rows["placement"]))
        return {"where the spin kernel runs": [((placement,), heading) for placement, heading
                                               in LIBRARY_PLACEMENTS.items() if placement in present]}
    if name == "crossgpu":
        present = {_column_of(name, row) for row in records(rows)}
        gpus = [cell(gpu) for gpu in sorted(set(rows["call_gpu"].dropna()) | set(rows["spin_gpu"].dropna()))]
        return {f"call made on GPU {call}": [((call, spin, stream), f"spin on GPU {spin} "
                                              f"({'same' if spin == call else 'other'}), {stream}")
                                             for spin in gpus for stream in SPIN_STREAMS
                                             if (call, spin, stream) in present] for call in gpus
                if any(key[0] == call for key in present)}
    present = set(zip(map(cell, rows["spin_stream"]), map(cell, rows["placement"])))
    groups = {f"spinning stream {spin}": [((spin, placement), placement) for placement in PLACEMENTS
                                          if (spin, placement) in present] for spin in SPIN_STREAMS}
    return {heading: columns for heading, columns in groups.items() if columns}


def _column_of(name: str, row: Mapping) -> tuple[str, ...]:
    """Which column of its truth table a row fills."""
    if name == "crossgpu":
        return cell(row["call_gpu"]), cell(row["spin_gpu"]), cell(row["spin_stream"])
    return (cell(row["placement"]),) if name == "library" else (cell(row["spin_stream"]), cell(row["placement"]))


DOCUMENTED = {  # experiment -> what the docs say, by the row's docs flag (True, False, None: silent or vague)
    "blocking": ("docs_waits", {True: "The documentation says the call waits for the running kernel",
                                False: "The documentation says the call does not wait for it",
                                None: "The documentation is silent or vague about waiting"}),
    "serialization": ("docs_serializes", {True: "The documentation says the call keeps the kernels apart",
                                          False: "The documentation says the call does not keep them apart",
                                          None: "The documentation is silent about keeping them apart"}),
}
DOCUMENTED["library"] = DOCUMENTED["crossgpu"] = DOCUMENTED["blocking"]


def _truth_cell(name: str, row: Mapping, group: str) -> str:
    from bench.analysis.numbers import short_ms
    from bench.analysis.selection import contradicts_docs

    if name == "library":
        where = f"{cell(row['call'])}, {LIBRARY_PLACEMENTS.get(cell(row['placement']), cell(row['placement']))}"
    elif name == "crossgpu":
        where = (f"{cell(row['call'])} on GPU {cell(row['call_gpu'])}, spin on GPU {cell(row['spin_gpu'])} "
                 f"(spinning stream {cell(row['spin_stream'])})")
    else:
        where = f"{cell(row['call'])} on {cell(row['placement'])} (spinning stream {cell(row['spin_stream'])})"
    if row["status"] != Status.OK:
        failed = f"{where}: {cell(row['status'])}: {cell(row['error'])}"
        return f"<td class='none{group}' title='{text(failed)}'>{text(row['status'])}</td>"
    contradicts = contradicts_docs(row)
    if name in ("blocking", "crossgpu") or (name == "library" and cell(row["placement"]) != LibraryPlacement.BETWEEN):
        shown = short_ms(row["host_ms"])
        detail = f"host {cell(row['host_ms'])} ms; with nothing running {cell(row.get('idle_host_ms'))} ms"
    else:
        shown = "host" if _flag(row.get("host_waited")) else ""
        detail = f"the kernels overlapped {cell(row.get('overlap_ms'))} ms; host {cell(row['host_ms'])} ms"
    repeats = f" (repeats disagreed: {cell(row.get('verdicts'))})" if _flag(row.get("stable")) is False else ""
    flag, says = DOCUMENTED[name]
    statement = f": {cell(row.get('docs'))}" if cell(row.get("docs")) else ""
    source = f" ({cell(row.get('source'))})" if cell(row.get("source")) else ""
    title = (f"{where}: {cell(row['verdict'])}{repeats}; {detail}.\n{says[_flag(row.get(flag))]}{statement}{source}."
             + ("\nThe measurement contradicts the documentation." if contradicts else ""))
    marks = " contradicts" if contradicts else ""
    return (f"<td class='{VERDICT_CLASSES.get(row['verdict'], 'none')}{marks}{group}' title='{text(title)}'>"
            f"{text(shown)}{'!' if contradicts else ''}</td>")


def _flag(value) -> bool | None:
    return None if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)) else bool(value)
