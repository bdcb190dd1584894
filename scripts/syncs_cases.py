"""Issue 32's case table: ``bench.syncs`` on code written as users write it, each case's expected waits read from
markers in its own code, each case against an independent method on the same GPU; then the pytest helper's
nesting, enqueue-only and exception cases.

    python scripts/syncs_cases.py OUT_DIR [--settle-ms MS] [--budget-s S] [--groups torch,cupy,...] [--only TEXT]

writes OUT_DIR/<run>-<gpu>-syncs-cases.parquet (one row per case; its columns: :func:`table_columns`), the same rows
as OUT_DIR/<run>-<gpu>-syncs-cases.json (for reading; ``python scripts/syncs_findings.py FILE`` makes the markdown
table) and OUT_DIR/<run>-<gpu>-syncs.parquet (``bench.syncs.save``: one row per line found, of every case), and
prints a short table at the end.

Expected: a comment on a line of the case's code says it waits (scripts/syncs_markers.py): ``# wait`` (once each
time the region runs), ``# wait x30`` (30 times), ``# wait on thread`` (a region line that waits on another thread,
``t.join()``), ``# no wait``. A case counts the markers of its region and of the functions it lists (thread targets).
Found: the lines ``bench.syncs(region)`` names, matched to the marked lines by file and line number; ``agrees``: the
same lines, each with as many waits as marked.

Independent methods (they decide only whether the region waits at all): a spin kernel on the exact stream the code
uses (``bench.probe(region, stream=s)``, the one-stream meaning; not for JAX, whose streams nobody can name, nor for
another GPU's stream); else host time alone (the case queues GPU work before the call in question: a region that
waits holds the host for most of its GPU time, one that only enqueues returns long before the GPU is done). PyTorch's
``set_sync_debug_mode`` is recorded beside them for PyTorch's cases (a list PyTorch declares, not a measurement).

Each group of cases imports its library when it is set up: a group whose library is missing (or, for the two-GPU
cases, a machine with one GPU) is skipped with the reason printed; a case that raises records its error and the
script goes on. Every group is set up first; the cost cases (a 1000-wait loop, ten lines) run last. Cases not started
within ``--budget-s`` are recorded as skipped, and SIGTERM (``timeout``) writes what was found.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))  # syncs_markers, beside this file

from syncs_markers import (describe_place, expected_of, markers_of, match, slug, summary_table,  # noqa: E402
                           write_outputs)

SPIN_FLOOR_MS = 100.0  # the shortest spin of the one-stream method; a region that takes long on the host gets 4x it
BUDGET_S = 400.0  # no case starts after this (gpu_check.sh gives the step 480 s)


class Skip(Exception):
    """A group that cannot run here (too few GPUs): skipped with the reason."""


@dataclass
class Case:
    name: str
    library: str
    region: Callable[[], object]
    stream: object = None  # the stream the code uses: a spin on it is the independent method (None: host time)
    also: tuple = ()  # other functions whose markers count: thread targets, helpers
    torch_debug: bool = False  # record PyTorch's sync debug mode
    sync: Callable[[], object] | None = None  # waits for every GPU the region used (host time); None: GPU 0
    cost: bool = False  # a cost case: its bench.syncs wall time is the point


def torch_cases() -> list[Case]:
    import torch

    side = torch.cuda.Stream()
    model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(8)]).cuda()
    x = torch.randn(4096, 4096, device="cuda")
    m = torch.randn(4096, 4096, device="cuda")  # one product m @ m: about 2 ms
    v, w, u = (torch.randn(1 << 20, device="cuda") for _ in range(3))
    small = torch.ones(16, device="cuda")
    pageable = torch.randn(1 << 24)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
    event = torch.cuda.Event()
    kept, sink = [], io.StringIO()

    def side_item():
        with torch.cuda.stream(side):
            model(x).sum().item()  # wait

    def side_enqueue():
        with torch.cuda.stream(side):
            model(x).sum()  # no wait

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        return loss

    def step_logged():
        kept.append(step().item())  # wait

    def step_quiet():
        kept.append(step().detach())  # no wait

    def pageable_behind_work():
        model(x)
        pageable.to("cuda", non_blocking=True)  # wait

    def twelve_lines():
        a0 = (v * 1).sum().item()  # wait
        a1 = (v * 2).sum().item()  # wait
        a2 = (v * 3).sum().item()  # wait
        a3 = (v * 4).sum().item()  # wait
        a4 = (v * 5).sum().item()  # wait
        a5 = (v * 6).sum().item()  # wait
        a6 = (v * 7).sum().item()  # wait
        a7 = (v * 8).sum().item()  # wait
        a8 = (v * 9).sum().item()  # wait
        a9 = (v * 10).sum().item()  # wait
        a10 = (v * 11).sum().item()  # wait
        a11 = (v * 12).sum().item()  # wait
        return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11

    def loop_30():
        total = 0.0
        for _ in range(30): total += (v * 2).sum().item()  # wait x30  # noqa: E701
        return total

    def matmul_then_item_10():
        for _ in range(10):
            y = m @ m
            y[0, 0].item()  # wait x10

    def three_items():
        return (v * 2).sum().item() + (w * 3).sum().item() + (u * 4).sum().item()  # wait x3

    def print_tensor():
        sink.seek(0)
        sink.truncate()
        counts = (x > 0).sum(dim=1)[:4]  # int64: formatting reads its first element (.item()); the rest are ready
        print(counts, file=sink)  # wait

    def any_positive():
        if (x > 0).any():  # wait
            kept.append(1)

    def nonzero():
        torch.nonzero(v > 1.0)  # wait

    def nonzero_static():
        torch.nonzero_static(v > 1.0, size=1024)  # no wait

    def event_synchronize():
        m @ m
        event.record()
        event.synchronize()  # wait

    def event_query():
        m @ m
        event.record()
        kept.append(event.query())  # no wait

    graph, static = torch.cuda.CUDAGraph(), torch.randn(2048, 2048, device="cuda")
    warm = torch.cuda.Stream()
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm):
        for _ in range(3):
            static @ static
    torch.cuda.current_stream().wait_stream(warm)
    with torch.cuda.graph(graph):
        out = static
        for _ in range(8):
            out = torch.tanh(out @ static)

    def graph_replay():
        graph.replay()  # no wait
        torch.cuda.synchronize()  # wait

    def reader():
        kept.append((m @ m)[0, 0].item())  # wait

    def thread_waits():
        thread = threading.Thread(target=reader, name="reader")
        thread.start()
        thread.join()  # wait on thread

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="metrics")

    def log_loss(loss):
        kept.append(loss.item())  # wait

    def metrics_thread():
        loss = model(x).square().mean()
        future = pool.submit(log_loss, loss)
        with torch.cuda.stream(side):  # more work meanwhile, on a stream the logged loss does not wait for
            model(x)  # no wait
        future.result()  # wait on thread

    def thousand_items():
        total = 0.0
        for _ in range(1000): total += small.sum().item()  # wait x1000  # noqa: E701
        return total

    def ten_lines():
        y = m @ m
        r0 = y[0, 0].item()  # wait
        y = m @ m
        r1 = y[1, 1].item()  # wait
        y = m @ m
        r2 = y[2, 2].item()  # wait
        y = m @ m
        r3 = y[3, 3].item()  # wait
        y = m @ m
        r4 = y[4, 4].item()  # wait
        y = m @ m
        r5 = y[5, 5].item()  # wait
        y = m @ m
        r6 = y[6, 6].item()  # wait
        y = m @ m
        r7 = y[7, 7].item()  # wait
        y = m @ m
        r8 = y[8, 8].item()  # wait
        y = m @ m
        r9 = y[9, 9].item()  # wait
        return r0 + r1 + r2 + r3 + r4 + r5 + r6 + r7 + r8 + r9

    def case(name, region, stream=0, **extra) -> Case:
        return Case(name, "torch", region, stream, torch_debug=True, **extra)

    cases = [
        case("side stream: model(x).sum().item()", side_item, side),
        case("side stream: model(x).sum() (enqueue only)", side_enqueue, side),
        case("training step, loss logged with .item()", step_logged),
        case("training step, loss kept on the GPU", step_quiet),
        case("pageable t.to('cuda', non_blocking=True) behind work", pageable_behind_work),
        case("12 waits on consecutive lines", twelve_lines),
        case("loop of 30 .item() on one line", loop_30),
        case("10 x (2 ms matmul, then .item())", matmul_then_item_10),
        case("three .item() in one statement", three_items),
        case("print(tensor) of a GPU tensor", print_tensor),
        case("if (x > 0).any():", any_positive),
        case("torch.nonzero(mask)", nonzero),
        case("torch.nonzero_static(mask, size=n) (enqueue only)", nonzero_static),
        case("Event.synchronize() after a matmul", event_synchronize),
        case("Event.query() after a matmul (no wait)", event_query),
        case("CUDA graph replay, then torch.cuda.synchronize()", graph_replay),
        case("a thread the region starts waits; region joins it", thread_waits, also=(reader,)),
        case("ThreadPoolExecutor metrics thread logs loss.item()", metrics_thread, also=(log_loss,)),
        case("cost: 10 lines that wait once each", ten_lines, cost=True),
        case("cost: 1000 tiny .item() in a loop", thousand_items, cost=True),
    ]
    try:
        nonzero_static()
        torch.cuda.synchronize()
    except Exception as error:  # an older PyTorch, or one without a CUDA nonzero_static
        print(f"skipped torch.nonzero_static: {type(error).__name__}: {error}", flush=True)
        cases = [item for item in cases if item.region is not nonzero_static]
    return cases


def host_cases() -> list[Case]:
    def host_only():
        time.sleep(0.3)  # no wait

    return [Case("host work only: time.sleep(0.3)", "python", host_only, stream=0)]


def cupy_cases() -> list[Case]:
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    a = cupy.random.random(1 << 26)
    m = cupy.random.random((4096, 4096))
    cupy.cuda.runtime.deviceSynchronize()

    def busy():
        for _ in range(6):
            m @ m

    def scalar():
        with stream:  # float() inside: outside, CuPy would copy on the legacy stream, which waits for nothing here
            busy()
            float(a.sum())  # wait

    def enqueue():
        with stream:
            busy()
            (a * 2).sum()  # no wait

    def asnumpy():
        with stream:
            busy()
            cupy.asnumpy(a[:1024])  # wait

    return [Case("non-blocking stream: float(a.sum())", "cupy", scalar, stream),
            Case("non-blocking stream: (a * 2).sum() (enqueue only)", "cupy", enqueue, stream),
            Case("non-blocking stream: cupy.asnumpy(a[:1024])", "cupy", asnumpy, stream)]


def numba_cases() -> list[Case]:
    import numpy as np
    from numba import cuda

    if not cuda.is_available():
        raise Skip("numba-cuda sees no GPU")

    @cuda.jit
    def churn(out, rounds):
        i = cuda.grid(1)
        if i < out.size:
            value = out[i]
            for _ in range(rounds):
                value = value * 0.999 + 1.0
            out[i] = value

    data = cuda.to_device(np.ones(1 << 20, dtype=np.float32))
    blocks, rounds = (data.size + 255) // 256, 100_000  # a few ms
    stream = cuda.stream()
    churn[blocks, 256](data, 10)  # compiles
    cuda.synchronize()

    def copy_to_host():
        churn[blocks, 256](data, rounds)  # no wait
        data.copy_to_host()  # wait

    def launch_only():
        churn[blocks, 256, stream](data, rounds)  # no wait

    def stream_synchronize():
        churn[blocks, 256, stream](data, rounds)
        stream.synchronize()  # wait

    return [Case("kernel, then d.copy_to_host()", "numba-cuda", copy_to_host, 0),
            Case("kernel launch on a stream (enqueue only)", "numba-cuda", launch_only, stream),
            Case("kernel on a stream, then stream.synchronize()", "numba-cuda", stream_synchronize, stream)]


def jax_cases() -> list[Case]:
    import jax
    import jax.numpy as jnp
    import numpy as np

    if jax.default_backend() != "gpu":
        raise Skip(f"JAX runs on {jax.default_backend()}, not a GPU (is jax[cuda12] installed?)")

    @jax.jit
    def heavy(x):
        for _ in range(20):
            x = jnp.tanh(x @ x) * 0.5
        return x

    @jax.jit
    def light(x):
        return x * 2 + 1

    x = jax.random.normal(jax.random.key(0), (4096, 4096))
    heavy(x).block_until_ready()
    light(x).block_until_ready()
    vector = jax.random.normal(jax.random.key(1), (1 << 20,))
    kept = []

    def as_int():
        kept.append(int(heavy(x)[0, 0]))  # wait

    def if_positive():
        if heavy(x)[0, 0] > 0:  # wait
            kept.append(1)

    def item():
        kept.append(heavy(x)[0, 0].item())  # wait

    def to_numpy():
        np.asarray(heavy(x))  # wait

    def block_until_ready():
        jax.block_until_ready(heavy(x))  # wait

    def unique():
        heavy(x)
        jnp.unique(jnp.round(vector * 10))  # wait

    def dispatch():
        heavy(x)  # no wait
        light(x)  # no wait

    return [Case(name, "jax", region) for name, region in (
        ("int(heavy(x)[0, 0])", as_int), ("if heavy(x)[0, 0] > 0: (bool)", if_positive),
        ("heavy(x)[0, 0].item()", item), ("np.asarray(heavy(x))", to_numpy),
        ("jax.block_until_ready(heavy(x))", block_until_ready), ("jnp.unique behind work", unique),
        ("heavy(x); light(x) (dispatch only)", dispatch))]


def two_gpu_cases() -> list[Case]:
    import torch

    if torch.cuda.device_count() < 2:
        raise Skip(f"{torch.cuda.device_count()} GPU visible: the two-GPU cases need two")
    one = torch.device("cuda:1")
    m0 = torch.randn(2048, 2048, device="cuda:0")
    big0 = torch.randn(4096, 4096, device="cuda:0")
    m1 = torch.randn(4096, 4096, device=one)
    ready1 = torch.ones(4, device=one)
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)

    def sync_both():
        torch.cuda.synchronize(0)
        torch.cuda.synchronize(1)

    def item_on_1():
        (m1 @ m1 @ m1 @ m1)[0, 0].item()  # wait

    def work_0_fresh_item_1():
        m0 @ m0  # no wait
        (m1 @ m1 @ m1 @ m1)[0, 0].item()  # wait

    def work_0_ready_item_1():
        for _ in range(8):
            big0 @ big0
        ready1[0].item()  # no wait

    return [Case(name, "torch", region, torch_debug=True, sync=sync_both) for name, region in (
        ("GPU 1: .item() of matmuls on cuda:1", item_on_1),
        ("GPU 0 work, then .item() of fresh work on GPU 1", work_0_fresh_item_1),
        ("GPU 0 work, then .item() of a ready GPU 1 value", work_0_ready_item_1))]


def model_cases() -> list[Case]:
    import timm
    import torch
    import transformers

    resnet = timm.create_model("resnet50", pretrained=False).cuda()
    images = torch.randn(64, 3, 224, 224, device="cuda")
    labels = torch.randint(0, 1000, (64,), device="cuda")
    sgd = torch.optim.SGD(resnet.parameters(), lr=1e-4)
    kept = []

    def resnet_loss():
        sgd.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(resnet(images), labels)
        loss.backward()
        sgd.step()
        return loss

    def resnet_logged():
        kept.append(float(resnet_loss()))  # wait

    def resnet_quiet():
        kept.append(resnet_loss().detach())  # no wait

    config = transformers.GPT2Config(n_layer=6, n_embd=768, n_head=12, vocab_size=32000)
    gpt = transformers.GPT2LMHeadModel(config).cuda()
    tokens = torch.randint(0, 32000, (8, 512), device="cuda")
    adam = torch.optim.AdamW(gpt.parameters(), lr=1e-5, foreach=True)

    def gpt_loss():
        adam.zero_grad(set_to_none=True)
        loss = gpt(input_ids=tokens, labels=tokens).loss
        loss.backward()
        adam.step()
        return loss

    def gpt_logged():
        kept.append(gpt_loss().item())  # wait

    def gpt_quiet():
        kept.append(gpt_loss().detach())  # no wait

    return [Case(name, "torch", region, 0, torch_debug=True) for name, region in (
        ("timm resnet50 training step, loss logged with float()", resnet_logged),
        ("timm resnet50 training step, loss kept on the GPU", resnet_quiet),
        ("transformers GPT-2 (6 layers) step, loss logged with .item()", gpt_logged),
        ("transformers GPT-2 (6 layers) step, loss kept on the GPU", gpt_quiet))]


GROUPS = {"torch": torch_cases, "host": host_cases, "cupy": cupy_cases, "numba": numba_cases, "jax": jax_cases,
          "two-gpus": two_gpu_cases, "models": model_cases}  # in the order they run


def torch_debug_warned(region) -> bool:
    """PyTorch's own sync debug mode: did it warn during the region? (a declared list, PyTorch's calls only)"""
    import torch

    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            region()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    return any("synchroniz" in str(warning.message) for warning in caught)


def host_time_says_waited(region, sync=None) -> tuple[bool, float, float]:
    """By host time alone: (waited, host ms, ms until the GPU was done). A region that waits holds the host until its
    GPU work is (nearly) done; one that only enqueues returns well before."""
    if sync is None:
        from bench.platform.cuda import runtime

        sync = runtime.deviceSynchronize
    sync()
    started = time.perf_counter()
    region()
    host = time.perf_counter() - started
    sync()
    total = time.perf_counter() - started
    return host > 0.5 * total, host * 1e3, total * 1e3


def independent(case: Case, row: dict) -> None:
    """The independent method's columns of ``row``: spin on the case's stream where it names one, else host time;
    PyTorch's debug mode beside them for PyTorch's cases."""
    import bench

    waited, row["host_ms"], row["gpu_done_ms"] = host_time_says_waited(case.region, case.sync)
    row["host_time_waited"] = waited
    says, method = ("waits" if waited else "no waits"), "host time"
    if case.stream is not None:
        spin = max(SPIN_FLOOR_MS, 5.0 * round(4 * row["host_ms"] / 5 + 0.5))  # 4x the region: its own work ends
        # well before the spin does (bench.measure.verdicts.spin_for's rule)
        probed = bench.probe(case.region, stream=case.stream, spin_ms=spin, repeats=2 if row["host_ms"] > 100 else 3,
                             serialization=False)
        row["spin_verdict"], row["spin_ms"] = str(probed.verdict), float(spin)
        says = {"waits-for-device": "waits", "returns": "no waits", "own-work": "no waits"}.get(row["spin_verdict"],
                                                                                                 "unclear")
        method = "spin on its stream"
    if case.torch_debug:
        row["torch_debug_warned"] = torch_debug_warned(case.region)
    row["independent"], row["independent_method"] = says, method
    row["independent_agrees"] = None if says == "unclear" else (says == "waits") == (row["expected_waits"] > 0)


def _number(value) -> float | None:
    return None if value is None else float(value)


def run_case(case: Case, group: str, settle_ms: float | None) -> tuple[dict, object]:
    """One case's row, and what bench.syncs found (None where it raised)."""
    from bench.syncs import syncs

    row = {"case": case.name, "group": group, "library": case.library, "cost_case": case.cost, "status": "ok"}
    result = None
    try:
        markers = markers_of(case.region, *case.also)
        row["expected_lines"], row["expected_waits"] = expected_of(markers)
        started = time.perf_counter()
        result = syncs(case.region, **({} if settle_ms is None else {"settle_ms": settle_ms}))
        row["syncs_s"] = time.perf_counter() - started
        row.update(match(markers, result.places).as_row())
        row["own_work"] = "; ".join(describe_place(place) for place in result.own_work)
        for name in ("region_ms", "held_region_ms", "settle_ms"):  # read as told: the watcher is being rewritten
            row[name] = _number(getattr(result, name, None))
        row["hold_ms"] = _number(sum(getattr(place, "hold_ms", 0.0) for place in result.places))
    except Exception as error:
        row["status"], row["error"] = "error", f"{type(error).__name__}: {error}"
        traceback.print_exc()
        return row, result
    try:  # bench.syncs' columns stand whatever the independent method does
        independent(case, row)
    except Exception as error:
        row["independent_error"] = f"{type(error).__name__}: {error}"
        traceback.print_exc()
    return row, result


