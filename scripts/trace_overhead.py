"""What tracing costs a region's GPU time: CUDA-event makespans of the same pipelines untraced, with CUPTI's activity
records only, and with the driver-call callbacks too (bench trace's default), interleaved round by round; each
traced mode's overhead is the median over rounds of its makespan over the same round's untraced one.

    python scripts/trace_overhead.py OUT.json [--rounds N]

Pipelines: the trace cases' PyTorch ones (pinned, pageable), bracketed by events (a start event before the first
upload, an end event per stream), and the overlap experiment's (256 MiB, compute ratio 1, 4 streams × 4 chunks),
pinned and pageable, each run timed as the experiment times it (pinned behind the gate); for those, the experiment's
own sampled median of the same pipeline, untraced, too.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trace_cases import out_and_rounds, overlap_config, overlap_pipeline, torch_case  # noqa: E402

MODES = ("untraced", "activity records", "records and callbacks")


def paired_overhead(makespans_ms: dict[str, list[float]]) -> dict[str, float]:
    """Each traced mode's cost: the median over rounds of its makespan over the same round's untraced one, less one
    (a GPU whose makespans drift over seconds moves the runs of one round alike)."""
    untraced = makespans_ms[MODES[0]]
    return {mode: statistics.median(run / plain - 1 for run, plain in zip(makespans_ms[mode], untraced))
            for mode in MODES[1:]}


def overlap_case(host_memory: str, stack):
    """The overlap experiment's pipeline, each run timed as the experiment times it, and the experiment's own
    sampled median of it (Timer.measure)."""
    runner, _, pipeline, run, spans = overlap_pipeline(overlap_config(host_memory), stack)

    class Spans:  # what the other cases' events give: the makespans so far
        def read(self) -> list[float]:
            return spans

    def sampled() -> float:
        return runner.timer.measure(lambda ops: [pipeline.enqueue(None) for _ in range(ops)], pipeline.streams,
                                    metric="makespan", gated=host_memory != "pageable", ops_per_batch=1).median_ms

    return run, Spans(), sampled


def main() -> int:
    arguments = out_and_rounds(__doc__.splitlines()[0], 25)
    from contextlib import ExitStack

    from bench.platform.cuda import runtime
    from bench.platform.env import gpu_environment
    from bench.usercode.activity import open_recorder

    environment = gpu_environment(0)
    report = {"gpu": environment.as_dict(), "rounds": arguments.rounds, "cases": {}}
    with ExitStack() as stack:
        cases = {"torch pinned": (*torch_case(True)[:2], None), "torch pageable": (*torch_case(False)[:2], None),
                 "overlap pinned": overlap_case("pinned", stack),
                 "overlap pageable": overlap_case("pageable", stack)}
        for name, (step, events, sampled) in cases.items():
            recorders = {MODES[1]: open_recorder(calls=False)}
            spans: dict[str, list[float]] = {mode: [] for mode in MODES}
            try:
                step()  # warm-up
                runtime.deviceSynchronize()
                events.read()
                for _ in range(arguments.rounds):
                    for mode in MODES:
                        recorder = open_recorder(calls=True) if mode == MODES[2] else recorders.get(mode)
                        try:
                            if recorder:
                                recorder.start()
                            step()
                            runtime.deviceSynchronize()
                            if recorder:
                                recorder.stop()
                        finally:
                            if mode == MODES[2]:
                                recorder.close()
                        spans[mode].append(events.read()[-1])
            finally:
                recorders[MODES[1]].close()
            medians = {mode: statistics.median(values) for mode, values in spans.items()}
            if sampled is not None:  # the experiment's own sampling of the same pipeline, untraced
                medians["experiment's sampling"] = sampled()
            report["cases"][name] = {"makespans_ms": spans, "median_ms": medians, "overhead": paired_overhead(spans)}
            print(f"{name:<18} " + "  ".join(f"{mode} {ms:.3f} ms" for mode, ms in medians.items())
                  + "  |  " + "  ".join(f"{mode} {report['cases'][name]['overhead'][mode]:+.2%}"
                                        for mode in MODES[1:]), flush=True)
    arguments.out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
