"""Blocking across GPUs: does a call made on one GPU wait for a kernel running on another?

The ``blocking`` experiment's method with the spin kernel on ``spin_gpu`` (on a ``blocking`` or ``non-blocking``
stream) and the call made with ``call_gpu`` current: ``same-gpu`` where they are one GPU (the control), ``other-gpu``
otherwise. Each configuration repeats until ``MIN_REPEATS`` verdicts agree (at most five), verdicts as in
:mod:`bench.measure.verdicts`. ``cudaMemcpyPeer`` copies 4 KiB from ``call_gpu`` to the other GPU of the pair (for
``same-gpu``, the next GPU of the sweep). The method and what the documentation says: docs/methodology.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from bench.catalogs.runtime import DEVICE_PAGE, MEMORY_PAGE, SYNC_PAGE, Prepared, catalog
from bench.platform.cuda import on_device, runtime
from bench.experiments import Accuracy, Config, Cost, Experiment, Processes, Row, Sweeps
from bench.measure import columns
from bench.measure.memory import LEGACY_STREAM, OwnedStream
from bench.measure.verdicts import (HOST_VERDICTS, MIN_REPEATS, SPIN_METRIC, host_columns, host_verdict,
                                    repeat_until_settled, spin_for)
from bench.results.schema import INT, TEXT, column
from bench.timing import CallDuringSpin, Context, Floor, SpinWatch, StopRule, host_interval
from bench.platform.vocabulary import Clock, CrossGpuCall, HostVerdict, SPIN_MS, SPIN_STREAMS, Status, Unit, values

VERDICTS = HOST_VERDICTS
METRIC = SPIN_METRIC
SMALL_BYTES = 4 << 10
ALLOC_BYTES = 1 << 20
PLACEMENTS = ("same-gpu", "other-gpu")
PEER_DOCS = ("\"serialized with respect to all pending and future asynchronous work in to the current device, "
             "srcDevice, and dstDevice\" (ordering on the GPUs); the synchronous memcpy rule: \"for transfers from "
             "device memory to device memory, no host-side synchronization is performed\"")


@dataclass(frozen=True)
class CrossCall:
    """A call made on ``call_gpu``, and what the documentation says it waits for on each placement."""

    name: str
    api: str
    docs: str
    source: str
    docs_waits: dict[str, bool | None]  # placement -> the docs say it waits for the spin (None: silent)
    prepare: Callable[[int, int], Prepared]  # (call GPU, the other GPU of the pair) -> Prepared; call GPU current


def _same_gpu_docs(name: str) -> dict[str, bool | None]:
    """The one-GPU catalog's reading for the same GPU; the docs say nothing about other GPUs."""
    docs_host = catalog()[name].docs_host
    return {"same-gpu": {"device": True, "never": False}.get(docs_host), "other-gpu": None}


def _freeing(allocate: Callable[[], int], free: Callable[[int], None]) -> Callable[[int, int], Prepared]:
    def prepare(call_gpu: int, other_gpu: int) -> Prepared:
        pointer = allocate()
        return Prepared(lambda: free(pointer))
    return prepare


def _allocating(allocate: Callable[[], int], free: Callable[[int], None]) -> Callable[[int, int], Prepared]:
    def prepare(call_gpu: int, other_gpu: int) -> Prepared:
        made: list[int] = []
        return Prepared(lambda: made.append(allocate()), cleanup=lambda: [free(pointer) for pointer in made])
    return prepare


def _peer_copy(call_gpu: int, other_gpu: int) -> Prepared:
    source = runtime.malloc(SMALL_BYTES)
    with on_device(other_gpu):
        target = runtime.malloc(SMALL_BYTES)

    def cleanup() -> None:
        runtime.free(source)
        with on_device(other_gpu):
            runtime.free(target)

    return Prepared(lambda: runtime.memcpyPeer(target, other_gpu, source, call_gpu, SMALL_BYTES), cleanup=cleanup)


