"""What a syncs run says against its baseline (:class:`~bench.usercode.syncs.baseline.Comparison`), in three forms:
plain lines, GitHub Actions workflow commands (each new wait an error on its line of the pull request's diff, each
place gone a notice) and a Markdown summary for the job's page. A source line may hold anything: every text a file
or the code carries is escaped for where it lands."""

from __future__ import annotations

from enum import Enum

from bench.analysis.escape import log_line, markdown, workflow_data, workflow_property
from bench.usercode.syncs.baseline import Change, Compared, Comparison


class Format(str, Enum):
    TEXT = "text"
    GITHUB = "github"
    MARKDOWN = "markdown"


def waits(count: int) -> str:
    return f"{count} wait{'s' * (count != 1)}"


def allowed(compared: Compared) -> str:
    """'3 waits (slack 2)': what the baseline allows."""
    before = compared.before
    return waits(before.count) + (f" (slack {before.slack})" if before.slack else "")


def what(compared: Compared) -> str:
    """One change in words, without the place."""
    now, change = compared.now, compared.change
    calls = f" in {', '.join(now.cuda_calls)}" if now is not None and now.cuda_calls else ""
    if change is Change.NEW:
        return f"new: {waits(now.count)}{calls}, none in the baseline"
    if change is Change.GONE:
        return f"gone: no wait, the baseline has {allowed(compared)}"
    return f"{change.value}: {waits(now.count)}{calls}, the baseline has {allowed(compared)}"


def headline(comparison: Comparison, target: str) -> str:
    worse, better = len(comparison.worse), len(comparison.better)
    same = len(comparison.changes) - worse - better
    verdict = "worse" if comparison.failed else "nothing got worse"
    return (f"{target} against {comparison.baseline}: {verdict}: {worse} place{'s' * (worse != 1)} worse, "
            f"{better} better, {same} the same")


def text(comparison: Comparison, target: str) -> str:
    """Plain lines: the headline, then each place that changed (the same ones left out)."""
    lines = [headline(comparison, target)]
    for compared in comparison.changes:
        if compared.change is not Change.SAME:
            lines.append(f"  {compared.key.file}:{compared.line}  {what(compared)}  {compared.place}")
    return "\n".join(log_line(line) for line in lines)


def github(comparison: Comparison, target: str) -> str:
    """A workflow command per place that changed: ``::error`` for a new wait or more waits (on the line of the
    file, as the project names it), ``::notice`` for fewer or none; then the headline as a notice or an error."""
    lines = []
    for compared in comparison.changes:
        if compared.change is Change.SAME:
            continue
        level = "error" if compared.change.worse else "notice"
        title = f"bench syncs: {compared.change.value} wait" if compared.change.worse else "bench syncs: fewer waits"
        lines.append(f"::{level} file={workflow_property(compared.key.file)},line={compared.line},"
                     f"title={workflow_property(title)}::{workflow_data(what(compared) + ': ' + str(compared.place))} "
                     f"(baseline {workflow_data(comparison.baseline)})")
    lines.append(f"::{'error' if comparison.failed else 'notice'} title=bench syncs::"
                 f"{workflow_data(headline(comparison, target))}")
    return "\n".join(lines)


def summary(comparison: Comparison, target: str) -> str:
    """A Markdown summary (for ``$GITHUB_STEP_SUMMARY``): the headline, and a table of the places that changed."""
    lines = [f"### {markdown(headline(comparison, target))}", ""]
    changed = [compared for compared in comparison.changes if compared.change is not Change.SAME]
    if changed:
        lines += ["| change | place | function | waits | baseline | CUDA call | code |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for compared in changed:
            now, before = compared.now, compared.before
            cells = (compared.change.value, f"{compared.key.file}:{compared.line}", compared.key.function,
                     str(now.count) if now else "0", allowed(compared) if before else "none",
                     ", ".join(now.cuda_calls) if now and now.cuda_calls else "", compared.place.source)
            lines.append("| " + " | ".join(markdown(cell) for cell in cells) + " |")
    return "\n".join(lines)


WRITE = {Format.TEXT: text, Format.GITHUB: github, Format.MARKDOWN: summary}
