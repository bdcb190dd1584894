"""One GPU's part of the report: each experiment's headline table and figures, the truth tables (blocking,
serialization, library) as HTML tables, the claims."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import pandas as pd

from bench.analysis import Gpu, only
from bench.compare import describe
from bench.report.markup import anchor, cell, contents, figure, legend, table, text, web_link
from bench.views import in_order
from bench.vocabulary import (PLACEMENTS, SPIN_MS, SPIN_STREAMS, ClaimVerdict, DeviceVerdict, HostVerdict,
                              LibraryPlacement, Status, values)

TRUTH_TABLES = {  # experiment -> the question its truth table answers
    "blocking": "Host: does the call return while a {spin_ms} ms kernel runs? Cell: host ms.",
    "serialization": "Device: do kernels on two streams around the call still overlap? \"host\": the call held the "
                     "host until the first kernel ended.",
    "library": "Host: does the call return while a {spin_ms} ms kernel (or one of 4× the call's own time) runs on "
               "its stream or another? Cell: host ms. Device: do two spins around the call still overlap? \"host\": "
               "the call held the host until the first spin ended.",
}  # these experiments get HTML tables instead of their figure (too wide or too long to read, and slow to draw)
TRUTH_ONLY = ("blocking", "serialization")  # their truth table says all their headline does
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
CLAIM_CLASSES = {ClaimVerdict.TRUE: "good", ClaimVerdict.PARTLY: "fair", ClaimVerdict.FALSE: "bad",
                 ClaimVerdict.NOT_MEASURED: "none"}
Figures = Callable[[str], list[tuple[str, bytes]]]  # experiment -> its (stem, PNG) figures of this GPU
SECTION_COLUMNS = ("experiment", "status", "error", "run_id")  # what a section reads of an experiment's rows
# besides its axes (status, the configurations not ok) and what its view reads
TRUTH_COLUMNS = ("call", "spin_stream", "placement", "spin_ms", "host_ms", "idle_host_ms", "host_waited", "overlap_ms",
                 "verdict", "verdicts", "stable", "matches_docs", "docs", "docs_waits", "docs_serializes",
                 "source")  # what truth_table reads besides SECTION_COLUMNS


def gpu_id(gpu: Gpu) -> str:
    """The id of a GPU's section."""
    return anchor("gpu", gpu.host, gpu.uuid)


def experiment_id(gpu: Gpu, experiment: str) -> str:
    """The id of an experiment's part of a GPU's section."""
    return anchor("gpu", gpu.host, gpu.uuid, experiment)


def by_experiment(rows: pd.DataFrame, experiments: Mapping) -> dict[str, pd.DataFrame]:
    """Each of the ``experiments`` (name -> description, in their order) that has rows here: its rows, with only the
    columns its section reads (:data:`SECTION_COLUMNS`, its axes, :data:`TRUTH_COLUMNS` for a truth table, what its
    view reads). Selected once: every reader of an experiment's rows then copies a few columns, not the suite's."""
    views = in_order(experiments)
    positions = rows.groupby("experiment", sort=False).indices if "experiment" in rows else {}
    found = {}
    for name, experiment in experiments.items():
        if name in positions:
            columns = [*SECTION_COLUMNS, *experiment.axes, *(TRUTH_COLUMNS if name in TRUTH_TABLES else ()),
                       *(views[name].reads() if name in views else ())]
            found[name] = only(rows, columns).iloc[positions[name]]
    return found


def headlines(experiment_rows: Mapping[str, pd.DataFrame], experiments: Mapping) -> dict[str, pd.DataFrame]:
    """Each experiment's headline table of its rows (:func:`by_experiment`), made once: its answer reads it, its
    section shows it."""
    views = in_order(experiments)
    return {name: views[name].headline(rows) for name, rows in experiment_rows.items() if name in views}


def gpu_section(gpu: Gpu, rows: pd.DataFrame, experiment_rows: Mapping[str, pd.DataFrame],
                tables: Mapping[str, pd.DataFrame], label: str, experiments: Mapping, figures: Figures,
                elsewhere: Callable[[str], str]) -> list[str]:
    """Every experiment of one GPU: headline table, figures, truth tables; then the claims. ``rows``: the GPU's
    rows, ``experiment_rows`` each experiment's (:func:`by_experiment`), ``tables`` their headline tables
    (:func:`headlines`). With a ``label`` (the report has several
    GPUs) the section has its own heading and contents, and every table a GPU column. ``figures`` gives an
    experiment's figures, ``elsewhere`` what to say (HTML) where it has none of its own (another GPU's stand for
    them)."""
    level = 3 if label else 2
    present = list(experiment_rows)
    claims = claims_section(rows, label, level, experiment_id(gpu, "claims"))
    parts = [f"<h2 id='{gpu_id(gpu)}'>{text(str(gpu))}</h2>", contents(
        [(experiment_id(gpu, name), name) for name in present] + ([(experiment_id(gpu, "claims"), "claims")]
                                                                   if claims else []))] if label else []
    views = in_order(experiments)
    for name, mine in experiment_rows.items():
        parts.append(f"<h{level} id='{experiment_id(gpu, name)}'>{text(name)}</h{level}>")
        parts.append(f"<p>{text(experiments[name].description)}. {status(mine)}</p>")
        if name in tables and name not in TRUTH_ONLY and len(tables[name]):
            parts.append(table(tables[name], label, plain=True))
        if name in TRUTH_TABLES:
            parts.append(truth_table(name, mine, label))
        elif name in views:
            drawn = figures(name)
            parts += [figure(stem, png) for stem, png in drawn]
            if not drawn and views[name].figures:
                parts.append(f"<p class='meta'>{elsewhere(name)}</p>")
        parts.append(_not_ok(experiments[name], mine, label))
    parts.append(claims)
    return parts


