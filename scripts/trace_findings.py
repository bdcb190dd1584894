"""The tables of the trace findings page, read from the trace cases' JSON files (scripts/trace_cases.py), the
overhead files (scripts/trace_overhead.py), the copy-drift files (scripts/copy_rate_drift.py) and the callback-cost
outputs (scripts/trace_callback_cost.py) under results/_trace/.

    python scripts/trace_findings.py [RESULTS_DIR]

Prints Markdown: the overlap-experiment agreement of every run compared run by run, that of the earlier runs
(compared with the experiment measured before and after), the newest run per GPU kind's user pipelines, the tracing
overhead of every overhead file, the copies' bound on different pinned buffers (scripts/pinned_buffers.py) and over
consecutive blocks of samples (scripts/copy_rate_drift.py), and the host cost per call of every callback-cost output.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trace_cases import paired_agreement, side_by_side  # noqa: E402
from trace_overhead import paired_overhead  # noqa: E402

COST_MODES = ("untraced", "records only", "records and callbacks", "callbacks, no stacks",
              "empty callbacks, cupti-python", "empty callbacks, ctypes")


def documents(folder: Path, pattern: str) -> list[tuple[str, dict]]:
    """(file name, JSON document) of every file in ``folder`` matching ``pattern``, oldest first."""
    return [(path.name, json.loads(path.read_text())) for path in sorted(folder.glob(pattern))]


def header(columns: list[str], left: int = 4) -> list[str]:
    """A Markdown table's header and alignment rows: the first ``left`` columns to the left, the rest right."""
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * left + "---:|" * (len(columns) - left)]


def run_cells(run: str, gpu: dict, what: str) -> str:
    """A row's first cells: the run (a file's stamp), the GPU, the commit, what the row is about."""
    return f"| {run} | {kind(gpu)} {gpu['gpu_uuid'][:12]} | {gpu['git_commit']} | {what} | "


def kind(gpu: dict) -> str:
    return "H100" if "H100" in gpu["gpu_name"] else "H200" if "H200" in gpu["gpu_name"] else gpu["gpu_name"]


def paired(runs: list[tuple[str, dict]]) -> list[str]:
    lines = header(["run", "GPU", "commit", "case", "trace makespan ms", "makespan, run by run (95%)",
                    "efficiency, run by run (95%)", "trace's bound vs experiment's (experiment's two apart)",
                    "bounds side by side", "deciles", "GPU time traced vs untraced", "CUPTI vs events"])
    for name, document in runs:
        gpu = document["gpu"]
        for case in document["cases"]:
            if "cupti_makespans_ms" not in case:
                continue
            found = paired_agreement(case)
            (low, high), (pp_low, pp_high) = found["makespan_95"], found["efficiency_pp_95"]
            bounds = case.get("experiment_bounds_ms")
            apart = (f" ({bounds[1] / bounds[0] - 1:+.2%})" if bounds and bounds[1] != bounds[0] else " (once)")
            beside = f"{side_by_side(case):+.2%}" if "side_by_side_bounds_ms" in case else ""
            deciles = case["deciles_vs_interleaved"]
            lines.append(
                run_cells(name[:16], gpu, case["case"])
                + f"{case['summary']['makespan_ms']:.3f} | {found['makespan']:+.2%} ({low:+.2%} to {high:+.2%}) | "
                  f"{found['efficiency_pp']:+.2f} pp ({pp_low:+.2f} to {pp_high:+.2f}) | "
                  f"{case['bound_vs_experiment']:+.2%}{apart} | {beside} | "
                  f"{min(deciles):+.2%} to {max(deciles):+.2%} | {case['gpu_overhead']:+.2%} | "
                  f"{case['cupti_vs_events']:+.2%} |")
    return lines


def agreement(runs: list[tuple[str, dict]]) -> list[str]:
    lines = header(["run", "GPU", "commit", "case", "trace makespan ms", "experiment ms (before, after)", "makespan",
                    "efficiency trace / experiment", "difference", "trace vs untraced runs", "CUPTI vs events"])
    for name, document in runs:
        gpu = document["gpu"]
        for case in document["cases"]:
            if "experiment_makespans_ms" not in case or "cupti_makespans_ms" in case:
                continue
            before, after = case["experiment_makespans_ms"]
            summary = case["summary"]
            lines.append(
                run_cells(name[:16], gpu, case["case"])
                + f"{summary['makespan_ms']:.3f} | {before:.3f}, {after:.3f} | {case['makespan_vs_experiment']:+.2%} | "
                  f"{summary['efficiency']:.1%} / {case['experiment_efficiency']:.1%} | "
                  f"{case['efficiency_pp']:+.2f} pp | {case['gpu_overhead']:+.2%} | {case['cupti_vs_events']:+.2%} |")
    return lines


