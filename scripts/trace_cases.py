"""bench trace on pipelines as users write them, and on bench's own overlap pipeline against the overlap experiment.

    python scripts/trace_cases.py RESULTS_DIR PLOTS_DIR

Cases: a PyTorch and a CuPy stream pipeline (8 chunks of 64 MiB over 4 streams: upload, three matrix products,
download), each with pinned and with pageable host memory; CuPy's as written (``y.get(stream=s, out=...)``, which
blocks by default) and, pinned, with ``blocking=False``. Each pipeline records CUDA events on its streams (a start
event before the first upload, an end event per stream), so every run, traced or not, has an event makespan: the
independent check of CUPTI's makespan (same runs) and the tracing overhead on GPU time (traced runs' event makespan
against the untraced runs'). Each output is checked once against the same work done on the GPU directly.

Then the overlap experiment's pipeline (256 MiB, compute ratio 1, 4 streams × 4 chunks, malloc, eager), pinned and
pageable: the experiment's own measuring code gives its makespan and efficiency, and bench.trace traces the same
pipeline object enqueued as the experiment times it (pinned behind the gate, whose kernel is left out of the trace;
pageable without), each run also timed by the experiment's events, in 31 runs (pageable: 101, whose makespans
spread by tens of percent run to run). The trace is compared with the experiment three ways:

- run by run: each traced run's CUPTI makespan over the untraced run just before it, timed by the experiment's timer,
  and each pair's efficiencies (:func:`paired_agreement`). A lent GPU's makespans can drift or switch between two
  speeds over seconds (pageable pipelines on every machine, pinned ones on some H100s), which moves both runs of a
  pair alike;
- with the experiment's timer on all the untraced runs: the medians, with a bootstrap 95% interval of their ratio,
  and each decile. Where runs fall into two speeds, the median is unstable while each decile is not;
- with the mean of the experiment's own measuring code run once before and once after the trace (their difference is
  the experiment's repeatability).

The bounds are compared too. The trace measures its pinned copies itself, the experiment its stages, before the
trace and again after it (the mean of the two is the experiment's bound). Then both are measured alternately,
BOUND_ROUNDS times each (:func:`side_by_side_bounds`; each case's ``side_by_side_bounds_ms`` holds them, three in the
earlier files), and the run-by-run efficiencies take the median of each side's.

The overlap cases run once with the driver-call callbacks (the default) and once without (``--no-lines``). Writes
the cases' rows (table ``trace``) and a JSON of the comparisons into RESULTS_DIR, the timelines into
PLOTS_DIR/<gpu>/; prints a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

CHUNKS, STREAMS, ROWS, WIDTH = 8, 4, 16384, 1024  # a chunk: 16384 × 1024 float32 = 64 MiB
OVERLAP_RUNS = {"pinned": 31, "pageable": 101}  # traced runs of the overlap pipeline (and as many untraced)
BOUND_ROUNDS = 5  # the trace's and the experiment's bounds, measured alternately after the trace


class EventMakespans:
    """A start event on the first stream, an end event per stream; the makespan of every call, in call order."""

    def __init__(self, make_event, elapsed_ms) -> None:
        self.make_event, self.elapsed_ms = make_event, elapsed_ms
        self.pending: list = []
        self.ms: list[float] = []

    def bracket(self, streams, enqueue) -> None:
        start = self.make_event()
        start.record(streams[0])
        for stream in streams[1:]:
            stream.wait_event(start)
        enqueue()
        ends = []
        for stream in streams:
            end = self.make_event()
            end.record(stream)
            ends.append(end)
        self.pending.append((start, ends))

    def read(self) -> list[float]:
        for start, ends in self.pending:
            for end in ends:
                end.synchronize()
            self.ms.append(max(self.elapsed_ms(start, end) for end in ends))
        self.pending = []
        return self.ms


def torch_case(pinned: bool):
    import torch

    torch.manual_seed(0)
    streams = [torch.cuda.Stream() for _ in range(STREAMS)]
    host_in = torch.rand(CHUNKS, ROWS, WIDTH, pin_memory=pinned)
    host_out = torch.empty(CHUNKS, ROWS, WIDTH, pin_memory=pinned)
    weight = torch.rand(WIDTH, WIDTH, device="cuda") / WIDTH
    events = EventMakespans(lambda: torch.cuda.Event(enable_timing=True), lambda a, b: a.elapsed_time(b))

    def pipeline() -> None:
        for chunk in range(CHUNKS):
            with torch.cuda.stream(streams[chunk % STREAMS]):
                x = host_in[chunk].to("cuda", non_blocking=True)
                y = torch.relu(x @ weight @ weight @ weight)
                host_out[chunk].copy_(y, non_blocking=True)

    def step() -> None:
        events.bracket(streams, pipeline)

    def check() -> str:
        step()
        torch.cuda.synchronize()
        expected = torch.relu(host_in[CHUNKS - 1].cuda() @ weight @ weight @ weight).cpu()
        same = torch.allclose(host_out[CHUNKS - 1], expected, rtol=1e-4, atol=1e-5)
        return "" if same else "the last chunk's output differs from the same work done directly"

    return step, events, check


def cupy_case(pinned: bool, blocking: bool = True):
    import cupy
    import cupyx

    rng = np.random.default_rng(0)
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(STREAMS)]
    shape = (CHUNKS, ROWS, WIDTH)
    host_in = cupyx.empty_pinned(shape, np.float32) if pinned else np.empty(shape, np.float32)
    host_in[...] = rng.random(shape, dtype=np.float32)
    host_out = cupyx.empty_pinned(shape, np.float32) if pinned else np.empty(shape, np.float32)
    host_out.fill(np.nan)
    weight = cupy.asarray(rng.random((WIDTH, WIDTH), dtype=np.float32) / WIDTH)
    inputs = [cupy.empty((ROWS, WIDTH), np.float32) for _ in range(STREAMS)]
    events = EventMakespans(lambda: cupy.cuda.Event(), lambda a, b: cupy.cuda.get_elapsed_time(a, b))

    def pipeline() -> None:
        for chunk in range(CHUNKS):
            stream = streams[chunk % STREAMS]
            with stream:
                x = inputs[chunk % STREAMS]
                x.set(host_in[chunk], stream=stream)
                y = cupy.maximum(x @ weight @ weight @ weight, 0)
                y.get(stream=stream, out=host_out[chunk], blocking=blocking)

    def step() -> None:
        events.bracket(streams, pipeline)

    def check() -> str:
        step()
        cupy.cuda.Device().synchronize()
        x = cupy.asarray(host_in[CHUNKS - 1])
        expected = cupy.asnumpy(cupy.maximum(x @ weight @ weight @ weight, 0))
        same = np.allclose(host_out[CHUNKS - 1], expected, rtol=1e-4, atol=1e-5)
        return "" if same else "the last chunk's output differs from the same work done directly"

    return step, events, check


def event_checks(found, spans: list[float]) -> dict:
    """The events' side of a trace: ``spans`` are the event makespans of the warm-up, then of untraced and traced runs
    alternately. CUPTI's makespan of the described run (median makespan) against its events', and the traced runs'
    median event makespan against the untraced runs' (the overhead on GPU time)."""
    untraced, traced = spans[1::2], spans[2::2]
    makespans = found.runs.makespans_ms
    chosen = sorted(range(len(makespans)), key=lambda i: makespans[i])[(len(traced) - 1) // 2]
    return {"events_traced_ms": traced, "events_untraced_ms": untraced,
            "cupti_vs_events": found.runs.makespans_ms[chosen] / traced[chosen] - 1,
            "gpu_overhead": statistics.median(traced) / statistics.median(untraced) - 1}


def user_case(name: str, make, pinned: bool, results) -> dict:
    from bench.trace import DEFAULT_RUNS, trace

    step, events, check = make(pinned)
    problem = check()
    if problem:
        raise SystemExit(f"{name}: {problem}")
    events.read()
    events.ms.clear()
    found = trace(step, results=results, target=name)
    spans = events.read()  # the warm-up, then untraced and traced runs alternately
    assert len(spans[2::2]) == DEFAULT_RUNS, len(spans)
    return {"case": name, "result": found, **event_checks(found, spans)}


def out_and_rounds(description: str, rounds: int) -> argparse.Namespace:
    """The arguments of a script that writes one JSON file (``out``) from ``--rounds`` rounds, at least 1."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("out", type=Path)
    parser.add_argument("--rounds", type=int, default=rounds)
    arguments = parser.parse_args()
    if arguments.rounds < 1:
        parser.error("--rounds must be at least 1")
    return arguments


def overlap_config(host_memory: str) -> dict:
    """The overlap experiment's configuration the cases trace."""
    return {"total_bytes": 256 << 20, "compute_ratio": 1.0, "host_memory": host_memory, "allocator": "malloc",
            "launch": "eager", "chunks_per_stream": 4, "streams": 4}


def overlap_runner():
    """A runner of the overlap experiment's pipelines under the experiment's own stop rules."""
    from bench.experiments import overlap
    from bench.measure.pipeline import Runner
    from bench.timing import Context, StopRule

    rules = overlap.EXPERIMENT.accuracy.stop_rules
    return Runner(Context({purpose: StopRule(**rule) for purpose, rule in rules.items()}))


def overlap_pipeline(config: dict, stack):
    """The overlap experiment's runner (its stop rules), payload and calibrated pipeline for ``config``, released by
    ``stack``, and the function that runs the pipeline once timed as the experiment times it (pinned behind the
    gate, pageable from a start event before the first enqueue), each makespan appended to the list it also
    returns."""
    from bench.measure.pipeline import Payload, Pipeline

    runner = overlap_runner()
    runner.launch_us = {"precompiled": float("nan"), "graph": float("nan")}  # a column of the row, not used here
    stack.callback(runner.timeline.close)
    host_memory = config["host_memory"]
    payload = stack.enter_context(Payload(config["total_bytes"], sorted({"pinned", host_memory}), config["streams"]))
    rounds = runner.calibrate(payload, config["compute_ratio"])[0]
    pipeline = Pipeline(runner.kernel, payload, payload.streams[:config["streams"]], host_memory, config["allocator"],
                        config["streams"] * config["chunks_per_stream"], rounds)
    spans: list[float] = []

    def run() -> None:
        spans.append(max(runner.timer.run_once(lambda ops: pipeline.enqueue(None), pipeline.streams,
                                               gated=host_memory != "pageable")))

    return runner, payload, pipeline, run, spans


def interval_95(draws) -> tuple[float, float]:
    """The middle 95% of bootstrap draws."""
    return float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))


