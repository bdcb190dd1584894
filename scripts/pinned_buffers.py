"""Do two sets of pinned buffers copy at the same rate? The copies' bound of 256 MiB each way, both directions at once
(the fastest sample of each direction, the larger of the two), timed alternately, round after round:

- the overlap experiment's stage measurement on two payloads of its own, A and B, each allocated once;
- bench trace's reference (``pinned.copy_engines``), which allocates fresh buffers every time.

Both use the same timer, stop rule and batch size (one copy per sample). If A and B keep apart from each other over
the rounds, or the fresh buffers spread wider than either payload, the rate depends on the buffers, not the method:
what the trace's and the experiment's bounds can disagree by when measured side by side.

    python scripts/pinned_buffers.py OUT.json [--rounds N]
"""

from __future__ import annotations

import json
import statistics
import sys
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trace_cases import out_and_rounds, overlap_runner  # noqa: E402

TOTAL_BYTES = 256 << 20


def main() -> int:
    arguments = out_and_rounds(__doc__.splitlines()[0], 5)
    from bench.platform.env import gpu_environment
    from bench.measure.pipeline import Payload
    from bench.usercode.pinned import copy_engines

    environment = gpu_environment(0)
    bounds: dict[str, list[float]] = {"payload A": [], "payload B": [], "fresh (trace)": []}
    with ExitStack() as stack:
        payloads = {}
        for name in ("payload A", "payload B"):
            runner = overlap_runner()
            stack.callback(runner.timeline.close)
            payloads[name] = (runner, stack.enter_context(Payload(TOTAL_BYTES, ["pinned"], 2)))
        for _ in range(arguments.rounds):
            for name, (runner, payload) in payloads.items():
                runner.remeasure_stages()
                stages = runner.stages(payload, 1.0, "pinned")
                bounds[name].append(max(stages.h2d_duplex_ms, stages.d2h_duplex_ms))
            bounds["fresh (trace)"].append(copy_engines(TOTAL_BYTES, TOTAL_BYTES).bound_ms())
            print("  ".join(f"{name} {values[-1]:.4f}" for name, values in bounds.items()), flush=True)
    reference = statistics.median(bounds["payload A"])
    summary = {name: {"median_ms": statistics.median(values), "min_ms": min(values), "max_ms": max(values),
                      "median_vs_A": statistics.median(values) / reference - 1} for name, values in bounds.items()}
    for name, entry in summary.items():
        print(f"{name:<14} median {entry['median_ms']:.4f} ms ({entry['min_ms']:.4f}–{entry['max_ms']:.4f}), "
              f"{entry['median_vs_A']:+.2%} against payload A")
    arguments.out.write_text(json.dumps({"gpu": environment.as_dict(), "rounds": arguments.rounds,
                                         "bounds_ms": bounds, "summary": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