def pytest_cases() -> dict:
    """assert_async: nested enqueue-only regions pass; an inner .item() fails naming its line; an exception inside
    releases the GPU at once."""
    import torch

    from bench.pytest_plugin import WaitedForGpu, assert_async

    side = torch.cuda.Stream()
    x = torch.randn(4096, 4096, device="cuda")
    found = {}
    started = time.perf_counter()
    with assert_async():
        with torch.cuda.stream(side):
            y = x @ x
        with assert_async():
            z = y @ y
    found["nested enqueue-only passed"] = True
    found["nested enqueue-only s"] = time.perf_counter() - started
    try:
        with assert_async():
            with assert_async():
                (z @ z).sum().item()
        found["inner .item() failed"] = False
    except WaitedForGpu as error:
        found["inner .item() failed"] = True
        found["inner message"] = str(error)
    try:
        with assert_async():
            _ = x @ x
            raise KeyError("inside")
    except KeyError:
        started = time.perf_counter()
        torch.cuda.synchronize()
        found["after exception: synchronize ms"] = (time.perf_counter() - started) * 1e3
    return found


def _pair(row: dict, side: str) -> str:
    return f"{row.get(side + '_lines')} lines/{row.get(side + '_waits')} waits"


def _terminate(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the directory the table goes to (results/_syncs)")
    parser.add_argument("--settle-ms", type=float, default=None, help="bench.syncs' settle (default: its own)")
    parser.add_argument("--budget-s", type=float, default=BUDGET_S, help="start no case after this many seconds")
    parser.add_argument("--groups", default=",".join(GROUPS), help=f"comma-separated, of {', '.join(GROUPS)}")
    parser.add_argument("--only", default="", help="comma-separated texts: only cases whose name holds one")
    parser.add_argument("--no-assert-async", action="store_true", help="skip the pytest helper's cases")
    options = parser.parse_args(argv)
    unknown = set(options.groups.split(",")) - set(GROUPS)
    if unknown:
        parser.error(f"unknown group(s) {', '.join(sorted(unknown))}; known: {', '.join(GROUPS)}")
    options.out.mkdir(parents=True, exist_ok=True)
    from bench.platform.env import gpu_environment

    environment = gpu_environment(0)
    started = time.perf_counter()
    run = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    stem = f"{run}-{slug(environment.device.gpu_name)}"
    summary = {"format": "syncs-cases 2", "run_id": run, "gpu": environment.device.gpu_name,
               "uuid": environment.device.gpu_uuid, "driver": environment.cuda.driver_version,
               "commit": os.environ.get("BENCH_GIT_COMMIT", "") or environment.host.git_commit,
               "settle_ms": options.settle_ms, "skipped_groups": {}, "setup_s": {},
               "environment": environment.as_dict()}
    wanted = [text.strip().lower() for text in options.only.split(",") if text.strip()]
    rows, found = [], []
    previous = signal.signal(signal.SIGTERM, _terminate)  # timeout(1): write what was found
    try:
        planned = []
        for group in options.groups.split(","):
            try:
                set_up = time.perf_counter()
                planned += [(group, case) for case in GROUPS[group]()
                            if not wanted or any(text in case.name.lower() for text in wanted)]
                summary["setup_s"][group] = time.perf_counter() - set_up
            except (ImportError, Skip) as error:
                summary["skipped_groups"][group] = f"{type(error).__name__}: {error}"
                print(f"skipped group {group}: {error}", flush=True)
            except Exception as error:
                summary["skipped_groups"][group] = f"{type(error).__name__}: {error}"
                print(f"skipped group {group}, its set-up failed: {type(error).__name__}: {error}", flush=True)
                traceback.print_exc()
        planned.sort(key=lambda item: item[1].cost)  # the cost cases last: the rest is measured whatever they take
        for group, case in planned:
            if time.perf_counter() - started > options.budget_s:
                expected = dict(zip(("expected_lines", "expected_waits"),
                                    expected_of(markers_of(case.region, *case.also))))
                rows.append({"run_id": run, "case": case.name, "group": group, "library": case.library,
                             "cost_case": case.cost, "status": "skipped", **expected,
                             "error": f"time budget ({options.budget_s:.0f} s) spent"})
                continue
            row, result = run_case(case, group, options.settle_ms)
            rows.append({"run_id": run, **row})
            if result is not None:
                found.append((f"{group}: {case.name}", result))
            print(f"[{len(rows)}/{len(planned)}] {group}: {case.name}: expected {_pair(row, 'expected')}, found "
                  f"{_pair(row, 'found')}, agrees {row.get('agrees')}, independent {row.get('independent')} "
                  f"({row.get('independent_method')}), {row.get('syncs_s', 0):.1f} s {row.get('error', '')}",
                  flush=True)
        if not options.no_assert_async and not wanted:
            try:
                summary["assert_async"] = pytest_cases()
            except Exception as error:
                summary["assert_async"] = {"error": f"{type(error).__name__}: {error}"}
                traceback.print_exc()
    except KeyboardInterrupt as stop:
        summary["interrupted"] = str(stop) or "KeyboardInterrupt"
        print(f"interrupted ({summary['interrupted']}): writing the {len(rows)} rows found so far", flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
    summary["wall_s"] = time.perf_counter() - started
    for path in write_outputs(options.out, stem, rows, summary, environment, found):
        print(f"wrote {path}", flush=True)
    print(json.dumps(summary.get("assert_async", {}), default=str))
    print(summary_table(rows), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
