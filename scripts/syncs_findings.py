"""The tables of docs/findings/*-syncs.md from the summaries scripts/syncs_cases.py wrote (results/_syncs/*.json):
one table per GPU, a row per case, bench syncs beside the independent methods.

    python scripts/syncs_findings.py results/_syncs/A-syncs-cases.json [B-syncs-cases.json ...]   # issue 32's table
    python scripts/syncs_findings.py results/_syncs/A-syncs.json      # the earlier summaries (issue 23's cases)
    python scripts/syncs_findings.py results/A.parquet      # a sweep's JAX and Triton rows of the library table
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def mark(value) -> str:
    return "—" if value is None else ("waits" if value is True else "returns" if value is False else str(value))


def table(summary: dict, source: Path) -> str:
    lines = [f"### {summary['gpu']} ({summary['uuid'][:12]}), commit {summary['commit'][:7] or 'unknown'}",
             "", f"From `{source.as_posix()}`.", "",
             "| case | expected | bench syncs | lines named | spin on its stream | probe (hold) | host time | "
             "PyTorch debug mode | hold per wait (ms) |", "|---|---|---|---|---|---|---|---|---:|"]
    for case in summary["cases"]:
        if "error" in case:
            lines.append(f"| {case['name']} | | error: {case['error'][:80]} | | | | | | |")
            continue
        named = "<br>".join(line.split(" [")[0].replace("|", "\\|") for line in case.get("lines", [])) or "—"
        holds = ", ".join(f"{ms:.0f}" for ms in case.get("hold_ms_per_wait", [])) or "—"
        debug = case.get("torch_debug_mode_warned")
        lines.append(f"| {case['name'].replace('|', '/')} | {mark(case['expected_wait'])} | {mark(case['waited'])} | "
                     f"{named} | {mark(case.get('one_stream_spin'))} | {case.get('probe_hold', '—')} | "
                     f"{mark(case.get('host_time_waited'))} ({case.get('host_ms', 0):.1f} of "
                     f"{case.get('gpu_done_ms', 0):.1f} ms) | {'—' if debug is None else 'warned' if debug else 'silent'}"
                     f" | {holds} |")
    pytest_cases = summary.get("assert_async", {})
    lines += ["", "`assert_async`: " + "; ".join(f"{key}: {value}" for key, value in pytest_cases.items()
                                                 if key != "inner message")]
    return "\n".join(lines)


def cell(text) -> str:
    """A markdown cell: pipes escaped, nothing for None."""
    return "" if text is None else str(text).replace("|", "\\|")


def lines_waits(row: dict, side: str) -> str:
    lines = row.get(f"{side}_lines")
    return "—" if lines is None else f"{lines} / {row.get(f'{side}_waits')}"


def case_table(summary: dict, source: Path) -> str:
    """Issue 32's table (scripts/syncs_cases.py's syncs-cases JSON): per case, the lines and waits its markers expect
    and bench syncs found, whether they agree, the independent method's verdict and bench syncs' seconds; then what
    each case that does not agree missed or found unmarked."""
    lines = [f"### {summary['gpu']} ({summary['uuid'][:12]}), commit {(summary.get('commit') or 'unknown')[:7]}",
             "", f"From `{source.as_posix()}`" + (f", settle {summary['settle_ms']:g} ms" if summary.get("settle_ms")
                                                  else "") + ".", "",
             "| case | library | expected lines / waits | found lines / waits | agrees | independent | "
             "bench syncs (s) |", "|---|---|---|---|---|---|---:|"]
    rows = summary.get("rows", [])
    for row in rows:
        if row.get("status") != "ok":
            lines.append(f"| {cell(row['case'])} | {row.get('library', '')} | {lines_waits(row, 'expected')} | "
                         f"{row.get('status')}: {cell((row.get('error') or '')[:80])} | | | |")
            continue
        verdict = row.get("independent")
        method = "spin on its stream" if "spin" in (row.get("independent_method") or "") else "host time"
        differs = "" if row.get("independent_agrees") else ", differs from the markers"
        independent = "—" if verdict is None else f"{verdict} ({method}{differs})"
        lines.append(f"| {cell(row['case'])} | {row.get('library', '')} | {lines_waits(row, 'expected')} | "
                     f"{lines_waits(row, 'found')} | {'yes' if row.get('agrees') else '**no**'} | {independent} | "
                     f"{row.get('syncs_s', 0):.1f} |")
    done = [row for row in rows if row.get("status") == "ok"]
    lines += ["", f"{sum(bool(row.get('agrees')) for row in done)} of {len(done)} cases agree with their markers; "
                  f"the independent method agrees with the markers on "
                  f"{sum(bool(row.get('independent_agrees')) for row in done)}."]
    notes = [(row, key) for row in done if not row.get("agrees") or row.get("thread_mismatch")
             for key in ("missed", "unexpected", "count_mismatch", "thread_mismatch") if row.get(key)]
    if notes:
        lines += [""] + [f"- {cell(row['case'])}: {key.replace('_', ' ')}: `{row[key]}`" for row, key in notes]
    for group, reason in summary.get("skipped_groups", {}).items():
        lines.append(f"- skipped {group}: {reason}")
    pytest_cases = summary.get("assert_async", {})
    if pytest_cases:
        lines += ["", "`assert_async`: " + "; ".join(f"{key}: {value}" for key, value in pytest_cases.items()
                                                     if key != "inner message")]
    return "\n".join(lines)


def library_table(results: Path) -> str:
    """The JAX and Triton rows of a sweep's library experiment: verdict (host ms) per placement."""
    import pandas as pd

    rows = pd.read_parquet(results)
    mine = rows[(rows["experiment"] == "library") & (rows["status"] == "ok")
                & (rows["library"].eq("jax") | rows["call"].str.contains("triton"))]
    lines = [f"From `{results.as_posix()}` (commit {mine['git_commit'].iloc[0]}).", "",
             "| call | all streams held (JAX) / its stream spun | another stream spun | kernels around it | docs |",
             "|---|---|---|---|---|"]
    for call, group in mine.groupby("call", sort=False):
        cells = {row["placement"]: row for _, row in group.iterrows()}

        def cell(placement: str) -> str:
            row = cells.get(placement)
            if row is None:
                return ""
            if placement == "between":
                return str(row["verdict"])
            return f"{row['verdict']} ({row['host_ms']:.3g} ms)"

        docs = cells.get("same", group.iloc[0])["docs_host"]
        lines.append(f"| {call} | {cell('same')} | {cell('other')} | {cell('between')} | {docs} |")
    return "\n".join(lines)


def main(paths: list[str]) -> None:
    for path in map(Path, paths):
        if path.suffix == ".parquet":
            print(library_table(path))
        else:
            summary = json.loads(path.read_text())
            print(case_table(summary, path) if "rows" in summary else table(summary, path))
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