def _calls() -> list[CrossCall]:
    """The calls. Building them imports no CUDA library (no ``runtime.free`` read before a call is made): their
    documentation is read without one."""
    return [
        CrossCall("(nothing)", "(nothing)", "control: no call at all", "", {"same-gpu": False, "other-gpu": False},
                  lambda call_gpu, other_gpu: Prepared(lambda: None)),
        CrossCall("cudaFree", "cudaFree", catalog()["cudaFree"].docs, MEMORY_PAGE, _same_gpu_docs("cudaFree"),
                  _freeing(lambda: runtime.malloc(ALLOC_BYTES), lambda pointer: runtime.free(pointer))),
        CrossCall("cudaFreeHost", "cudaFreeHost", catalog()["cudaFreeHost"].docs, MEMORY_PAGE,
                  _same_gpu_docs("cudaFreeHost"),
                  _freeing(lambda: runtime.hostAlloc(ALLOC_BYTES, 0), lambda pointer: runtime.freeHost(pointer))),
        CrossCall("cudaMalloc", "cudaMalloc", catalog()["cudaMalloc"].docs, MEMORY_PAGE, _same_gpu_docs("cudaMalloc"),
                  _allocating(lambda: runtime.malloc(ALLOC_BYTES), lambda pointer: runtime.free(pointer))),
        CrossCall("cudaDeviceSynchronize", "cudaDeviceSynchronize",
                  "\"blocks until the device has completed all preceding requested tasks\": the current device",
                  DEVICE_PAGE, {"same-gpu": True, "other-gpu": False},
                  lambda call_gpu, other_gpu: Prepared(runtime.deviceSynchronize)),
        CrossCall("cudaStreamSynchronize (legacy stream)", "cudaStreamSynchronize",
                  "the current device's legacy default stream waits for that device's blocking streams",
                  DEVICE_PAGE, {"same-gpu": None, "other-gpu": False},
                  lambda call_gpu, other_gpu: Prepared(lambda: runtime.streamSynchronize(LEGACY_STREAM.ptr))),
        CrossCall("cudaMemcpyPeer 4 KiB", "cudaMemcpyPeer", PEER_DOCS, SYNC_PAGE,
                  {"same-gpu": False, "other-gpu": False}, _peer_copy),
    ]


def cross_catalog() -> dict[str, CrossCall]:
    return {call.name: call for call in _calls()}


CALL_NAMES = values(CrossGpuCall)  # the calls of _calls(), in order

COLUMNS = (
    column("call", TEXT, "the call, made with call_gpu current", CALL_NAMES),
    column("call_gpu", INT, "the GPU (CUDA ordinal) current when the call is made"),
    column("spin_gpu", INT, "the GPU the spin kernel runs on"),
    columns.SPIN_STREAM,
    column("placement", TEXT, "same-gpu (the spin runs on the call's GPU) or other-gpu", PLACEMENTS),
    columns.API, columns.SPIN_MS, columns.HOST_MS, columns.SPIN_LEFT_MS, columns.IDLE_HOST_MS,
    *columns.verdict_columns(VERDICTS),
    columns.STABLE, columns.DOCS, columns.SOURCE, columns.DOCS_WAITS, columns.MATCHES_DOCS,
)


def placement(config: Config) -> str:
    return "same-gpu" if config["call_gpu"] == config["spin_gpu"] else "other-gpu"


def seconds(config: Config, rule: StopRule) -> float:
    return 0.015 + MIN_REPEATS * SPIN_MS / 1e3


# --- measuring code --------------------------------------------------------------------------------------------

class _Spinner:
    """A spin watch and a spinning stream of each kind on one GPU."""

    def __init__(self, device: int) -> None:
        self.device = device
        with on_device(device):
            self.watch = SpinWatch()
            self.streams = {kind: OwnedStream(blocking=kind == "blocking") for kind in SPIN_STREAMS}

    def close(self) -> None:
        with on_device(self.device):
            runtime.deviceSynchronize()
            for stream in self.streams.values():
                stream.close()


