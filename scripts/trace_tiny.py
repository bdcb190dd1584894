"""What tracing costs a region of many tiny kernels, and where it goes: the region's host time (from an idle GPU to
the GPU idle again, as ``bench trace`` times its runs) and its GPU time (CUDA events around it), untraced and traced,
paired round by round, each case and variant in a process of its own.

    python scripts/trace_tiny.py OUT.json [--cases LIBRARY:KERNELS,...] [--rounds N] [--variants bench,records,cupti]

Writes OUT.json (each case's samples and medians, the GPU's environment) and OUT.parquet beside it (through bench's
store, table ``trace-tiny``: a row per case and round, paired, with the environment), both after every case, so a
run cut short keeps what it found. ``--from-json`` measures nothing: it writes the parquet of an earlier run from its
JSON.

Regions: ``torch`` (``x.add_(1)`` on a 1-element tensor, KERNELS times: launch-bound, as a user's small ops are) and
``cupy`` (``x += 1`` on a 1-element array). Variants: ``bench`` (bench trace's default: records and the driver-call
callbacks), ``records`` (records only, ``--no-lines``) and ``cupti``: CUPTI alone, the floor bench is held to, a
bare activity session of cupti-python's own API recording the same kinds (kernels, copies, memsets) into buffers large
enough that none completes while a region runs, taken before the region starts (as bench's recorder takes its
own), and none of bench's code. Each child also counts the buffers CUPTI handed back while
a region ran. Rounds: ``--rounds`` for regions of up to 4,000 kernels, a third of them (at least 11) above. Run it
with an older ``src`` on ``PYTHONPATH`` to measure before a change on the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

CASES = "torch:4000,cupy:4000,torch:40000,cupy:40000"
VARIANTS = ("bench", "records", "cupti")
BARE_BUFFER_BYTES = 64 << 20  # the bare session's buffers: a region of 40,000 kernels fills under a fifth of one


class BareCupti:
    """CUPTI's activity API alone, through cupti-python: the same record kinds as bench's recorder, enabled for a
    region and flushed after it; what bench's recorder is compared with."""

    def __init__(self) -> None:
        from cupti import cupti

        self.cupti = cupti
        self.kinds = (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMCPY, cupti.ActivityKind.MEMSET)
        self.kernels = 0
        self.scratch = None

        def completed(activities) -> None:  # counted as completions by child()'s wrapper of the registration
            self.kernels += sum(int(a.kind) == int(self.kinds[0]) for a in activities)

        cupti.activity_register_callbacks(lambda: (BARE_BUFFER_BYTES, 0), completed)

    def start(self) -> None:
        """Enable the kinds, and have CUPTI take its buffer now (a 4-byte memset's record), not in the region."""
        from cupy.cuda import runtime

        for kind in self.kinds:
            self.cupti.activity_enable(kind)
        if self.scratch is None:
            self.scratch = runtime.malloc(4)
        runtime.memset(self.scratch, 0, 4)
        runtime.deviceSynchronize()

    def synchronize(self) -> None:
        from bench.usercode import activity

        activity.synchronize_used()

    def stop(self) -> int:
        """The kernel records of the region."""
        self.cupti.activity_flush_all(1)
        for kind in self.kinds:
            self.cupti.activity_disable(kind)
        found, self.kernels = self.kernels, 0
        return found

    def close(self) -> None:
        pass


def region(library: str, kernels: int):
    """``kernels`` tiny kernels on the current stream, and the event pair that brackets them."""
    if library == "torch":
        import torch

        x = torch.zeros(1, device="cuda")
        make = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731

        def run() -> None:
            for _ in range(kernels):
                x.add_(1)

        return run, make, lambda a, b: a.elapsed_time(b)
    import cupy

    y = cupy.zeros(1, dtype=cupy.float32)
    make = lambda: cupy.cuda.Event()  # noqa: E731

    def run_cupy() -> None:
        for _ in range(kernels):
            y.__iadd__(1)

    return run_cupy, make, lambda a, b: cupy.cuda.get_elapsed_time(a, b)


