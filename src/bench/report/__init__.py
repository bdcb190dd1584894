"""One self-contained HTML report of results, for people to read: the answers first (per GPU, newest run first: its
newest run's date and commit, and each experiment's answer in a sentence), every run of the input with the GPU it ran
on, then per GPU (a section each when there are several) each experiment's headline table and figures, the blocking
and serialization truth tables as HTML tables, and the claims. Of several measurements of a configuration on one
GPU, the newest is shown. Figures shrink to the page's width; a table column holds one unit, named in its header.
Opens in a browser from the file alone; never imports CUDA, nor an experiment: the experiments' descriptions come in
as ``experiments`` (name -> description, in the sweep's order: :func:`bench.experiments.registry`), their headlines,
answers and figures from their views (:mod:`bench.views`). The same results give the same bytes (the only dates in
it are the runs')."""

from __future__ import annotations

import base64
import html
import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from bench import analysis, plots
from bench.analysis import Gpu
from bench.compare import describe, number
from bench.views import in_order
from bench.vocabulary import PLACEMENTS, SPIN_MS, SPIN_STREAMS, ClaimVerdict, DeviceVerdict, HostVerdict, Status

ENVIRONMENT = ("driver_version", "cuda_runtime", "pcie_gen", "pcie_width", "cupy_version", "numba_cuda_version",
               "git_commit")
TRUTH_TABLES = {  # experiment -> the question its truth table answers
    "blocking": "Host: does the call return while a {spin_ms} ms kernel runs? Cell: host ms.",
    "serialization": "Device: do kernels on two streams around the call still overlap? \"host\": the call held the "
                     "host until the first kernel ended.",
}  # these experiments get HTML tables instead of their (too wide to read) figure
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
CLAIM_CLASSES = {ClaimVerdict.TRUE: "good", ClaimVerdict.PARTLY: "fair", ClaimVerdict.FALSE: "bad",
                 ClaimVerdict.NOT_MEASURED: "none"}
DPI = 100  # figure pixels per inch: sharp on a screen of 1.33 device pixels per CSS px, a third of plots/' bytes
SCALE = 75 / DPI  # CSS px per figure pixel: every figure at one scale, 75 px per inch (matplotlib's 10 pt ≈ 10 px)
LONG_TABLE = 15  # rows; longer tables scroll inside a box with their header kept in view
STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1240px; padding: 0 1em; color: #222;
       line-height: 1.4 }