def pipelines(runs: list[tuple[str, dict]]) -> list[str]:
    newest: dict[str, tuple[str, dict]] = {}
    for name, document in runs:
        newest[kind(document["gpu"])] = (name, document)
    lines = header(["GPU", "case", "makespan ms (runs)", "bound ms", "efficiency", "copies hidden", "idle ms",
                    "pageable cost ms", "CUPTI vs events", "GPU time traced vs untraced"], left=2)
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
    lines = header(["file", "GPU", "commit", "pipeline", "untraced ms", "records only, run by run",
                    "records and callbacks, run by run", "experiment's sampling ms"])
    for file, document in documents(folder, "*-overhead.json"):
        gpu = document["gpu"]
        for name, case in document["cases"].items():
            medians = case["median_ms"]
            sampled = medians.get("experiment's sampling")
            untraced = medians["untraced"]
            costs = paired_overhead(case["makespans_ms"])
            lines.append(run_cells(file[:16], gpu, name)
                         + f"{untraced:.3f} | "
                         f"{costs['activity records']:+.2%} | {costs['records and callbacks']:+.2%} | "
                         f"{'' if sampled is None else f'{sampled:.3f}'} |")
    return lines


def callback_cost(folder: Path) -> list[str]:
    lines = header(["file", "GPU", "commit", "copy", *COST_MODES])
    for path in sorted(folder.glob("*-callback-cost-*.txt")):
        text = path.read_text().splitlines()
        gpu_name, uuid, commit = re.match(r"(.+) (GPU-\S+) (\S+)$", text[0]).groups()
        copies: dict[str, dict[str, str]] = {}
        for line in text[1:]:
            found = re.match(r"(.+? H2D) +(.+?) +([\d.]+) µs per call", line)
            if found:
                copies.setdefault(found[1], {})[found[2]] = found[3]
        for copy, modes in copies.items():
            gpu = {"gpu_name": gpu_name, "gpu_uuid": uuid, "git_commit": commit}
            cells = " | ".join(modes.get(mode, "") for mode in COST_MODES)
            lines.append(f"{run_cells(path.name[:14], gpu, copy)}{cells} |")
    return lines


def pinned_buffers(folder: Path) -> list[str]:
    lines = header(["file", "GPU", "commit", "buffers", "rounds", "median ms", "range ms", "median vs payload A"])
    for file, document in documents(folder, "*-pinned-buffers.json"):
        for name, entry in document["summary"].items():
            lines.append(run_cells(file[:16], document["gpu"], name)
                         + f"{document['rounds']} | {entry['median_ms']:.4f} | {entry['min_ms']:.4f}–"
                         f"{entry['max_ms']:.4f} | {entry['median_vs_A']:+.2%} |")
    return lines


def copy_drift(folder: Path) -> list[str]:
    lines = header(["file", "GPU", "commit", "samples per bound", "blocks", "fastest ms", "median ms", "slowest ms",
                    "spread", "IQR"], left=3)
    for file, document in documents(folder, "*-copy-drift.json"):
        for size, entry in document["blocks"].items():
            lines.append(run_cells(file[:16], document["gpu"], size)
                         + f"{entry['blocks']} | {entry['min_ms']:.4f} | {entry['median_ms']:.4f} | "
                         f"{entry['max_ms']:.4f} | {entry['spread']:+.2%} | {entry['iqr']:.2%} |")
    return lines


def main() -> int:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "results") / "_trace"
    runs = documents(folder, "*-cases.json")
    print("## The overlap experiment's pipeline, traced: run by run\n")
    print("\n".join(paired(runs)))
    print("\n## Earlier runs, against the experiment measured before and after\n")
    print("\n".join(agreement(runs)))
    print("\n## Pipelines as users write them (newest run per GPU kind)\n")
    print("\n".join(pipelines(runs)))
    print("\n## Tracing overhead on GPU time\n")
    print("\n".join(overhead(folder)))
    print("\n## Pinned buffers\n")
    print("\n".join(pinned_buffers(folder)))
    print("\n## The copies' bound over consecutive blocks of samples\n")
    print("\n".join(copy_drift(folder)))
    print("\n## Host µs per call\n")
    print("\n".join(callback_cost(folder)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