def _once(call: CrossCall, call_gpu: int, other_gpu: int, spinner: _Spinner, stream_kind: str,
          spin_ms: float) -> CallDuringSpin:
    """One repeat: the spin on its GPU; once it runs, the call on the call's GPU; whether the spin outlived it."""
    with on_device(call_gpu):
        prepared = call.prepare(call_gpu, other_gpu)
    seen = spinner.watch.call_during_spin(spinner.streams[stream_kind], spin_ms, prepared.call, prepared.arm,
                                          spin_device=spinner.device, call_device=call_gpu)
    with on_device(other_gpu):
        runtime.deviceSynchronize()
    with on_device(call_gpu):
        prepared.cleanup()
    return seen


def _measure(config: Config, spinners: dict[int, _Spinner], devices: Sequence[int]) -> Row:
    call = cross_catalog()[config["call"]]
    call_gpu, spin_gpu = config["call_gpu"], config["spin_gpu"]
    other_gpu = spin_gpu if spin_gpu != call_gpu else devices[(devices.index(call_gpu) + 1) % len(devices)]
    where = placement(config)
    with on_device(call_gpu):
        prepared = call.prepare(call_gpu, other_gpu)
        idle, _ = host_interval(prepared.call)
        runtime.deviceSynchronize()
        prepared.cleanup()
    spin_ms = spin_for(idle)
    repeats = repeat_until_settled(lambda: _once(call, call_gpu, other_gpu, spinners[spin_gpu],
                                                 config["spin_stream"], spin_ms), host_verdict)
    samples = repeats.samples([seen.host_ms for seen in repeats.seen], Unit.MS, Clock.HOST, METRIC)
    docs_waits = call.docs_waits[where]
    return {**config, **samples.columns(), **host_columns(repeats), "placement": where, "api": call.api,
            "spin_ms": spin_ms, "idle_host_ms": idle, "docs": call.docs, "source": call.source,
            "docs_waits": docs_waits, "status": Status.OK, "error": "",
            "matches_docs": None if docs_waits is None
            else docs_waits == (repeats.verdict == HostVerdict.WAITS_FOR_DEVICE)}


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    devices = sorted({config["call_gpu"] for config in configs} | {config["spin_gpu"] for config in configs})
    spinners = {}
    try:
        for device in devices:
            spinners[device] = _Spinner(device)
        for config in configs:
            try:
                yield _measure(config, spinners, devices)
            except Exception as error:  # the runtime's refusal of one call must not end the others
                for device in devices:
                    with on_device(device):
                        runtime.deviceSynchronize()
                yield {**config, "placement": placement(config), "status": Status.FAILED,
                       "error": f"{type(error).__name__}: {error}"}
    finally:
        for spinner in spinners.values():
            spinner.close()


EXPERIMENT = Experiment(
    name="crossgpu",
    description="blocking across GPUs: cudaFree, cudaMalloc, cudaDeviceSynchronize, cudaMemcpyPeer ... on one GPU "
                "while a kernel runs on another",
    axes={"call": CALL_NAMES, "call_gpu": (0, 1), "spin_gpu": (0, 1), "spin_stream": SPIN_STREAMS},
    columns=COLUMNS,
    measure=measure,
    outcome=("verdict",),
    order=92,
    sweeps=Sweeps(
        quick={"call": ("(nothing)", "cudaFree", "cudaDeviceSynchronize")},
        size_axis="",
        device_axes=("call_gpu", "spin_gpu"),
    ),
    cost=Cost(seconds, share_s=0),  # multi-GPU: not in a one-GPU sweep's budget
    accuracy=Accuracy(floor=Floor(min_samples=MIN_REPEATS)),  # its verdict's repeats
    processes=Processes(gpus=2),
)