def child(library: str, variant: str, kernels: int, rounds: int) -> dict:
    """One process: warm-up, then ``rounds`` rounds of an untraced and a traced run (order alternating)."""
    from cupti import cupti

    from bench.usercode import activity

    completions = {"during": 0, "all": 0}
    in_region = [False]
    register = cupti.activity_register_callbacks

    def counting(requested, completed):
        def counted(records):
            completions["all"] += 1
            completions["during"] += in_region[0]
            return completed(records)

        return register(requested, counted)

    cupti.activity_register_callbacks = counting  # cupti-python's buffers (bench before 2026-11-27)
    buffers = getattr(activity, "activity_buffers", None)  # bench's own pool (since): count what it is handed
    if buffers is not None:
        completed = buffers.Pool.completed

        def counted_pool(self, *args):
            completions["all"] += 1
            completions["during"] += in_region[0]
            return completed(self, *args)

        buffers.Pool.completed = counted_pool
    run, make, elapsed = region(library, kernels)
    recorder = BareCupti() if variant == "cupti" else activity.open_recorder(
        calls=variant != "records")
    host = {"untraced": [], "traced": []}
    gpu = {"untraced": [], "traced": []}
    records: list[int] = []

    def once(traced: bool) -> None:
        activity.synchronize_used()
        if traced:
            recorder.start()
        start, end = make(), make()
        in_region[0] = True
        began = time.perf_counter()
        start.record()
        run()
        end.record()
        recorder.synchronize() if traced else activity.synchronize_used()
        host_ms = (time.perf_counter() - began) * 1e3
        in_region[0] = False
        if traced:
            stopped = recorder.stop()
            records.append(stopped if variant == "cupti" else sum(str(a.op) == "kernel" for a in stopped.activities))
        mode = "traced" if traced else "untraced"
        host[mode].append(host_ms)
        gpu[mode].append(elapsed(start, end))

    try:
        for _ in range(3):
            once(False)
            once(True)
        for mode in host:
            host[mode].clear()
            gpu[mode].clear()
        records.clear()
        for number in range(rounds):
            for traced in ((False, True) if number % 2 == 0 else (True, False)):
                once(traced)
    finally:
        recorder.close()

    def paired(values: dict[str, list[float]]) -> float:
        return statistics.median(t / u - 1 for t, u in zip(values["traced"], values["untraced"]))

    return {"library": library, "variant": variant, "kernels": kernels, "rounds": rounds, "host_ms": host,
            "gpu_ms": gpu, "kernel_records": records, "completions": completions,
            "host_overhead": paired(host), "gpu_overhead": paired(gpu),
            "host_median_ms": {mode: statistics.median(v) for mode, v in host.items()},
            "gpu_median_ms": {mode: statistics.median(v) for mode, v in gpu.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--cases", default=CASES)
    parser.add_argument("--rounds", type=int, default=61)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--case-timeout", type=float, default=300, help="seconds a case may take (default 300)")
    parser.add_argument("--child", nargs=3, metavar=("LIBRARY", "VARIANT", "KERNELS"), help=argparse.SUPPRESS)
    parser.add_argument("--from-json", action="store_true",
                        help="measure nothing: write the parquet of the earlier run whose JSON is OUT.json")
    args = parser.parse_args()
    if args.from_json:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
        write(args.out, json.loads(args.out.read_text()))
        print(f"wrote {args.out.with_suffix('.parquet')}")
        return 0
    if args.child:
        library, variant, kernels = args.child
        args.out.write_text(json.dumps(child(library, variant, int(kernels), args.rounds)))
        return 0
    if args.out.exists() or args.out.with_suffix(".parquet").exists():
        raise SystemExit(f"{args.out} or its parquet exists: a run writes new files")
    import bench
    from bench.platform.env import gpu_environment

    found = {"gpu": gpu_environment(0).as_dict(), "bench": str(Path(bench.__file__).parent), "cases": []}
    for case in args.cases.split(","):
        library, kernels = case.split(":")
        rounds = args.rounds if int(kernels) <= 4000 else max(11, args.rounds // 3)
        for variant in args.variants.split(","):
            part = args.out.with_suffix(f".{library}.{kernels}.{variant}.part")
            try:
                done = subprocess.run([sys.executable, __file__, str(part), "--rounds", str(rounds), "--child",
                                       library, variant, kernels], env=os.environ, timeout=args.case_timeout)
            except subprocess.TimeoutExpired:
                print(f"{library:<6} {kernels:>6} {variant:<8} took over {args.case_timeout:g} s", flush=True)
                found["cases"].append({"library": library, "kernels": int(kernels), "variant": variant,
                                       "timed_out_s": args.case_timeout})
                continue
            if done.returncode or not part.exists():
                print(f"{library:<6} {kernels:>6} {variant:<8} failed ({done.returncode})", flush=True)
                continue
            case = json.loads(part.read_text())
            part.unlink()
            found["cases"].append(case)
            write(args.out, found)  # after every case: a run cut short keeps what it found
            print(f"{library:<6} {kernels:>6} {variant:<8} host {case['host_median_ms']['untraced']:.2f} → "
                  f"{case['host_median_ms']['traced']:.2f} ms ({case['host_overhead']:+.1%}), GPU "
                  f"{case['gpu_median_ms']['untraced']:.2f} → {case['gpu_median_ms']['traced']:.2f} ms "
                  f"({case['gpu_overhead']:+.1%}), {per_kernel_us(case):.2f} µs per kernel, "
                  f"{statistics.median(case['kernel_records'])} kernel records, "
                  f"buffers completed during regions {case['completions']['during']}", flush=True)
    write(args.out, found)
    return 0


TABLE = "trace-tiny"  # the bench metadata's table name of the parquet


def columns() -> tuple:
    """The typed columns of the parquet: one row per case and round, then the GPU's environment."""
    from bench.results.schema import FLOAT, INT, TEXT, column, environment_columns

    return (column("library", TEXT, "the region's library: torch or cupy"),
            column("kernels", INT, "tiny kernels in the region"),
            column("variant", TEXT, "bench (records and callbacks), records (records only) or cupti (CUPTI alone)"),
            column("round", INT, "the round: an untraced and a traced run, their order alternating"),
            column("untraced_host_ms", FLOAT, "the untraced run's host time"),
            column("traced_host_ms", FLOAT, "the traced run's host time"),
            column("untraced_gpu_ms", FLOAT, "the untraced run's GPU time (CUDA events)"),
            column("traced_gpu_ms", FLOAT, "the traced run's GPU time"),
            *environment_columns())


def rounds_table(found: dict) -> list[dict]:
    """One row per case and round: the untraced and the traced run's host and GPU times, with the environment."""
    environment = found["gpu"]
    return [{"library": case["library"], "kernels": case["kernels"], "variant": case["variant"], "round": number,
             "untraced_host_ms": untraced, "traced_host_ms": traced, "untraced_gpu_ms": gpu_untraced,
             "traced_gpu_ms": gpu_traced, **environment}
            for case in found["cases"] if "host_ms" in case
            for number, (untraced, traced, gpu_untraced, gpu_traced) in enumerate(zip(
                case["host_ms"]["untraced"], case["host_ms"]["traced"], case["gpu_ms"]["untraced"],
                case["gpu_ms"]["traced"]))]


def write(out: Path, found: dict) -> None:
    """The JSON, and the parquet beside it through bench's store (typed; this run's own, so replaced as it grows)."""
    from bench.results import store

    out.write_text(json.dumps(found, indent=2))
    store.write_declared(out.with_suffix(".parquet"), rounds_table(found), columns(), TABLE)


def per_kernel_us(case: dict) -> float:
    """The median over rounds of (traced - untraced host time) per kernel, µs: paired, as the overhead is."""
    host = case["host_ms"]
    return statistics.median((traced - untraced) * 1e3 / case["kernels"]
                             for untraced, traced in zip(host["untraced"], host["traced"]))


if __name__ == "__main__":
    sys.exit(main())
