"""One GPU's part of the report: each experiment's headline table and figures or its truth table
(:mod:`bench.report.truth`), the claims."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from bench.analysis.selection import Gpu, only
from bench.analysis.compare import describe
from bench.report.markup import anchor, cell, contents, figure, legend, table, text, web_link
from bench.report.truth import TRUTH_COLUMNS, TRUTH_ONLY, TRUTH_TABLES, truth_table
from bench.views import in_order
from bench.platform.vocabulary import ClaimVerdict, Status

CLAIM_CLASSES = {ClaimVerdict.TRUE: "good", ClaimVerdict.PARTLY: "fair", ClaimVerdict.FALSE: "bad",
                 ClaimVerdict.NOT_MEASURED: "none"}
Figures = Callable[[str], list[tuple[str, bytes]]]  # experiment -> its (stem, PNG) figures of this GPU
SECTION_COLUMNS = ("experiment", "status", "error", "run_id")  # what a section reads of an experiment's rows
# besides its axes (status, the configurations not ok) and what its view reads


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
    failed = _failed(rows)
    counts = rows["status"].value_counts() if failed.any() else {Status.OK: len(rows)}
    ok = int(counts.get(Status.OK, 0))
    others = ", ".join(f"{int(count)} {state}" for state, count in counts.items() if state != Status.OK)
    ids = rows["run_id"].to_numpy(dtype=object)
    runs = sorted(map(str, dict.fromkeys(ids[pd.notna(ids)])))
    measured = f" (run{'s' if len(runs) > 1 else ''} {', '.join(runs)})" if runs else ""
    return text(f"{ok} of {len(rows)} configurations ok{'; ' + others if others else ''}{measured}.")


def _failed(rows: pd.DataFrame) -> np.ndarray:
    """Which of ``rows`` are not ok."""
    return rows["status"].to_numpy(dtype=object) != Status.OK


def _not_ok(experiment, rows: pd.DataFrame, label: str) -> str:
    failed = _failed(rows)
    if not failed.any():
        return ""
    failed = rows[failed]
    frame = pd.DataFrame({"configuration": [describe(experiment, row) for _, row in failed.iterrows()],
                          "status": failed["status"], "error": failed["error"]})
    return f"<details><summary>{len(failed)} configurations not ok</summary>{table(frame, label)}</details>"


# --- truth tables and claims -----------------------------------------------------------------------------------

def claims_section(rows: pd.DataFrame, label: str = "", level: int = 2, section: str = "claims") -> str:
    """The folklore claims against these rows (a section of id ``section``), each verdict coloured by whether the
    measurement agrees with the claim: holds (green), partly (amber), busted (red); empty when none could be
    judged."""
    from bench.analysis import claims

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
