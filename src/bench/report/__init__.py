"""One self-contained HTML report of results, for people to read: the answers first (per GPU, newest run first: its
newest run's date and commit, and each experiment's answer in a sentence), every run of the input with the GPU it ran
on, where code waited and how much it overlapped (the tools' own results), then per GPU (a section each when there
are several) each experiment's headline table and figures, the truth tables (blocking, serialization, library,
crossgpu) as HTML tables, and the claims. Every section is in the contents. Of several measurements of a
configuration on one GPU, the newest is shown. An experiment's figures are drawn once, of the GPU that measured it
last; the other GPUs' sections say whose they are (``bench report --gpu`` or ``bench plot`` draw theirs): the report
of a fleet of any size stays quick to make and to open. Figures shrink to the page's width; a table column holds one
unit, named in its header.

A results file is untrusted input: every value from it is escaped for where it lands (:mod:`bench.report.markup`),
and the report forbids script by its Content-Security-Policy (it has none of its own). Opens in a browser from the
file alone; never imports CUDA, nor an experiment: the experiments' descriptions come in as ``experiments`` (name ->
description, in the sweep's order: :func:`bench.experiments.registry`), their headlines, answers and figures from
their views (:mod:`bench.views`). The same results give the same bytes (the only dates in it are the runs')."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from bench.analysis import selection, plots
from bench.analysis.selection import Gpu
from bench.platform.libraries import LIBRARIES
from bench.report.figures import Painter, Progress, experiment_figures
from bench.report.gpu import by_experiment, claims_section, experiment_id, gpu_id, gpu_section, headlines
from bench.report.markup import (DPI, POLICY, SCALE, STYLE, cell, contents, link, plain_numbers, table, text,
                                  words)
from bench.report.tools import asked, entries, sections, tool_section
from bench.report.truth import TRUTH_TABLES, truth_table
from bench.timing.phases import phase
from bench.views import in_order
from bench.results.writes import MAKER

__all__ = ["DPI", "POLICY", "SCALE", "STYLE", "cell", "claims_section", "render", "table", "tool_section",
           "truth_table", "write"]
VERSIONS = tuple(library.version_column for library in LIBRARIES)  # the libraries' versions
ENVIRONMENT = ("driver_version", "cuda_runtime", "pcie_gen", "pcie_width", *VERSIONS, "git_commit")


def render(rows: pd.DataFrame, tables: dict, experiments: Mapping, source: str = "",
           tools: Mapping[str, pd.DataFrame | None] | None = None, progress: Progress | None = None) -> str:
    """The report of ``rows`` (every row of the input; the newest measurement of each configuration per GPU is
    shown) and their side tables, of the ``experiments`` (name -> description), as an HTML document; with ``tools``
    (tool name -> rows of its results files: ``bench syncs --save``'s, ``bench trace --save``'s), a section of each
    tool's (:mod:`bench.report.tools`). ``progress`` is told of each figure drawn."""
    with phase("the newest measurement of each configuration"):
        shown = selection.newest(rows, experiments)
    groups = selection.by_gpu(shown)
    labels = _labels(groups) if len(groups) > 1 else {}
    found = sections(tools or {})
    with Painter(progress) as painter:  # the figures are asked for first: the workers draw while this lays out
        owners = _figure_owners(groups, experiments)
        tickets = _ask_figures(painter, groups, tables, owners, experiments)  # in the order the report shows them
        drawn = asked(painter, found)  # the tools' last: many quick timelines even out the workers' last figures
        split = {gpu: by_experiment(mine, experiments) for gpu, mine in groups}
        with phase("headline tables"):
            made = {gpu: headlines(split[gpu], experiments) for gpu, _ in groups}
        parts = [f"<h1>bench report</h1><p class='meta'>{_summary(rows, shown, groups, source)}</p>",
                 _contents(groups, split, experiments, entries(found)),
                 "<h2 id='answers'>Answers</h2>",
                 *(_answers(gpu, mine, split[gpu], made[gpu], experiments) for gpu, mine in _newest_first(groups)),
                 "<h2 id='runs'>Runs</h2>", _runs(rows, shown)]
        # laid out in the order their figures come: the GPU sections that wait for none, those that do, the tools'
        owning = set(owners.values())
        laid_out = {gpu: gpu_section(gpu, mine, split[gpu], made[gpu], labels.get(gpu, ""), experiments,
                                     _figures_of(gpu, painter, tickets),
                                     lambda name, gpu=gpu: _elsewhere(gpu, owners.get(name), name))
                    for gpu, mine in sorted(groups, key=lambda group: group[0] in owning)}
        parts += [tool_section(tool, section, drawn) for tool, section in found]
        for gpu, _ in groups:
            parts += laid_out[gpu]
    document = ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
                f"<meta name='generator' content='{MAKER}'>"
                f"<meta http-equiv='Content-Security-Policy' content=\"{POLICY}\"><title>bench report</title>"
                f"<meta name='viewport' content='width=device-width'><style>{STYLE}</style></head><body>"
                f"{''.join(parts)}</body></html>\n")
    return words(document)  # the last line of defence: bench's markup has no control character but \n, the data none