h1 { margin-bottom: .2em } h2 { border-bottom: 2px solid #ccc; padding-bottom: .2em; margin-top: 2em }
h3 { margin-top: 1.6em } .meta, caption { color: #555 } caption { text-align: left; padding: .3em 0 }
nav ul { margin: .3em 0 } .scroll { overflow: auto; max-width: 100% } .scroll.long { max-height: 32em }
table { border-collapse: separate; border-spacing: 0; margin: .6em 0; font-size: 88% }
th, td { border: solid #ccc; border-width: 0 1px 1px 0; padding: .2em .5em; text-align: left; vertical-align: top }
tr > :first-child { border-left-width: 1px } thead th { border-top-width: 1px }
thead th { background: #f0f0f0; position: sticky; top: 0; z-index: 2 } td.gpu { white-space: nowrap }
td.number { text-align: right; font-variant-numeric: tabular-nums }
.scroll.truth { max-height: calc(100vh - 3em) } table.truth thead { position: sticky; top: 0; z-index: 2 }
table.truth thead th { position: static; text-align: center } table.truth th.corner { text-align: left }
table.truth td { text-align: center; min-width: 4.2em; white-space: nowrap; font-variant-numeric: tabular-nums }
table.truth tbody th { position: sticky; left: 0; background: #fafafa; z-index: 1; white-space: nowrap }
table.truth .group { border-left: 3px solid #555 }
table.truth td.absent { background: repeating-linear-gradient(45deg, #fff, #fff 4px, #f2f2f2 4px, #f2f2f2 8px) }
td.contradicts { outline: 2px solid #000; outline-offset: -3px; font-weight: bold }
.good { background: #c7e9c0 } .fair { background: #fff1a8 } .poor { background: #fdd0a2 } .bad { background: #f5b3b3 }
.none { background: #e4e4e4 } .legend span { display: inline-block; padding: 0 .5em; margin: 0 .4em .3em 0;
       border: 1px solid #ccc } td.verdict { font-weight: bold; white-space: nowrap }
figure { margin: 1em 0 } figure img { max-width: 100%; height: auto; border: 1px solid #eee; display: block }
table.answers td:first-child { white-space: nowrap }
figcaption { color: #555; font-size: 88% } details { margin: .5em 0 }
"""


def render(rows: pd.DataFrame, tables: dict, experiments: Mapping, source: str = "",
           syncs: pd.DataFrame | None = None, traces: pd.DataFrame | None = None) -> str:
    """The report of ``rows`` (every row of the input; the newest measurement of each configuration per GPU is
    shown) and their side tables, of the ``experiments`` (name -> description), as an HTML document; with ``syncs``
    (rows of ``bench syncs --save`` files), a section of the lines of code that waited; with ``traces`` (rows of
    ``bench trace --save`` files), one of how much code overlapped."""
    shown = analysis.newest(rows, experiments)
    groups = analysis.by_gpu(shown)
    labels = _labels(groups) if len(groups) > 1 else {}
    parts = [f"<h1>bench report</h1><p class='meta'>{_summary(rows, shown, groups, source)}</p>"]
    if labels:
        parts.append(_contents(groups, experiments))
    parts += ["<h2 id='answers'>Answers</h2>",
              *(_answers(gpu, mine, experiments) for gpu, mine in _newest_first(groups)),
              "<h2 id='runs'>Runs</h2>", _runs(rows, shown)]
    if syncs is not None and len(syncs):
        parts.append(syncs_section(syncs))
    if traces is not None and len(traces):
        parts.append(trace_section(traces))
    for gpu, mine in groups:
        parts += _gpu_section(gpu, mine, plots.tables_of(tables, mine), labels.get(gpu, ""), experiments)
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'><title>bench report</title>"
            f"<meta name='viewport' content='width=device-width'><style>{STYLE}</style></head><body>"
            f"{''.join(parts)}</body></html>\n")


def write(rows: pd.DataFrame, tables: dict, out: Path, experiments: Mapping, source: str = "",
          syncs: pd.DataFrame | None = None, traces: pd.DataFrame | None = None) -> Path:
    """Render and write atomically (a reader never sees half a report)."""
    from bench.store import write_bytes

    out = Path(out)
    write_bytes(out, render(rows, tables, experiments, source, syncs, traces).encode("utf-8"))
    return out


SYNCS_COLUMNS = {"target": "what ran", "file": "file", "line": "line", "source": "code", "library": "library",
                 "waits": "waits", "natural_ms": "ms on its own", "cuda_calls": "CUDA call"}


def syncs_section(syncs: pd.DataFrame) -> str:
    """Where code waited (``bench syncs``): per GPU, a row per line that waited, the target it ran in; the lines that
    only stood still on the host are left out."""
    parts = ["<h2 id='syncs'>Where code waited (bench syncs)</h2>"]
    waited = syncs[syncs["waited"].fillna(False).astype(bool)] if "waited" in syncs else syncs
    for (name, uuid), group in syncs.groupby(["gpu_name", "gpu_uuid"], sort=True):
        mine = waited[(waited["gpu_name"] == name) & (waited["gpu_uuid"] == uuid)]
        targets = group["target"].nunique()
        parts.append(f"<h3>{html.escape(str(name))} {html.escape(str(uuid)[:12])}</h3><p>{targets} "
                     f"target{'s' * (targets != 1)} run, {mine['target'].nunique()} waited at {len(mine)} "
                     f"line{'s' * (len(mine) != 1)}.</p>")
        if len(mine):
            shown = mine[[column for column in SYNCS_COLUMNS if column in mine]].rename(columns=SYNCS_COLUMNS)
            shown["file"] = shown["file"].map(lambda path: Path(str(path)).name)
            parts.append(table(shown))
    return "".join(parts)


TRACE_COLUMNS = {"target": "what ran", "makespan_ms": "makespan ms", "bound_ms": "bound ms", "efficiency": "efficiency",
                 "hidden": "copies hidden", "idle_ms": "idle ms", "pageable_cost_ms": "pageable cost ms",
                 "overhead": "tracing overhead", "git_commit": "commit"}


def trace_section(traces: pd.DataFrame) -> str:
    """How much code overlapped (``bench trace``): per GPU, a row per traced target and its timeline; of several
    traces of one target, the newest."""
    parts = ["<h2 id='trace'>How much code overlapped (bench trace)</h2>"]
    for (name, uuid), group in traces.groupby(["gpu_name", "gpu_uuid"], sort=True):
        newest = group[group["traced_at"] == group.groupby("target")["traced_at"].transform("max")]
        summary = newest.drop_duplicates("target")
        parts.append(f"<h3>{html.escape(str(name))} {html.escape(str(uuid)[:12])}</h3>")
        parts.append(table(summary[[column for column in TRACE_COLUMNS if column in summary]]
                           .rename(columns=TRACE_COLUMNS)))
        for target, rows in newest.groupby("target", sort=False):
            parts.append(_figure(f"trace {target}", plots.rendered(plots.trace_figure(rows, f"{target} on {name}"),
                                                                   "png", DPI)))
    return "".join(parts)


# --- text and tables -------------------------------------------------------------------------------------------

def cell(value) -> str:
    """A value as a person reads it: whole numbers without a fraction, four significant digits otherwise, yes/no,
    lists joined, nothing for missing values."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return ", ".join(cell(item) for item in value)
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return number(float(value))
    return str(value)


def _escape(value) -> str:
    return html.escape(cell(value), quote=True)


def _is_number(value) -> bool:
    text = cell(value).replace("%", "").replace("×", "").strip()
    try:
        float(text)
    except ValueError:
        return False
    return True


def table(frame: pd.DataFrame, gpu: str = "") -> str:
    """``frame`` as an HTML table, with a GPU column first when ``gpu`` names one; long ones scroll in a box with
    their header in view."""
    head = "".join(f"<th>{html.escape(str(column))}</th>" for column in (["GPU"] if gpu else []) + list(frame.columns))
    first = f"<td class='gpu'>{html.escape(gpu)}</td>" if gpu else ""
    body = []
    for values in frame.itertuples(index=False):
        cells = [f"<td class='number'>{_escape(v)}</td>" if _is_number(v) else f"<td>{_escape(v)}</td>"
                 for v in values]
        body.append(f"<tr>{first}{''.join(cells)}</tr>")
    long = " long" if len(frame) > LONG_TABLE else ""
    return (f"<div class='scroll{long}'><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>")


def _labels(groups: Sequence[tuple[Gpu, pd.DataFrame]]) -> dict[Gpu, str]:
    """What the GPU column says for each GPU: name and start of UUID, and the host where hosts differ."""
    hosts = {gpu.host for gpu, _ in groups}
    return {gpu: f"{gpu.short} on {gpu.host}" if len(hosts) > 1 else gpu.short for gpu, _ in groups}


def _anchor(gpu: Gpu, experiment: str = "") -> str:
    return "-".join(part for part in ("gpu", gpu.uuid or "unknown", experiment) if part)


def _summary(rows: pd.DataFrame, shown: pd.DataFrame, groups: Sequence, source: str) -> str:
    measured = rows[rows["run_id"].notna()] if "run_id" in rows else rows.iloc[0:0]
    runs = len(analysis.key_frame(measured, ["run_id", "hostname"]).drop_duplicates())  # a sweep: one run on one host
    newest = f"; newest run {html.escape(str(rows['run_id'].max()))}" if runs else ""
    origin = f"{html.escape(source)}: " if source else ""
    return (f"{origin}{runs} run{'s' if runs != 1 else ''} on {len(groups)} GPU{'s' if len(groups) != 1 else ''}"
            f"{newest}. Of {len(rows)} result rows, the newest measurement of each configuration on each GPU is "
            f"shown ({len(shown)} rows).")


def _contents(groups: Sequence[tuple[Gpu, pd.DataFrame]], experiments: Mapping) -> str:
    items = []
    for gpu, mine in groups:
        present = [name for name in experiments if (mine["experiment"] == name).any()]
        links = ", ".join(f"<a href='#{_anchor(gpu, name)}'>{html.escape(name)}</a>" for name in present)
        items.append(f"<li><a href='#{_anchor(gpu)}'>{html.escape(str(gpu))}</a>: {links}</li>")
    return (f"<nav><ul><li><a href='#answers'>Answers</a></li><li><a href='#runs'>Runs</a></li>{''.join(items)}"
            "</ul></nav>")


def _newest_first(groups: Sequence[tuple[Gpu, pd.DataFrame]]) -> list[tuple[Gpu, pd.DataFrame]]:
    """The GPUs, the one measured last first."""
    return sorted(groups, key=lambda group: _latest(group[1]), reverse=True)


def _latest(rows: pd.DataFrame) -> str:
    """The newest run id among ``rows`` ('' where they carry none)."""
    ids = rows["run_id"].dropna() if "run_id" in rows else []
    return str(ids.max()) if len(ids) else ""


def _answers(gpu: Gpu, rows: pd.DataFrame, experiments: Mapping) -> str:
    """One GPU's answers: its newest run (date, commit, driver) and each experiment's answer in a sentence, with the
    date it was measured and a link to its section."""
    latest = _latest(rows)
    newest = rows[rows["run_id"] == latest].iloc[0] if latest else rows.iloc[0]
    about = (f"newest run {_run_date(latest)} ({latest or 'no run id'}), commit {_commit(newest.get('git_commit'))}, "
             f"driver {cell(newest.get('driver_version'))}, CUDA runtime {cell(newest.get('cuda_runtime'))}")
    lines = []
    for name, view in in_order(experiments).items():
        mine = rows[rows["experiment"] == name]
        text = view.answer(mine) if len(mine) else None
        if text:
            lines.append(f"<tr><td><a href='#{_anchor(gpu, name)}'>{html.escape(name)}</a></td>"
                         f"<td>{html.escape(text)}</td><td>{html.escape(_run_date(_latest(mine)))}</td></tr>")
    return (f"<h3>{html.escape(str(gpu))}</h3><p class='meta'>{html.escape(about)}</p><div class='scroll'>"
            "<table class='answers'><thead><tr><th>experiment</th><th>answer</th><th>measured</th></tr></thead>"
            f"<tbody>{''.join(lines)}</tbody></table></div>")


def _run_date(run_id) -> str:
    """'2026-11-22 03:42 UTC' for run 20261122T034221Z (run ids are UTC timestamps); the id itself if it is not
    one."""
    from datetime import datetime

    try:
        return datetime.strptime(str(run_id)[:15], "%Y%m%dT%H%M%S").strftime("%Y-%m-%d %H:%M UTC")
    except ValueError:
        return str(run_id)


def _commit(commit) -> str:
    """The start of a commit hash, and whether the tree had changes ('2471437a1b2c', '2471437a1b2c-dirty')."""
    text = cell(commit)
    return text[:12] + ("-dirty" if text.endswith("-dirty") else "")


def _runs(rows: pd.DataFrame, shown: pd.DataFrame) -> str:
    """One line per run and GPU of the input: the GPU (name, UUID, host, index), what it measured, how much of it
    the report shows."""
    keys = ["run_id", *analysis.MACHINE, "gpu_name"]
    frame = analysis.key_frame(rows, [*keys, "gpu_index", "experiment", *ENVIRONMENT])
    shown_keys = analysis.key_frame(shown, keys)
    shown_counts = shown_keys.groupby(keys, sort=False).size() if len(shown) else pd.Series(dtype=int)
    lines = []
    for key, group in frame.groupby(keys, sort=True):
        run, host, uuid, name = key
        first = group.iloc[0]
        count = int(shown_counts.get(key, 0))
        lines.append({
            "run": run, "GPU": name, "UUID": uuid, "host": host, "index": first.get("gpu_index", ""),
            "experiments": ", ".join(dict.fromkeys(group["experiment"])), "rows": len(group),
            "shown": count if count else "0 (newer runs measured all of it)",
            "driver / CUDA runtime": f"{first.get('driver_version', '')} / {first.get('cuda_runtime', '')}",
            "PCIe": f"Gen{cell(first.get('pcie_gen'))} x{cell(first.get('pcie_width'))}",
            "libraries": ", ".join(str(first[column]) for column in ("cupy_version", "numba_cuda_version")
                                   if first.get(column)),
            "commit": str(first.get("git_commit", ""))[:12],
        })
    return table(pd.DataFrame(lines))


# --- one GPU ---------------------------------------------------------------------------------------------------

def _gpu_section(gpu: Gpu, rows: pd.DataFrame, tables: dict, label: str, experiments: Mapping) -> list[str]:
    """Every experiment of one GPU: headline table, figures, truth tables; then the claims. With a ``label`` (the
    report has several GPUs) the section has its own heading and every table a GPU column."""
    level = 3 if label else 2
    parts = [f"<h2 id='{_anchor(gpu)}'>{html.escape(str(gpu))}</h2>"] if label else []
    figures: dict[str, list[tuple[str, bytes]]] = {}
    views = in_order(experiments)
    for name, stem, figure in plots.draw(rows[~rows["experiment"].isin(list(TRUTH_TABLES))], tables, views):
        figures.setdefault(name, []).append((stem, plots.rendered(figure, "png", DPI)))
    for name, experiment in experiments.items():
        mine = rows[rows["experiment"] == name]
        if not len(mine):
            continue
        parts.append(f"<h{level} id='{_anchor(gpu, name)}'>{html.escape(name)}</h{level}>")
        parts.append(f"<p>{html.escape(experiment.description)}. {_status(mine)}</p>")
        if name in TRUTH_TABLES:
            parts.append(truth_table(name, mine, label))
        elif name in views:
            headline = views[name].headline(mine)
            if len(headline):
                parts.append(table(headline, label))
        parts += [_figure(stem, png) for stem, png in figures.get(name, [])]
        parts.append(_not_ok(experiment, mine, label))
    parts.append(claims_section(rows, label, level))
    return parts


def _status(rows: pd.DataFrame) -> str:
    counts = rows["status"].value_counts()
    ok = int(counts.get(Status.OK, 0))
    others = ", ".join(f"{int(count)} {status}" for status, count in counts.items() if status != Status.OK)
    runs = sorted(rows["run_id"].dropna().unique())
    measured = f" (run{'s' if len(runs) > 1 else ''} {', '.join(runs)})" if runs else ""
    return html.escape(f"{ok} of {len(rows)} configurations ok{'; ' + others if others else ''}{measured}.")


def _not_ok(experiment, rows: pd.DataFrame, label: str) -> str:
    failed = rows[rows["status"] != Status.OK]
    if not len(failed):
        return ""
    frame = pd.DataFrame({"configuration": [describe(experiment, row) for _, row in failed.iterrows()],
                          "status": failed["status"], "error": failed["error"]})
    return (f"<details><summary>{len(failed)} configurations not ok</summary>{table(frame, label)}</details>")


def _figure(stem: str, png: bytes) -> str:
    width, height = struct.unpack(">II", png[16:24])  # the PNG header's IHDR chunk
    encoded = base64.b64encode(png).decode()
    return (f"<figure><img alt='{html.escape(stem)}' width='{round(width * SCALE)}' "
            f"height='{round(height * SCALE)}' src='data:image/png;base64,{encoded}'>"
            f"<figcaption>{html.escape(stem)}</figcaption></figure>")


# --- truth tables and claims -----------------------------------------------------------------------------------

def truth_table(name: str, rows: pd.DataFrame, label: str = "") -> str:
    """Calls × (spinning stream, placement), each cell coloured by the verdict, with host ms (blocking) or "host"
    where the call held the host (serialization), "!" where the measurement contradicts the documentation, and
    the documentation's statement on hover."""
    cells = {(row["call"], row["spin_stream"], row["placement"]): row for _, row in rows.iterrows()}
    groups = {spin: [placement for placement in PLACEMENTS if any(key[1:] == (spin, placement) for key in cells)]
              for spin in SPIN_STREAMS}
    groups = {spin: placements for spin, placements in groups.items() if placements}
    spins = "".join(f"<th class='group' colspan='{len(placements)}'>spinning stream {html.escape(spin)}</th>"
                    for spin, placements in groups.items())
    places = "".join(f"<th{' class=group' if index == 0 else ''}>{html.escape(placement)}</th>"
                     for placements in groups.values() for index, placement in enumerate(placements))
    body = []
    for call in dict.fromkeys(rows["call"]):
        tds = []
        for spin, placements in groups.items():
            for index, placement in enumerate(placements):
                group = " group" if index == 0 else ""
                row = cells.get((call, spin, placement))
                tds.append(f"<td class='absent{group}' title='the call takes no such stream'></td>" if row is None
                           else _truth_cell(name, row, group))
        body.append(f"<tr><th>{html.escape(call)}</th>{''.join(tds)}</tr>")
    spin_ms = rows["spin_ms"].dropna().median() if "spin_ms" in rows and rows["spin_ms"].notna().any() else SPIN_MS
    caption = (TRUTH_TABLES[name].format(spin_ms=cell(spin_ms))
               + " \"!\": contradicts the documentation (hover a cell for what it says).")
    if label:
        caption = f"GPU {label}. {caption}"
    legend = _legend((VERDICT_CLASSES[verdict], verdict, text) for verdict, text in VERDICT_MEANINGS[name])
    return (f"{legend}<div class='scroll truth'><table class='truth'><caption>{html.escape(caption)}</caption>"
            f"<thead><tr><th class='corner' rowspan='2'>call</th>{spins}</tr><tr>{places}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>")


DOCUMENTED = {  # experiment -> what the docs say, by the row's docs flag (True, False, None: silent or vague)
    "blocking": ("docs_waits", {True: "The documentation says the call waits for the running kernel",
                                False: "The documentation says the call does not wait for it",
                                None: "The documentation is silent or vague about waiting"}),
    "serialization": ("docs_serializes", {True: "The documentation says the call keeps the kernels apart",
                                          False: "The documentation says the call does not keep them apart",
                                          None: "The documentation is silent about keeping them apart"}),
}


def _truth_cell(name: str, row: pd.Series, group: str) -> str:
    from bench.analysis import contradicts_docs, short_ms

    where = f"{row['call']} on {row['placement']} (spinning stream {row['spin_stream']})"
    if row["status"] != Status.OK:
        title = html.escape(f"{where}: {row['status']}: {cell(row['error'])}")
        return f"<td class='none{group}' title='{title}'>{html.escape(row['status'])}</td>"
    contradicts = contradicts_docs(row)
    if name == "blocking":
        text = short_ms(row["host_ms"])
        detail = f"host {cell(row['host_ms'])} ms; with nothing running {cell(row.get('idle_host_ms'))} ms"
    else:
        text = "host" if _flag(row.get("host_waited")) else ""
        detail = f"the kernels overlapped {cell(row.get('overlap_ms'))} ms; host {cell(row['host_ms'])} ms"
    repeats = f" (repeats disagreed: {cell(row.get('verdicts'))})" if _flag(row.get("stable")) is False else ""
    flag, says = DOCUMENTED[name]
    statement = f": {cell(row.get('docs'))}" if cell(row.get("docs")) else ""
    source = f" ({cell(row.get('source'))})" if cell(row.get("source")) else ""
    title = (f"{where}: {row['verdict']}{repeats}; {detail}.\n{says[_flag(row.get(flag))]}{statement}{source}."
             + ("\nThe measurement contradicts the documentation." if contradicts else ""))
    marks = " contradicts" if contradicts else ""
    return (f"<td class='{VERDICT_CLASSES.get(row['verdict'], 'none')}{marks}{group}' "
            f"title='{html.escape(title)}'>{html.escape(text)}{'!' if contradicts else ''}</td>")


def _legend(entries: Iterable[tuple[str, str, str]]) -> str:
    """(CSS class, label, meaning) of each colour."""
    spans = "".join(f"<span class='{css}'><b>{html.escape(label)}</b>: {html.escape(text)}</span>"
                    for css, label, text in entries)
    return f"<p class='legend'>{spans}</p>"


def _flag(value) -> bool | None:
    return None if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)) else bool(value)


def claims_section(rows: pd.DataFrame, label: str = "", level: int = 2) -> str:
    """The folklore claims against these rows, each verdict coloured by whether the measurement agrees with the
    claim: holds (green), partly (amber), busted (red); empty when none could be judged."""
    from bench import claims

    judged = claims.table(rows)
    if (judged["verdict"] == ClaimVerdict.NOT_MEASURED).all():
        return ""
    lines = []
    for _, claim in judged.iterrows():
        first = f"<td class='gpu'>{html.escape(label)}</td>" if label else ""
        lines.append(f"<tr>{first}<td>{html.escape(claim['claim'])}</td>"
                     f"<td class='verdict {CLAIM_CLASSES[claim['verdict']]}'>"
                     f"{html.escape(claims.LABELS[claim['verdict']])}</td>"
                     f"<td>{html.escape(claim['docs say'])} (<a href='{html.escape(claim['source'])}'>docs</a>)</td>"
                     f"<td>{html.escape(claim['measured'])}</td></tr>")
    head = "".join(f"<th>{name}</th>" for name in (["GPU"] if label else [])
                   + ["claim", "verdict", "the documentation", "measured"])
    legend = _legend([("good", "holds", "the measurement agrees with the claim"),
                      ("fair", "partly", "it holds in some cases only"),
                      ("bad", "busted", "the measurement contradicts the claim")])
    return (f"<h{level}>Claims</h{level}>{legend}<div class='scroll'><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(lines)}</tbody></table></div>")
