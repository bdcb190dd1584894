"""Regenerate the committed figures the documentation cites, from the committed results files they were drawn from,
by bench's own plotting code. Run on purpose only (a new headline run, a change to a figure's drawing), then commit
the figures with a message naming why:

    python scripts/doc_figures.py            # every figure set below
    python scripts/doc_figures.py plots/full # the sets written into the directories named

``python -m bench plot`` never writes here: its figures go to ``plots/local/``, which git ignores. The trace timelines
under ``plots/<gpu>/trace-*.png`` are drawn by ``bench trace --plot`` while it measures, and are not redrawn here.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from bench.analysis import selection, plots
from bench.results import store  # noqa: E402
from bench.experiments import registry  # noqa: E402
from bench.views import in_order  # noqa: E402

# (directory the docs cite, results file drawn into it, the experiments drawn: None for every one the file holds),
# in the order to draw them. Each figure's source is on the findings page that cites it.
FIGURES = (
    ("plots", "results/20261122T034221Z-NVIDIA-H200.parquet", None),  # the H200 headline run
    ("plots", "results/20261122T014724Z-NVIDIA-H200.parquet", ("peer", "hostlinks", "crossgpu")),  # two H200s
    ("plots/full", "results/_full/20261121T223046Z-NVIDIA-H200.parquet", None),  # the previous release's full grid
    ("plots/full", "results/_full/20261122T004005Z-NVIDIA-H200.parquet", ("firstcall",)),  # its compiling steps
    ("plots/nvidia-h100", "results/20261123T215205Z-471-NVIDIA-H100-80GB-HBM3.parquet", None),
    ("plots/nvidia-h100-9a2b51ca", "results/20261123T231801Z-2805-NVIDIA-H100-80GB-HBM3.parquet", ("library",)),
    ("plots/nvidia-h200-8cfb8e0d", "results/_fresh/20261123T231012Z-2802-NVIDIA-H200.parquet", ("library",)),
)


def draw(out: str, source: str, experiments: tuple[str, ...] | None) -> list[Path]:
    """The figures of ``experiments`` (all) in ``source``, written into ``out`` as ``bench plot`` writes them, as PNG
    alone: the docs cite PNGs (``bench plot`` adds SVG for the user)."""
    everything = registry()
    rows = selection.newest(store.read_any(ROOT / source, store.suite_schema(everything)), everything)
    chosen = [name for name in everything if experiments is None or name in experiments]
    return plots.plot_results(rows, ROOT / out, in_order(chosen), store.side_tables_any(ROOT / source), ("png",))


def main(directories: list[str]) -> int:
    known = {out for out, _, _ in FIGURES}
    unknown = [directory for directory in directories if directory.rstrip("/") not in known]
    if unknown:
        print(f"doc_figures: {', '.join(unknown)}: not a figure directory of the docs ({', '.join(sorted(known))})",
              file=sys.stderr)
        return 2
    for out, source, experiments in FIGURES:
        if not directories or out in {directory.rstrip("/") for directory in directories}:
            for path in draw(out, source, experiments):
                print(path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
