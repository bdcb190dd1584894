"""bench trace of a data-parallel training step on several GPUs of one host, checked against an independent method.

    NCCL_NVLS_ENABLE=0 torchrun --standalone --nproc-per-node 2 scripts/ddp_trace.py OUT_DIR [--runs N]

Each rank (one process per GPU) builds the same small MLP under PyTorch DDP and runs two variants of one training
step (forward, backward, SGD step) on its own batch:

- ``ddp``: DDP as shipped, its gradient buckets all-reduced by NCCL during the backward pass (overlap by design);
- ``exposed``: the same step inside ``no_sync()`` (no bucketed all-reduce) and then one explicit all-reduce of
  every gradient, flattened, after backward: communication exposed by construction.

Each variant is warmed up, then run ``--runs`` times untraced, each run between CUDA events on the step's stream (the
step's GPU time, and, for ``exposed``, events just before and after the all-reduce: the collective's time as the step's
stream sees it), then once under ``bench.tracing(save=..., rank=...)``. Rank 0 merges the ranks' traces of each variant
(:func:`bench.usercode.trace.merge.merged_files`) and writes them with their Perfetto timelines; every rank's readings
go into one JSON. The readings printed side by side:

- bench's communication hidden, exposed and idle per GPU, ``ddp`` against ``exposed`` (whose hidden share must be
  near 0: its all-reduce follows backward);
- ``exposed``: bench's communication time against the events around the all-reduce;
- the overlap DDP won, two ways: the events' step time of ``exposed`` less that of ``ddp`` (what moving the
  communication behind backward saved), against bench's communication hidden behind compute in ``ddp`` (HTA's
  overlap). They are not the same quantity: an all-reduce beside backward slows its kernels, and a collective's time
  includes its wait for the other rank; on 2 H100s the step saved 0.4 ms while 1.9–5.5 ms of communication hid
  (docs/trace.md, "Checked on a DDP step");
- the ranks' CUPTI clocks read right after a barrier: the merge's assumption that one host's processes share it.

NCCL_NVLS_ENABLE=0 is set here too (before NCCL starts): NVLink SHARP multicast is left off on the lent machines.
The parts that need no GPU (naming, readings, the report) import neither torch nor CUDA and are tested without them
(tests/test_ddp_trace_script.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

VARIANTS = ("ddp", "exposed")
WIDTH, LAYERS, BATCH = 4096, 8, 1024  # an MLP of 8 layers of 4096 × 4096: 512 MiB of float32 gradients
BUCKET_MB = 25  # DDP's default bucket size
WARMUP = 3


@dataclass
class Readings:
    """One rank's readings of one variant (ms; shares 0 to 1)."""

    rank: int
    variant: str
    step_ms: list[float] = field(default_factory=list)  # the untraced runs' CUDA event step times
    collective_ms: list[float] = field(default_factory=list)  # exposed: the events around the all-reduce
    host_ms: list[float] = field(default_factory=list)  # the untraced runs' host times
    traced_host_ms: float | None = None
    bench: dict = field(default_factory=dict)  # bench's figures of this rank's GPU (GpuFigures.as_dict())


def trace_path(out: Path, stamp: str, rank: int, variant: str) -> Path:
    """Where rank ``rank`` saves its trace of ``variant``."""
    return Path(out) / f"{stamp}-ddp-{variant}-rank{rank}.parquet"


def merged_path(out: Path, stamp: str, variant: str, suffix: str) -> Path:
    return Path(out) / f"{stamp}-ddp-{variant}-merged{suffix}"


def gpu_readings(result) -> dict:
    """The figures of the one GPU a rank traced (its own; a rank drives one GPU)."""
    (figures,) = result.gpus.values()
    return {**figures.as_dict(), "kernels": sum(str(a.op) == "kernel" for a in result.records.activities)}


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f} ms"


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def report(readings: list[Readings], clock_spread_us: float | None) -> list[str]:
    """The readings side by side, rank by rank (what rank 0 prints)."""
    lines = []
    by = {(reading.rank, reading.variant): reading for reading in readings}
    for rank in sorted({reading.rank for reading in readings}):
        ddp, exposed = by.get((rank, "ddp")), by.get((rank, "exposed"))
        lines.append(f"rank {rank}:")
        for variant, reading in (("ddp", ddp), ("exposed", exposed)):
            if reading is None:
                continue
            b = reading.bench
            lines.append(f"  {variant}: events step {_ms(median(reading.step_ms))} (median of {len(reading.step_ms)})"
                         f"; bench makespan {_ms(b.get('makespan_ms'))}, communication {_ms(b.get('comm_ms'))}, "
                         f"hidden {_share(b.get('comm_hidden'))}, exposed {_ms(b.get('comm_exposed_ms'))}, compute "
                         f"idle during it {_ms(b.get('comm_idle_ms'))}; host {_ms(median(reading.host_ms))} "
                         f"untraced, {_ms(reading.traced_host_ms)} traced")
        if exposed is not None and exposed.collective_ms:
            lines.append(f"  exposed all-reduce: events {_ms(median(exposed.collective_ms))}, bench communication "
                         f"{_ms(exposed.bench.get('comm_ms'))}")
        if ddp is not None and exposed is not None and ddp.step_ms and exposed.step_ms:
            saved = median(exposed.step_ms) - median(ddp.step_ms)
            lines.append(f"  overlap DDP won: events (exposed step − ddp step) {_ms(saved)}; bench communication "
                         f"hidden in ddp {_ms(ddp.bench.get('comm_hidden_ms'))}")
    if clock_spread_us is not None:
        lines.append(f"CUPTI clocks of the ranks right after a barrier: spread {clock_spread_us:.1f} µs")
    return lines


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="directory for the traces, timelines and readings")
    parser.add_argument("--runs", type=int, default=20, help="untraced runs of each variant (default 20)")
    return parser.parse_args(argv)


