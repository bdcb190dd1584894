"""The tables of the trace findings page, read from the trace cases' JSON files (scripts/trace_cases.py) and the
overhead files (scripts/trace_overhead.py) under results/_trace/.

    python scripts/trace_findings.py [RESULTS_DIR]

Prints Markdown: every run's overlap-experiment agreement, the newest run per GPU kind's user pipelines, and the
tracing overhead of every overhead file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def cases(folder: Path) -> list[tuple[str, dict]]:
    return [(path.name, json.loads(path.read_text())) for path in sorted(folder.glob("*-cases.json"))]


def kind(gpu: dict) -> str:
    return "H100" if "H100" in gpu["gpu_name"] else "H200" if "H200" in gpu["gpu_name"] else gpu["gpu_name"]


def agreement(runs: list[tuple[str, dict]]) -> list[str]:
    lines = ["| run | GPU | commit | case | trace makespan ms | experiment ms (before, after) | makespan | efficiency "
             "trace / experiment | difference | trace vs untraced runs | CUPTI vs events |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, document in runs:
        gpu = document["gpu"]
        for case in document["cases"]:
            if "experiment_makespans_ms" not in case:
                continue
            before, after = case["experiment_makespans_ms"]
            summary = case["summary"]
            lines.append(
                f"| {name[:16]} | {kind(gpu)} {gpu['gpu_uuid'][:12]} | {gpu['git_commit']} | {case['case']} | "
                f"{summary['makespan_ms']:.3f} | {before:.3f}, {after:.3f} | {case['makespan_vs_experiment']:+.2%} | "
                f"{summary['efficiency']:.1%} / {case['experiment_efficiency']:.1%} | {case['efficiency_pp']:+.2f} pp | "
                f"{case['gpu_overhead']:+.2%} | {case['cupti_vs_events']:+.2%} |")
    return lines


def pipelines(runs: list[tuple[str, dict]]) -> list[str]:
    newest: dict[str, tuple[str, dict]] = {}
    for name, document in runs:
        newest[kind(document["gpu"])] = (name, document)
    lines = ["| GPU | case | makespan ms (runs) | bound ms | efficiency | copies hidden | idle ms | pageable cost ms | "
             "CUPTI vs events | GPU time traced vs untraced |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for gpu_kind, (name, document) in sorted(newest.items()):
        for case in document["cases"]:
            if "experiment_makespans_ms" in case:
                continue
            summary = case["summary"]
            hidden = "" if summary["hidden"] is None else f"{summary['hidden']:.0%}"
            lines.append(
                f"| {gpu_kind} {document['gpu']['gpu_uuid'][:12]} | {case['case']} | {summary['makespan_ms']:.2f} "
                f"({summary['makespan_min_ms']:.2f}–{summary['makespan_max_ms']:.2f}) | {summary['bound_ms']:.2f} | "
                f"{summary['efficiency']:.0%} | {hidden} | {summary['idle_ms']:.2f} | "
                f"{summary['pageable_cost_ms']:.1f} | {case['cupti_vs_events']:+.2%} | {case['gpu_overhead']:+.2%} |")
    return lines


def overhead(folder: Path) -> list[str]:
    lines = ["| file | GPU | pipeline | untraced ms | records only | records and callbacks | experiment's sampling ms |",
             "|---|---|---|---:|---:|---:|---:|"]
    for path in sorted(folder.glob("*-overhead.json")):
        document = json.loads(path.read_text())
        gpu = document["gpu"]
        for name, case in document["cases"].items():
            medians = case["median_ms"]
            sampled = medians.get("experiment's sampling")
            untraced = medians["untraced"]
            lines.append(f"| {path.name[:16]} | {kind(gpu)} {gpu['gpu_uuid'][:12]} | {name} | {untraced:.3f} | "
                         f"{case['overhead']['activity records']:+.2%} | "
                         f"{case['overhead']['records and callbacks']:+.2%} | "
                         f"{'' if sampled is None else f'{sampled:.3f}'} |")
    return lines


def main() -> int:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "results") / "_trace"
    runs = cases(folder)
    print("## The overlap experiment's pipeline, traced\n")
    print("\n".join(agreement(runs)))
    print("\n## Pipelines as users write them (newest run per GPU kind)\n")
    print("\n".join(pipelines(runs)))
    print("\n## Tracing overhead on GPU time\n")
    print("\n".join(overhead(folder)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