def write(rows: pd.DataFrame, tables: dict, out: Path, experiments: Mapping, source: str = "",
          tools: Mapping[str, pd.DataFrame | None] | None = None, progress: Progress | None = None) -> Path:
    """Render and write atomically (a reader never sees half a report)."""
    from bench.results.writes import write_bytes

    out = Path(out)
    write_bytes(out, render(rows, tables, experiments, source, tools, progress).encode("utf-8"))
    return out


# --- figures ---------------------------------------------------------------------------------------------------

def _ask_figures(painter: Painter, groups: Sequence[tuple[Gpu, pd.DataFrame]], tables: dict,
                 owners: Mapping[str, Gpu], experiments: Mapping) -> dict[tuple[Gpu, str], int]:
    """(GPU, experiment) -> the ticket of its figures, for those the report draws (``owners``:
    :func:`_figure_owners`): of the GPU's rows but the truth tables' (which get HTML tables), the columns and side
    tables the experiment's view reads."""
    views = in_order(experiments)
    tickets = {}
    for gpu, mine in groups:
        owned = [name for name in views if owners.get(name) == gpu]
        if not owned:
            continue
        drawable, side = ~mine["experiment"].isin(list(TRUTH_TABLES)), plots.tables_of(tables, mine)
        for name in owned:
            view = views[name]
            tickets[(gpu, name)] = painter.ask(experiment_figures, selection.only(mine, view.reads())[drawable],
                                               {table: side[table] for table in view.tables if table in side},
                                               [name], painter.paint)
    return tickets


def _figure_owners(groups: Sequence[tuple[Gpu, pd.DataFrame]], experiments: Mapping) -> dict[str, Gpu]:
    """experiment -> the GPU whose figures of it the report shows: the one that measured it last (the first of them
    on a tie). The truth tables' experiments have HTML tables instead."""
    owners: dict[str, tuple[str, Gpu]] = {}
    names = [name for name in in_order(experiments) if name not in TRUTH_TABLES]
    for gpu, mine in groups:
        measured = mine.groupby("experiment")["run_id"].max() if "run_id" in mine else pd.Series(dtype=object)
        present = set(mine["experiment"])
        for name in names:
            if name not in present:
                continue
            run = cell(measured.get(name))
            if name not in owners or run > owners[name][0]:
                owners[name] = (run, gpu)
    return {name: gpu for name, (_, gpu) in owners.items()}


def _figures_of(gpu: Gpu, painter: Painter, tickets: dict):
    """experiment -> [(stem, PNG)] of the figures drawn for ``gpu`` (none where another GPU shows them)."""
    def figures(name: str) -> list[tuple[str, bytes]]:
        ticket = tickets.get((gpu, name))
        return [] if ticket is None else [(stem, png) for _, stem, png in painter.result(ticket)]

    return figures


def _elsewhere(gpu: Gpu, owner: Gpu | None, name: str) -> str:
    """Where the figures of ``name`` are, when another GPU's stand for those of ``gpu`` (HTML: a link to them)."""
    if owner is None or owner == gpu:
        return "No figures: the rows support none."
    model = " (this GPU's model)" if owner.name == gpu.name else ""
    return (f"Figures: drawn once per experiment, of the GPU that measured it last: "
            f"{link(experiment_id(owner, name), f'{owner.short} on {owner.host}')}{text(model)}; "
            + text(f"bench report --gpu {gpu.tag} (or bench plot) draws this GPU's."))


# --- the first screen: summary, contents, answers ----------------------------------------------------------------

def _labels(groups: Sequence[tuple[Gpu, pd.DataFrame]]) -> dict[Gpu, str]:
    """What the GPU column says for each GPU: name and start of UUID, and the host where hosts differ."""
    hosts = {gpu.host for gpu, _ in groups}
    return {gpu: f"{gpu.short} on {gpu.host}" if len(hosts) > 1 else gpu.short for gpu, _ in groups}


def _summary(rows: pd.DataFrame, shown: pd.DataFrame, groups: Sequence, source: str) -> str:
    keys = selection.key_frame(rows, ["run_id", "hostname"])
    measured = keys[rows["run_id"].notna()] if "run_id" in rows else keys.iloc[0:0]
    runs = len(measured.drop_duplicates())  # a sweep: one run on one host
    newest = f"; newest run {cell(max(map(str, measured['run_id'])))}" if runs else ""
    origin = f"{source}: " if source else ""
    return text(f"{origin}{runs} run{'s' if runs != 1 else ''} on {len(groups)} GPU{'s' if len(groups) != 1 else ''}"
                f"{newest}. Of {len(rows)} result rows, the newest measurement of each configuration on each GPU is "
                f"shown ({len(shown)} rows).")