def median_ratio_interval(values, others, draws: int = 4000) -> tuple[float, float]:
    """A bootstrap 95% interval of median(values) / median(others) - 1."""
    rng = np.random.default_rng(0)
    return interval_95(np.median(rng.choice(np.asarray(values), (draws, len(values))), axis=1)
                       / np.median(rng.choice(np.asarray(others), (draws, len(others))), axis=1) - 1)


def paired_agreement(case: dict, draws: int = 4000) -> dict:
    """The trace against the experiment's timer run by run: each traced run's CUPTI makespan over the untraced run
    just before it (timed by the experiment's timer), and each pair's efficiencies (the trace's bound over the one,
    the experiment's bound over the other), as medians over the pairs with bootstrap 95% intervals. A GPU whose
    makespans drift or switch between speeds over seconds moves both runs of a pair alike. Where the case has bounds
    measured side by side, the efficiencies take the median of each side's."""
    traced, untraced = np.asarray(case["cupti_makespans_ms"]), np.asarray(case["events_untraced_ms"])
    ratios = traced / untraced - 1
    trace_bound, experiment_bound = case["summary"]["bound_ms"], case["experiment_bound_ms"]
    if "side_by_side_bounds_ms" in case:  # measured alternately: both from the same stretch of time
        trace_bound, experiment_bound = (statistics.median(bounds) for bounds in case["side_by_side_bounds_ms"])
    points = 100 * (trace_bound / traced - experiment_bound / untraced)
    picks = np.random.default_rng(0).integers(0, len(ratios), (draws, len(ratios)))

    return {"makespan": float(np.median(ratios)), "makespan_95": interval_95(np.median(ratios[picks], axis=1)),
            "efficiency_pp": float(np.median(points)),
            "efficiency_pp_95": interval_95(np.median(points[picks], axis=1))}


