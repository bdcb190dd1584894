"""Issue 23's cases on a GPU: ``bench.syncs`` on code written as users write it (PyTorch on side streams, CuPy on
non-blocking streams, JAX, a training step, timm and transformers models), each against an independent method on
the same GPU, and the pytest helper's nesting, enqueue-only and exception cases.

    python scripts/syncs_cases.py OUT_DIR      # writes OUT_DIR/<run>-syncs.parquet and OUT_DIR/<run>-syncs.json

Independent methods: a spin kernel held on the exact stream the code uses (``bench.probe(..., stream=s)``, the one-
stream meaning; not for JAX, whose streams nobody can name); host time alone (every case queues GPU work before the
call in question: a region that waits holds the host for most of its GPU time, one that only enqueues returns long
before the GPU is done); PyTorch's ``set_sync_debug_mode`` for PyTorch's cases (a list PyTorch declares).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import bench
from bench.env import gpu_environment
from bench.syncs import save, syncs


@dataclass
class Case:
    name: str
    library: str
    region: object  # () -> None
    expected: bool  # the region waits for the GPU
    line: str = ""  # a text of the line expected to be named
    stream: object = None  # the stream it uses, for the one-stream spin
    debug: object = None  # () -> bool: PyTorch's sync debug mode warned (PyTorch's cases)


def torch_cases() -> list[Case]:
    import torch

    side = torch.cuda.Stream()
    model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(8)]).cuda()
    x = torch.randn(4096, 4096, device="cuda")
    torch.cuda.synchronize()

    def side_item():
        with torch.cuda.stream(side):
            model(x).sum().item()

    def side_enqueue():
        with torch.cuda.stream(side):
            model(x).sum()

    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
    losses = []

    def step_logged():
        optimizer.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())

    def step_quiet():
        optimizer.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())

    pageable = torch.randn(1 << 24)

    def pageable_non_blocking():
        pageable.to("cuda", non_blocking=True)

    return [
        Case("torch side stream: model(x).sum().item()", "torch", side_item, True, ".item()", side,
             debug(side_item)),
        Case("torch side stream: model(x).sum() (enqueue only)", "torch", side_enqueue, False, "", side,
             debug(side_enqueue)),
        Case("torch training step, loss logged with .item()", "torch", step_logged, True, "loss.item()", 0,
             debug(step_logged)),
        Case("torch training step, loss kept on the GPU", "torch", step_quiet, False, "", 0, debug(step_quiet)),
        Case("torch pageable t.to('cuda', non_blocking=True) behind work", "torch",
             lambda: (model(x), pageable_non_blocking()), True, "pageable.to(", 0,
             debug(lambda: (model(x), pageable_non_blocking()))),
    ]


def debug(region):
    """PyTorch's own sync debug mode: did it warn during the region? (a declared list, PyTorch's calls only)"""
    def warned() -> bool:
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

    return warned


def model_cases() -> list[Case]:
    import timm
    import torch
    import transformers

    cases = []
    resnet = timm.create_model("resnet50", pretrained=False).cuda()
    images = torch.randn(64, 3, 224, 224, device="cuda")
    labels = torch.randint(0, 1000, (64,), device="cuda")
    sgd = torch.optim.SGD(resnet.parameters(), lr=1e-4)
    logged = []

    def resnet_step(log: bool):
        def step():
            sgd.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(resnet(images), labels)
            loss.backward()
            sgd.step()
            logged.append(float(loss) if log else loss.detach())
        return step

    cases += [Case("timm resnet50 training step, loss logged with float()", "torch", resnet_step(True), True,
                   "float(loss)", 0, debug(resnet_step(True))),
              Case("timm resnet50 training step, loss kept on the GPU", "torch", resnet_step(False), False, "", 0,
                   debug(resnet_step(False)))]
    config = transformers.GPT2Config(n_layer=6, n_embd=768, n_head=12, vocab_size=32000)
    gpt = transformers.GPT2LMHeadModel(config).cuda()
    tokens = torch.randint(0, 32000, (8, 512), device="cuda")
    adam = torch.optim.AdamW(gpt.parameters(), lr=1e-5, foreach=True)

    def gpt_step(log: bool):
        def step():
            adam.zero_grad(set_to_none=True)
            loss = gpt(input_ids=tokens, labels=tokens).loss
            loss.backward()
            adam.step()
            logged.append(loss.item() if log else loss.detach())
        return step

    cases += [Case("transformers GPT-2 (6 layers) training step, loss logged with .item()", "torch", gpt_step(True),
                   True, "loss.item()", 0, debug(gpt_step(True))),
              Case("transformers GPT-2 (6 layers) training step, loss kept on the GPU", "torch", gpt_step(False),
                   False, "", 0, debug(gpt_step(False)))]
    return cases


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
        with stream:
            busy()
            float(a.sum())

    def enqueue():
        with stream:
            busy()
            (a * 2).sum()

    def asnumpy():
        with stream:
            busy()
            cupy.asnumpy(a[:1024])

    return [Case("cupy non-blocking stream: float(a.sum())", "cupy", scalar, True, "float(a.sum())", stream),
            Case("cupy non-blocking stream: (a * 2).sum() (enqueue only)", "cupy", enqueue, False, "", stream),
            Case("cupy non-blocking stream: cupy.asnumpy(a[:1024])", "cupy", asnumpy, True, "cupy.asnumpy", stream)]


def host_time_says_waited(region) -> tuple[bool, float, float]:
    """By host time alone: (waited, host ms, ms until the GPU was done). A region that waits holds the host until its
    GPU work is (nearly) done; one that only enqueues returns well before."""
    from bench.cuda import runtime

    runtime.deviceSynchronize()
    started = time.perf_counter()
    region()
    host = time.perf_counter() - started
    runtime.deviceSynchronize()
    total = time.perf_counter() - started
    return host > 0.5 * total, host * 1e3, total * 1e3


def jax_cases() -> list[Case]:
    import jax
    import jax.numpy as jnp

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

    def scalar():
        float(heavy(x)[0, 0])

    def ready():
        heavy(x).block_until_ready()

    def mask():
        y = heavy(x)
        y[y > 0]

    def unique():
        heavy(x)
        jnp.unique(jnp.round(vector * 10))

    def dispatch():
        heavy(x)
        light(x)

    def to_numpy():
        import numpy as np

        np.asarray(heavy(x))

    cases = [("jax float(heavy(x)[0, 0])", scalar, True, "float("), ("jax heavy(x).block_until_ready()", ready, True,
             "block_until_ready"), ("jax y[y > 0] (boolean mask)", mask, True, "y[y > 0]"),
             ("jax jnp.unique behind work", unique, True, "jnp.unique"), ("jax np.asarray(heavy(x))", to_numpy, True,
             "np.asarray"), ("jax heavy(x); light(x) (dispatch only)", dispatch, False, "")]
    return [Case(name, "jax", region, expected, line) for name, region, expected, line in cases]


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


def main(out: Path) -> int:
    environment = gpu_environment(0)
    run = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    summary = {"gpu": environment.gpu_name, "uuid": environment.gpu_uuid, "driver": environment.driver_version,
               "commit": os.environ.get("BENCH_GIT_COMMIT", ""), "cases": []}
    found_all = []
    groups = [("torch", torch_cases), ("cupy", cupy_cases), ("jax", jax_cases), ("models", model_cases)]
    for group, make in groups:
        try:
            cases = make()
        except Exception as error:
            summary["cases"].append({"name": group, "error": f"{type(error).__name__}: {error}"})
            traceback.print_exc()
            continue
        for case in cases:
            entry = {"name": case.name, "library": case.library, "expected_wait": case.expected}
            try:
                started = time.perf_counter()
                found = syncs(case.region)
                entry["syncs_s"] = time.perf_counter() - started
                entry["waited"] = found.waited
                entry["lines"] = [f"{p.where} {p.source} [{p.library or '?'}; {p.count}x; "
                                  f"{', '.join(p.cuda_calls) or '-'}]" for p in found.places]
                entry["own_work"] = [f"{p.where} {p.source}" for p in found.own_work]
                entry["named"] = any(case.line in place.source for place in found.places) if case.line else None
                entry["region_ms"] = found.region_ms
                entry["held_region_ms"] = found.held_region_ms
                entry["hold_ms_per_wait"] = [p.hold_ms / p.count for p in found.places + found.own_work]
                entry["cuda_calls"] = found.cuda_calls
                entry["hold"] = found.hold
                if case.stream is not None:
                    probed = bench.probe(case.region, stream=case.stream, spin_ms=200, serialization=False)
                    entry["one_stream_spin"] = probed.verdict
                held = bench.probe(case.region, spin_ms=200, serialization=False)
                entry["probe_hold"] = held.verdict
                entry["host_time_waited"], entry["host_ms"], entry["gpu_done_ms"] = host_time_says_waited(case.region)
                if case.debug is not None:
                    entry["torch_debug_mode_warned"] = case.debug()
                entry["as_expected"] = found.waited == case.expected
                found_all.append((case.name, found))
                print(f"{case.name}: {found}", flush=True)
            except Exception as error:
                entry["error"] = f"{type(error).__name__}: {error}"
                traceback.print_exc()
            summary["cases"].append(entry)
            print(json.dumps(entry), flush=True)
    try:
        summary["assert_async"] = pytest_cases()
    except Exception as error:
        summary["assert_async"] = {"error": f"{type(error).__name__}: {error}"}
        traceback.print_exc()
    save(found_all, environment, out / f"{run}-{slug(environment.gpu_name)}-syncs.parquet")
    (out / f"{run}-{slug(environment.gpu_name)}-syncs.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary["assert_async"], indent=2))
    return 0


def slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")[:60]


if __name__ == "__main__":
    target = Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    sys.exit(main(target))