def _contents(groups: Sequence[tuple[Gpu, pd.DataFrame]], split: Mapping[Gpu, Mapping], experiments: Mapping,
              tools: list[tuple[str, str]]) -> str:
    """The report's contents in a line or two: its sections (``tools``: the tools' sections' entries), and each
    GPU's (one GPU: each experiment's)."""
    lines = [("answers", "Answers"), ("runs", "Runs"), *tools]
    if len(groups) > 1:
        lines += [(gpu_id(gpu), gpu.short) for gpu, _ in groups]
    else:
        lines += [(experiment_id(gpu, name), name) for gpu, _ in groups for name in split[gpu]]
    return contents(lines, "Contents:")


def _newest_first(groups: Sequence[tuple[Gpu, pd.DataFrame]]) -> list[tuple[Gpu, pd.DataFrame]]:
    """The GPUs, the one measured last first."""
    return sorted(groups, key=lambda group: _latest(group[1]), reverse=True)


def _latest(rows: pd.DataFrame) -> str:
    """The newest run id among ``rows`` ('' where they carry none)."""
    ids = rows["run_id"].to_numpy(dtype=object) if "run_id" in rows else []
    return max((str(run) for run in ids if not pd.isna(run)), default="")


def _answers(gpu: Gpu, rows: pd.DataFrame, experiment_rows: Mapping[str, pd.DataFrame],
             tables: Mapping[str, pd.DataFrame], experiments: Mapping) -> str:
    """One GPU's answers: its newest run (date, commit, driver) and each experiment's answer in a sentence (of
    ``experiment_rows``: :func:`by_experiment`, and their headline ``tables``), linked to its section; the date each
    was measured where not all in the newest run."""
    latest = _latest(rows)
    newest = rows.iloc[int((rows["run_id"].astype(str) == latest).to_numpy().argmax()) if latest else 0]
    about = (f"newest run {_run_date(latest)} ({latest or 'no run id'}), commit {_commit(newest.get('git_commit'))}, "
             f"driver {cell(newest.get('driver_version'))}, CUDA runtime {cell(newest.get('cuda_runtime'))}")
    said = []
    for name, view in in_order(experiments).items():
        mine = experiment_rows.get(name)
        answer = view.answer(mine, tables[name]) if mine is not None else None
        if answer:
            said.append((name, plain_numbers(answer), _run_date(_latest(mine))))
    dated = len({date for *_, date in said}) > 1  # some answers come from an earlier run
    lines = "".join(f"<tr><td>{link(experiment_id(gpu, name), name)}</td><td>{text(answer)}</td>"
                    + (f"<td>{text(date)}</td>" if dated else "") + "</tr>" for name, answer, date in said)
    return (f"<h3>{text(str(gpu))}</h3><p class='meta'>{text(about)}</p><div class='scroll'><table class='answers'>"
            f"<thead><tr><th>experiment</th><th>answer</th>{'<th>measured</th>' if dated else ''}</tr></thead>"
            f"<tbody>{lines}</tbody></table></div>")


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
    commit = cell(commit)
    return commit[:12] + ("-dirty" if commit.endswith("-dirty") else "")


def _runs(rows: pd.DataFrame, shown: pd.DataFrame) -> str:
    """One line per run and GPU of the input: the GPU (name, UUID, host, index), what it measured, how much of it
    the report shows."""
    keys = ["run_id", *selection.MACHINE, "gpu_name"]
    frame = selection.key_frame(rows, [*keys, "gpu_index", "experiment", *ENVIRONMENT])
    shown_keys = selection.key_frame(shown, keys)
    shown_counts = shown_keys.groupby(keys, sort=False).size() if len(shown) else pd.Series(dtype=int)
    lines = []
    for key, group in frame.groupby(keys, sort=True):
        run, host, uuid, name = key
        first = group.iloc[0]
        count = int(shown_counts.get(key, 0))
        lines.append({
            "run": run, "GPU": name, "UUID": uuid, "host": host, "index": first.get("gpu_index", ""),
            "experiments": ", ".join(dict.fromkeys(map(cell, group["experiment"]))), "rows": len(group),
            "shown": count if count else "0 (newer runs measured all of it)",
            "driver / CUDA runtime": f"{first.get('driver_version', '')} / {first.get('cuda_runtime', '')}",
            "PCIe": f"Gen{cell(first.get('pcie_gen'))} x{cell(first.get('pcie_width'))}",
            "libraries": ", ".join(dict.fromkeys(cell(value) for column in VERSIONS if column in group
                                                 for value in dict.fromkeys(group[column]) if cell(value))),
            "commit": cell(first.get("git_commit", ""))[:12],
        })
    return table(pd.DataFrame(lines))