def side_by_side_bounds(runner, config: dict, payload, found) -> tuple[list[float], list[float]]:
    """The trace's bound for the work of its described run and the experiment's bound, measured alternately
    BOUND_ROUNDS times (the trace's copies at pinned speed, :func:`bench.usercode.pinned.copy_engines`; the
    experiment's stages): a GPU's copy rate drifts by several percent over seconds, so only bounds measured side by
    side compare the two ways of measuring it."""
    from bench.usercode.activity import Op
    from bench.usercode.pinned import copy_engines

    h2d = sum(activity.bytes for activity in found.records.activities if activity.op == Op.H2D)
    d2h = sum(activity.bytes for activity in found.records.activities if activity.op == Op.D2H)
    trace_bounds, experiment_bounds = [], []
    for _ in range(BOUND_ROUNDS):
        runner.remeasure_stages()
        experiment_bounds.append(runner.stages(payload, config["compute_ratio"], config["host_memory"]).bound_ms)
        trace_bounds.append(max({**found.bound.terms, "copies": copy_engines(h2d, d2h).bound_ms()}.values()))
    return trace_bounds, experiment_bounds


def side_by_side(case: dict) -> float:
    """The median over the rounds of the trace's bound over the experiment's measured beside it, less one."""
    return statistics.median(mine / theirs - 1 for mine, theirs in zip(*case["side_by_side_bounds_ms"]))