def status(rows: pd.DataFrame) -> str:
    counts = rows["status"].value_counts()
    ok = int(counts.get(Status.OK, 0))
    others = ", ".join(f"{int(count)} {state}" for state, count in counts.items() if state != Status.OK)
    runs = sorted(map(str, rows["run_id"].dropna().unique()))
    measured = f" (run{'s' if len(runs) > 1 else ''} {', '.join(runs)})" if runs else ""
    return text(f"{ok} of {len(rows)} configurations ok{'; ' + others if others else ''}{measured}.")


def _not_ok(experiment, rows: pd.DataFrame, label: str) -> str:
    failed = rows[rows["status"] != Status.OK]
    if not len(failed):
        return ""
    frame = pd.DataFrame({"configuration": [describe(experiment, row) for _, row in failed.iterrows()],
                          "status": failed["status"], "error": failed["error"]})
    return f"<details><summary>{len(failed)} configurations not ok</summary>{table(frame, label)}</details>"


# --- truth tables and claims -----------------------------------------------------------------------------------

def truth_table(name: str, rows: pd.DataFrame, label: str = "") -> str:
    """Calls × (spinning stream, placement), or for ``library`` × placement of the spin, each cell coloured by the
    verdict, with host ms (where the host may wait) or "host" where the call held the host (where kernels may
    serialize), "!" where the measurement contradicts the documentation, and the documentation's statement on
    hover."""
    groups = _columns(name, rows)
    cells = {(row["call"], *_column_of(name, row)): row for row in rows.to_dict("records")}
    headings = "".join(f"<th class='group' colspan='{len(columns)}'>{text(heading)}</th>"
                       for heading, columns in groups.items())
    columns = "".join(f"<th{' class=group' if index == 0 else ''}>{text(heading)}</th>"
                      for columns in groups.values() for index, (_, heading) in enumerate(columns))
    absent = "no such placement for the call" if name == "library" else "the call takes no such stream"
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
    caption = (TRUTH_TABLES[name].format(spin_ms=cell(spin_ms))
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
    present = set(zip(map(cell, rows["spin_stream"]), map(cell, rows["placement"])))
    groups = {f"spinning stream {spin}": [((spin, placement), placement) for placement in PLACEMENTS
                                          if (spin, placement) in present] for spin in SPIN_STREAMS}
    return {heading: columns for heading, columns in groups.items() if columns}


def _column_of(name: str, row: Mapping) -> tuple[str, ...]:
    """Which column of its truth table a row fills."""
    return (cell(row["placement"]),) if name == "library" else (cell(row["spin_stream"]), cell(row["placement"]))


DOCUMENTED = {  # experiment -> what the docs say, by the row's docs flag (True, False, None: silent or vague)
    "blocking": ("docs_waits", {True: "The documentation says the call waits for the running kernel",
                                False: "The documentation says the call does not wait for it",
                                None: "The documentation is silent or vague about waiting"}),
    "serialization": ("docs_serializes", {True: "The documentation says the call keeps the kernels apart",
                                          False: "The documentation says the call does not keep them apart",
                                          None: "The documentation is silent about keeping them apart"}),
}
DOCUMENTED["library"] = DOCUMENTED["blocking"]


def _truth_cell(name: str, row: Mapping, group: str) -> str:
    from bench.analysis import contradicts_docs, short_ms

    if name == "library":
        where = f"{cell(row['call'])}, {LIBRARY_PLACEMENTS.get(cell(row['placement']), cell(row['placement']))}"
    else:
        where = f"{cell(row['call'])} on {cell(row['placement'])} (spinning stream {cell(row['spin_stream'])})"
    if row["status"] != Status.OK:
        failed = f"{where}: {cell(row['status'])}: {cell(row['error'])}"
        return f"<td class='none{group}' title='{text(failed)}'>{text(row['status'])}</td>"
    contradicts = contradicts_docs(row)
    if name == "blocking" or (name == "library" and cell(row["placement"]) != LibraryPlacement.BETWEEN):
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


def claims_section(rows: pd.DataFrame, label: str = "", level: int = 2, section: str = "claims") -> str:
    """The folklore claims against these rows (a section of id ``section``), each verdict coloured by whether the
    measurement agrees with the claim: holds (green), partly (amber), busted (red); empty when none could be
    judged."""
    from bench import claims

    judged = claims.table(rows)
    if (judged["verdict"] == ClaimVerdict.NOT_MEASURED).all():
        return ""
    lines = []
    first = f"<td class='gpu'>{text(label)}</td>" if label else ""
    for claim in judged.to_dict("records"):
        lines.append(f"<tr>{first}<td>{text(claim['claim'])}</td>"
                     f"<td class='verdict {CLAIM_CLASSES.get(claim['verdict'], 'none')}'>"
                     f"{text(claims.LABELS.get(claim['verdict'], claim['verdict']))}</td>"
                     f"<td>{text(claim['docs say'])} ({web_link(claim['source'], 'docs')})</td>"
                     f"<td>{text(claim['measured'])}</td></tr>")
    head = "".join(f"<th>{name}</th>" for name in (["GPU"] if label else [])
                   + ["claim", "verdict", "the documentation", "measured"])
    meanings = legend([("good", "holds", "the measurement agrees with the claim"),
                       ("fair", "partly", "it holds in some cases only"),
                       ("bad", "busted", "the measurement contradicts the claim")])
    return (f"<h{level} id='{section}'>Claims</h{level}>{meanings}<div class='scroll'><table><thead><tr>{head}</tr>"
            f"</thead><tbody>{''.join(lines)}</tbody></table></div>")