# --- on the GPUs (torch, NCCL, CUPTI) ------------------------------------------------------------------------------

def _setup(rank: int, local_rank: int):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    dist.init_process_group("nccl", device_id=device)
    torch.manual_seed(0)
    layers = [torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU()) for _ in range(LAYERS)]
    model = DistributedDataParallel(torch.nn.Sequential(*layers).to(device), device_ids=[local_rank],
                                    bucket_cap_mb=BUCKET_MB)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    generator = torch.Generator(device=device).manual_seed(rank)
    batch = torch.randn(BATCH, WIDTH, device=device, generator=generator)
    return model, optimizer, batch


def _steps(model, optimizer, batch):
    """The two variants: each a function of one step taking (before, after) events for the collective, or None."""
    import torch
    import torch.distributed as dist

    def ddp(events=None) -> None:
        optimizer.zero_grad(set_to_none=True)
        model(batch).square().mean().backward()
        optimizer.step()

    def exposed(events=None) -> None:
        optimizer.zero_grad(set_to_none=True)
        with model.no_sync():
            model(batch).square().mean().backward()
        grads = [parameter.grad for parameter in model.parameters()]
        flat = torch.cat([grad.reshape(-1) for grad in grads])
        if events:
            events[0].record()
        dist.all_reduce(flat)
        if events:
            events[1].record()
        flat /= dist.get_world_size()
        offset = 0
        for grad in grads:
            grad.copy_(flat[offset:offset + grad.numel()].view_as(grad))
            offset += grad.numel()
        optimizer.step()

    return {"ddp": ddp, "exposed": exposed}


def _measure(step, variant: str, rank: int, runs: int, save: Path) -> Readings:
    """Warm-up, ``runs`` untraced runs between events, then one traced run saved to ``save``."""
    import torch
    import torch.distributed as dist

    import bench

    reading = Readings(rank, variant)
    for _ in range(WARMUP):
        step()
    torch.cuda.synchronize()
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        around = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
        dist.barrier()
        torch.cuda.synchronize()
        began = time.perf_counter()
        start.record()
        step(around if variant == "exposed" else None)
        end.record()
        torch.cuda.synchronize()
        reading.host_ms.append((time.perf_counter() - began) * 1e3)
        reading.step_ms.append(start.elapsed_time(end))
        if variant == "exposed":
            reading.collective_ms.append(around[0].elapsed_time(around[1]))
    dist.barrier()
    began = time.perf_counter()
    with bench.tracing(target=f"ddp_trace.py:{variant}", save=save, rank=rank) as traced:
        step()
    reading.traced_host_ms = (time.perf_counter() - began) * 1e3
    reading.bench = gpu_readings(traced.result)
    return reading


def _clock_spread_us() -> float:
    """The spread of the ranks' CUPTI timestamps read right after a barrier (µs)."""
    import torch.distributed as dist
    from cupti import cupti

    dist.barrier()
    now = cupti.get_timestamp()
    stamps: list = [None] * dist.get_world_size()
    dist.all_gather_object(stamps, now)
    return (max(stamps) - min(stamps)) / 1e3


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    os.environ["NCCL_NVLS_ENABLE"] = "0"  # before NCCL starts (init_process_group)
    import torch.distributed as dist

    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    args.out.mkdir(parents=True, exist_ok=True)
    model, optimizer, batch = _setup(rank, local_rank)
    stamps: list = [None]
    if rank == 0:
        stamps[0] = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    dist.broadcast_object_list(stamps, src=0)
    steps = _steps(model, optimizer, batch)
    readings = [_measure(steps[variant], variant, rank, args.runs, trace_path(args.out, stamps[0], rank, variant))
                for variant in VARIANTS]
    spread = _clock_spread_us()
    gathered: list = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, [asdict(reading) for reading in readings])
    dist.barrier()
    if rank == 0:
        write_merged(args.out, stamps[0], [Readings(**item) for items in gathered for item in items], spread,
                     dist.get_world_size())
    dist.destroy_process_group()
    return 0


def write_merged(out: Path, stamp: str, readings: list[Readings], spread_us: float, ranks: int) -> None:
    """Rank 0: each variant's ranks merged (rows, timeline, text), the readings' JSON, the report."""
    from bench.trace import save
    from bench.usercode.trace.merge import merged_files
    from bench.usercode.trace.perfetto import write

    for variant in VARIANTS:
        found = merged_files([trace_path(out, stamp, rank, variant) for rank in range(ranks)])
        save([(found.target, found)], None, merged_path(out, stamp, variant, ".parquet"))
        write(found, merged_path(out, stamp, variant, ".json"))
        merged_path(out, stamp, variant, ".txt").write_text(str(found) + "\n")
        print(f"{variant}, {ranks} ranks merged:\n{found}\n")
    lines = report(readings, spread_us)
    (Path(out) / f"{stamp}-ddp-readings.json").write_text(json.dumps(
        {"readings": [asdict(reading) for reading in readings], "clock_spread_us": spread_us, "report": lines,
         "model": {"width": WIDTH, "layers": LAYERS, "batch": BATCH, "bucket_mb": BUCKET_MB}}, indent=2))
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
