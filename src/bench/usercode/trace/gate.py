"""A trace against its baseline (:func:`regressions_of`) and what ``bench trace --baseline`` says of the regressions
it found (:mod:`bench.usercode.trace.regressions`), in the syncs gate's three forms: plain lines, GitHub Actions
workflow commands (an error on the line of each, where one is known) and a Markdown summary. Every text is escaped
for where it lands."""

from __future__ import annotations

from bench.analysis.escape import log_line, markdown, workflow_data, workflow_property
from bench.usercode.syncs.baseline import relative
from bench.usercode.trace.regressions import Regression, regressions


def regressions_of(earlier, target: str, result, environment) -> list[Regression]:
    """What got worse in ``result`` (this process's trace of ``target``) against ``earlier`` (a trace file's rows),
    its rows made as ``bench trace --save`` would write them, with ``environment``."""
    import pandas as pd

    from bench.usercode.trace.files import rows_of

    return regressions(earlier, pd.DataFrame(rows_of([(target, result)], environment)))


def _where(regression: Regression) -> str:
    """'train.py:42': the file relative to its project (as the pull request names it), '' where none is known."""
    return f"{relative(regression.file)}:{regression.line}" if regression.where else ""


def headline(regressions: list[Regression], target: str, baseline: str) -> str:
    count = len(regressions)
    return (f"{target} against {baseline}: " + (f"worse: {count} regression{'s' * (count != 1)}" if count
                                                 else "nothing got worse"))


def text(regressions: list[Regression], target: str, baseline: str) -> str:
    lines = [headline(regressions, target, baseline)]
    lines += [f"  {_where(regression) or '-'}  {regression.kind}: {regression.text}" for regression in regressions]
    return "\n".join(log_line(line) for line in lines)


def github(regressions: list[Regression], target: str, baseline: str) -> str:
    lines = []
    for regression in regressions:
        place = (f"file={workflow_property(relative(regression.file))},line={regression.line},"
                 if regression.where else "")
        lines.append(f"::error {place}title={workflow_property(f'bench trace: {regression.kind}')}::"
                     f"{workflow_data(regression.text)} (baseline {workflow_data(baseline)})")
    lines.append(f"::{'error' if regressions else 'notice'} title=bench trace::"
                 f"{workflow_data(headline(regressions, target, baseline))}")
    return "\n".join(lines)


def summary(regressions: list[Regression], target: str, baseline: str) -> str:
    lines = [f"### {markdown(headline(regressions, target, baseline))}", ""]
    if regressions:
        lines += ["| what | where | streams | |", "| --- | --- | --- | --- |"]
        lines += ["| " + " | ".join(markdown(cell) for cell in (
            regression.kind, _where(regression) or "-", ", ".join(map(str, regression.streams)) or "-",
            regression.text)) + " |" for regression in regressions]
    return "\n".join(lines)


WRITE = {"text": text, "github": github, "markdown": summary}
