"""One self-contained HTML report of results, for people to read (``bench report``): the answers first, the runs and
the tools' results, then per GPU each experiment's headline table and figures, the truth tables and the claims.

A results file is untrusted input: every value from it is escaped for where it lands (:mod:`bench.report.markup`),
and the report forbids script by its Content-Security-Policy. Never imports CUDA, nor an experiment: the experiments'
descriptions come in as ``experiments`` (name -> description, in the sweep's order: :func:`bench.experiments.registry`),
their headlines, answers and figures from their views (:mod:`bench.views`). The same results give the same bytes.
What it shows: docs/usage.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from bench.analysis.results import Answers, Results
from bench.analysis.selection import Gpu
from bench.report.figures import Painter, Progress, experiment_figures
from bench.report.gpu import claims_section, experiment_id, gpu_id, gpu_section
from bench.report.markup import DPI, POLICY, SCALE, STYLE, cell, contents, link, table, text, words
from bench.report.tools import asked, entries, sections, tool_section
from bench.report.truth import truth_table
from bench.results.writes import MAKER
from bench.views import in_order

__all__ = ["DPI", "POLICY", "SCALE", "STYLE", "cell", "claims_section", "render", "table", "tool_section",
           "truth_table", "write"]


def render(rows: pd.DataFrame, tables: dict, experiments: Mapping, source: str = "",
           tools: Mapping[str, pd.DataFrame | None] | None = None, progress: Progress | None = None) -> str:
    """The report of ``rows`` (every row of the input; the newest measurement of each configuration per GPU is
    shown) and their side tables, of the ``experiments`` (name -> description), as an HTML document; with ``tools``
    (tool name -> rows of its results files: ``bench syncs --save``'s, ``bench trace --save``'s), a section of each
    tool's (:mod:`bench.report.tools`). ``progress`` is told of each figure drawn."""
    return laid_out(Results(rows, experiments, in_order(experiments), tables), source, tools, progress)


def laid_out(results: Results, source: str = "", tools: Mapping[str, pd.DataFrame | None] | None = None,
             progress: Progress | None = None) -> str:
    """The report of ``results`` as an HTML document (:func:`render`)."""
    labels, owners, asks = results.labels(), results.figure_owners, results.figure_rows()  # asked of the rows
    answers = [(part.gpu, results.answers(part)) for part in results.newest_first()]
    summary, runs = results.summary(), results.runs()  # all the rows are asked, once, before anything is laid out
    found = sections(tools or {})
    with Painter(progress) as painter:  # the figures are asked for first: the workers draw while this lays out
        tickets = {(gpu, name): painter.ask(experiment_figures, rows, side, [name], painter.paint)
                   for gpu, name, rows, side in asks}  # in the order the report shows them
        drawn = asked(painter, found)  # the tools' last: many quick timelines even out the workers' last figures
        origin = f"{source}: " if source else ""
        parts = [f"<h1>bench report</h1><p class='meta'>{text(origin + summary)}</p>",
                 _contents(results, entries(found)),
                 "<h2 id='answers'>Answers</h2>", *(_answers(gpu, said) for gpu, said in answers),
                 "<h2 id='runs'>Runs</h2>", table(runs)]
        # laid out in the order their figures come: the GPU sections that wait for none, those that do, the tools'
        owning = set(owners.values())
        laid = {part.gpu: gpu_section(part, labels.get(part.gpu, ""), results.experiments, results.views,
                                      _figures_of(part.gpu, painter, tickets),
                                      lambda name, gpu=part.gpu: _elsewhere(gpu, owners.get(name), name))
                for part in sorted(results.gpus, key=lambda part: part.gpu in owning)}
        parts += [tool_section(tool, section, drawn) for tool, section in found]
        for part in results.gpus:
            parts += laid[part.gpu]
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

    document = render(rows, tables, experiments, source, tools, progress).encode("utf-8")
    write_bytes(Path(out), document)
    return Path(out)


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


def _contents(results: Results, tools: list[tuple[str, str]]) -> str:
    """The report's contents in a line or two: its sections (``tools``: the tools' sections' entries), and each
    GPU's (one GPU: each experiment's)."""
    lines = [("answers", "Answers"), ("runs", "Runs"), *tools]
    if len(results.gpus) > 1:
        lines += [(gpu_id(part.gpu), part.gpu.short) for part in results.gpus]
    else:
        lines += [(experiment_id(part.gpu, name), name) for part in results.gpus for name in part.experiments]
    return contents(lines, "Contents:")


def _answers(gpu: Gpu, answers: Answers) -> str:
    """One GPU's answers: its newest run and each experiment's answer in a sentence, linked to its section; the date
    each was measured where not all in the newest run."""
    dated = answers.dated
    lines = "".join(f"<tr><td>{link(experiment_id(gpu, said.experiment), said.experiment)}</td>"
                    f"<td>{text(said.sentence)}</td>" + (f"<td>{text(said.date)}</td>" if dated else "") + "</tr>"
                    for said in answers.said)
    return (f"<h3>{text(str(gpu))}</h3><p class='meta'>{text(answers.about)}</p><div class='scroll'><table "
            f"class='answers'><thead><tr><th>experiment</th><th>answer</th>{'<th>measured</th>' if dated else ''}"
            f"</tr></thead><tbody>{lines}</tbody></table></div>")
