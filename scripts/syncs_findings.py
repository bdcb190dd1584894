"""The tables of docs/findings/*-syncs.md from the summaries scripts/syncs_cases.py wrote (results/_syncs/*.json):
one table per GPU, a row per case, bench syncs beside the independent methods.

    python scripts/syncs_findings.py results/_syncs/A-syncs.json [B-syncs.json ...]
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
        print(library_table(path) if path.suffix == ".parquet" else table(json.loads(path.read_text()), path))
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