def decile_ratios(values, others) -> list[float]:
    """Each decile (10% to 90%) of ``values`` over the same decile of ``others``, less one."""
    deciles = np.linspace(0.1, 0.9, 9)
    return [float(ratio) for ratio in np.quantile(values, deciles) / np.quantile(others, deciles) - 1]


def overlap_case(host_memory: str, results, lines: bool = True) -> dict:
    """The overlap experiment's pipeline: its own measuring code, then bench.trace on the same objects (``lines``
    False: CUPTI's records without the driver-call callbacks, ``--no-lines``)."""
    from contextlib import ExitStack

    from bench.experiments import overlap
    from bench.trace import trace

    config = overlap_config(host_memory)
    with ExitStack() as stack:
        runner, payload, pipeline, run, spans = overlap_pipeline(config, stack)
        row = overlap._measure(runner, config, payload, runner.prepare_expected(payload, pipeline.rounds))
        if row["status"] != "ok":
            raise SystemExit(f"overlap {host_memory}: {row['status']}: {row['error']}")
        name = f"overlap {host_memory}" + ("" if lines else " --no-lines")
        found = trace(run, results=results, target=name, runs=OVERLAP_RUNS[host_memory], lines=lines,
                      leave_out=lambda activity: "bench_gate" in activity.name)
        bounds = side_by_side_bounds(runner, config, payload, found)
        runner.remeasure_stages()  # its bound too: a GPU's copy rate can drift by several percent over seconds
        again = overlap._measure(runner, config, payload, None)  # the experiment's repeatability
    checks = event_checks(found, spans)
    untraced = checks["events_untraced_ms"]
    interleaved = statistics.median(untraced)  # the experiment's timer, on the runs taken between the traced ones
    makespan = (row["makespan_ms"] + again["makespan_ms"]) / 2
    efficiency = (row["efficiency"] + again["efficiency"]) / 2
    bound = (row["bound_ms"] + again["bound_ms"]) / 2
    return {"case": name, "result": found, **checks,
            "untraced_vs_experiment": statistics.median(untraced) / makespan - 1,
            "experiment_makespans_ms": [row["makespan_ms"], again["makespan_ms"]],
            "experiment_repeat": again["makespan_ms"] / row["makespan_ms"] - 1, "experiment_makespan_ms": makespan,
            "experiment_efficiency": efficiency, "experiment_bound_ms": bound,
            "experiment_bounds_ms": [row["bound_ms"], again["bound_ms"]],
            "makespan_vs_experiment": found.makespan_ms / makespan - 1,
            "efficiency_pp": 100 * (found.efficiency - efficiency), "interleaved_ms": interleaved,
            "makespan_vs_interleaved": found.makespan_ms / interleaved - 1,
            "makespan_vs_interleaved_95": median_ratio_interval(found.runs.makespans_ms, untraced),
            "cupti_makespans_ms": list(found.runs.makespans_ms),
            "deciles_vs_interleaved": decile_ratios(found.runs.makespans_ms, untraced),
            "bound_vs_experiment": found.bound_ms / bound - 1, "side_by_side_bounds_ms": bounds,
            "interleaved_efficiency": bound / interleaved,
            "efficiency_pp_interleaved": 100 * (found.efficiency - bound / interleaved)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="where the results file and the JSON go (results/_trace)")
    parser.add_argument("plots", type=Path, help="where the timelines go, a folder per GPU (plots)")
    arguments = parser.parse_args()
    import pandas as pd

    from bench.analysis import plots
    from bench.results import store
    from bench.platform.env import gpu_environment
    from bench.experiments import registry
    from bench.trace import save
    from bench.usercode.trace.timeline import timeline

    environment = gpu_environment(0)
    slug = plots.gpu_slug(pd.DataFrame([environment.as_dict()]))
    results_dir = Path("results")
    results = store.read_any(results_dir, store.suite_schema(registry()), print)  # bandwidth rows of this GPU
    cases = []
    variants = [("torch pinned", torch_case, True), ("torch pageable", torch_case, False),
                ("cupy pinned", cupy_case, True), ("cupy pageable", cupy_case, False),
                ("cupy pinned get(blocking=False)", lambda pinned: cupy_case(pinned, blocking=False), True)]
    for name, make, pinned in variants:
        print(f"-- {name}", flush=True)
        cases.append(user_case(name, make, pinned, results))
    for host_memory in ("pinned", "pageable"):
        for lines in (True, False):
            print(f"-- overlap {host_memory}{'' if lines else ' --no-lines'}", flush=True)
            cases.append(overlap_case(host_memory, results, lines))
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    arguments.out.mkdir(parents=True, exist_ok=True)
    save([(case["case"], case["result"]) for case in cases], environment, arguments.out / f"{stamp}-{slug}.parquet")
    document = []
    for case in cases:
        result = case.pop("result")
        rows = pd.DataFrame(result.table())
        title = (f"{case['case']} on {environment.device.gpu_name}: makespan {result.makespan_ms:.2f} ms, "
                 f"bound {result.bound_ms:.2f} ms ({result.efficiency:.0%}), copies hidden "
                 f"{(result.hidden or 0):.0%}")
        plots.save(timeline(rows, title),
                   arguments.plots / slug / f"trace-{''.join(c if c.isalnum() else '-' for c in case['case']).strip('-')}")
        document.append({**case, "summary": result.summary(), "text": str(result)})
        print(f"\n== {case['case']}\n{result}", flush=True)
    (arguments.out / f"{stamp}-{slug}-cases.json").write_text(json.dumps(
        {"gpu": environment.as_dict(), "cases": document}, indent=2, default=float))
    print("\ncase                             makespan  bound  eff  hidden  CUPTI-vs-events  GPU-overhead  vs-experiment")
    for entry in document:
        summary = entry["summary"]
        check = (f"{entry['cupti_vs_events']:+.2%}" if "cupti_vs_events" in entry else "")
        overhead = (f"{entry['gpu_overhead']:+.2%}" if "gpu_overhead" in entry else "")
        paired = paired_agreement(entry) if "cupti_makespans_ms" in entry else None
        versus = (f"paired: makespan {paired['makespan']:+.2%} ({paired['makespan_95'][0]:+.2%}.."
                  f"{paired['makespan_95'][1]:+.2%}), eff {paired['efficiency_pp']:+.2f} pp "
                  f"({paired['efficiency_pp_95'][0]:+.2f}..{paired['efficiency_pp_95'][1]:+.2f}); " if paired else "")
        versus += (f"interleaved: makespan {entry['makespan_vs_interleaved']:+.2%} "
                  f"({entry['makespan_vs_interleaved_95'][0]:+.2%}..{entry['makespan_vs_interleaved_95'][1]:+.2%}), "
                  f"deciles {min(entry['deciles_vs_interleaved']):+.2%}..{max(entry['deciles_vs_interleaved']):+.2%}, "
                  f"bounds side by side {side_by_side(entry):+.2%}, "
                  f"bound {entry['bound_vs_experiment']:+.2%} (experiment's two "
                  f"{entry['experiment_bounds_ms'][1] / entry['experiment_bounds_ms'][0] - 1:+.2%} apart), eff "
                  f"{entry['efficiency_pp_interleaved']:+.2f} pp; measured before/after: makespan "
                  f"{entry['makespan_vs_experiment']:+.2%}, eff {entry['efficiency_pp']:+.2f} pp "
                  f"(experiment again {entry['experiment_repeat']:+.2%})" if "makespan_vs_experiment" in entry else "")
        print(f"{entry['case']:<32} {summary['makespan_ms']:8.3f} {summary['bound_ms']:6.2f} "
              f"{summary['efficiency']:4.0%} {summary['hidden'] or 0:6.0%}  {check:>15}  {overhead:>12}  {versus}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
