"""One GPU's part of the report: each experiment's headline table and figures or its truth table
(:mod:`bench.report.truth`), the claims."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pandas as pd

from bench.analysis import results as results_of
from bench.analysis.results import TRUTH_TABLES, GpuResults
from bench.analysis.selection import Gpu
from bench.report.markup import anchor, contents, figure, legend, table, text, web_link
from bench.report.truth import TRUTH_ONLY, truth_table
from bench.platform.vocabulary import ClaimVerdict

CLAIM_CLASSES = {ClaimVerdict.TRUE: "good", ClaimVerdict.PARTLY: "fair", ClaimVerdict.FALSE: "bad",
                 ClaimVerdict.NOT_MEASURED: "none"}
Figures = Callable[[str], list[tuple[str, bytes]]]  # experiment -> its (stem, PNG) figures of this GPU


def gpu_id(gpu: Gpu) -> str:
    """The id of a GPU's section."""
    return anchor("gpu", gpu.host, gpu.uuid)


def experiment_id(gpu: Gpu, experiment: str) -> str:
    """The id of an experiment's part of a GPU's section."""
    return anchor("gpu", gpu.host, gpu.uuid, experiment)


def gpu_section(part: GpuResults, label: str, experiments: Mapping, views: Mapping, figures: Figures,
                elsewhere: Callable[[str], str]) -> list[str]:
    """Every experiment of one GPU (``part``: its rows, each experiment's and their headline tables): headline
    table, figures, truth tables; then the claims. With a ``label`` (the report has several GPUs) the section has its
    own heading and contents, and every table a GPU column. ``figures`` gives an experiment's figures, ``elsewhere``
    what to say (HTML) where it has none of its own (another GPU's stand for them); ``views`` are the experiments'
    (:func:`bench.views.in_order`)."""
    gpu, tables = part.gpu, part.headlines
    level = 3 if label else 2
    present = list(part.experiments)
    claims = "" if part.claims is None else claims_section(part.claims, label, level, experiment_id(gpu, "claims"))
    parts = [f"<h2 id='{gpu_id(gpu)}'>{text(str(gpu))}</h2>", contents(
        [(experiment_id(gpu, name), name) for name in present] + ([(experiment_id(gpu, "claims"), "claims")]
                                                                   if claims else []))] if label else []
    for name, mine in part.experiments.items():
        parts.append(f"<h{level} id='{experiment_id(gpu, name)}'>{text(name)}</h{level}>")
        parts.append(f"<p>{text(experiments[name].description)}. {text(results_of.status(mine))}</p>")
        if name in tables and name not in TRUTH_ONLY and len(tables[name]):
            parts.append(table(tables[name], label, plain=True))
        if name in TRUTH_TABLES:
            parts.append(truth_table(name, mine, label))
        elif name in views:
            drawn = figures(name)
            parts += [figure(stem, png) for stem, png in drawn]
            if not drawn and views[name].figures:
                parts.append(f"<p class='meta'>{elsewhere(name)}</p>")
        parts.append(_not_ok(part.failures.get(name), label))
    parts.append(claims)
    return parts


def _not_ok(failed: pd.DataFrame | None, label: str) -> str:
    if failed is None:
        return ""
    return f"<details><summary>{len(failed)} configurations not ok</summary>{table(failed, label)}</details>"


# --- claims --------------------------------------------------------------------------------------------------------

def claims_section(judged: pd.DataFrame, label: str = "", level: int = 2, section: str = "claims") -> str:
    """The folklore claims ``judged`` (:func:`bench.analysis.claims.table`; a section of id ``section``), each
    verdict coloured by whether the measurement agrees with the claim: holds (green), partly (amber), busted
    (red)."""
    from bench.analysis.claims import LABELS

    lines = []
    first = f"<td class='gpu'>{text(label)}</td>" if label else ""
    for claim in judged.to_dict("records"):
        lines.append(f"<tr>{first}<td>{text(claim['claim'])}</td>"
                     f"<td class='verdict {CLAIM_CLASSES.get(claim['verdict'], 'none')}'>"
                     f"{text(LABELS.get(claim['verdict'], claim['verdict']))}</td>"
                     f"<td>{text(claim['docs say'])} ({web_link(claim['source'], 'docs')})</td>"
                     f"<td>{text(claim['measured'])}</td></tr>")
    head = "".join(f"<th>{name}</th>" for name in (["GPU"] if label else [])
                   + ["claim", "verdict", "the documentation", "measured"])
    meanings = legend([("good", "holds", "the measurement agrees with the claim"),
                       ("fair", "partly", "it holds in some cases only"),
                       ("bad", "busted", "the measurement contradicts the claim")])
    return (f"<h{level} id='{section}'>Claims</h{level}>{meanings}<div class='scroll'><table><thead><tr>{head}</tr>"
            f"</thead><tbody>{''.join(lines)}</tbody></table></div>")
