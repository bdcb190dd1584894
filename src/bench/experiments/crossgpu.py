"""Blocking across GPUs: does a call made on one GPU wait for a kernel running on another?

The ``blocking`` experiment's method, with the spin kernel and the call on GPUs of their own: a one-thread kernel
busy-waits on ``spin_gpu`` (on a stream created ``blocking`` or ``non-blocking``); once the host sees it running,
the call is made with ``call_gpu`` current and timed on the host, and right after it returns the host reads whether
the spin still runs. ``call_gpu == spin_gpu`` is the same-GPU control (placement ``same-gpu``), the rest are
``other-gpu``. Each configuration repeats until ``MIN_REPEATS`` verdicts agree (or ``MAX_REPEATS``); verdicts as
in :mod:`bench.measure.verdicts`: ``waits-for-device``, ``own-work`` or ``returns``.

``cudaMemcpyPeer`` copies 4 KiB from ``call_gpu`` to the other GPU of the pair (for ``same-gpu``, to the next GPU
of the sweep): its page says it is "serialized with respect to all pending and future asynchronous work in to the
current device, srcDevice, and dstDevice", which orders it on the GPUs; whether the host waits is the synchronous
memcpy rule of the API synchronization page: device to device, "no host-side synchronization is performed".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pandas as pd

from bench.catalogs.runtime import DEVICE_PAGE, MEMORY_PAGE, SYNC_PAGE, Prepared, catalog
from bench.cuda import on_device, runtime
from bench.experiments import Config, Experiment, Row, listed
from bench.measure import columns
from bench.measure.memory import LEGACY_STREAM, OwnedStream
from bench.measure.verdicts import (HOST_VERDICTS, MIN_REPEATS, SPIN_METRIC, SPIN_MS, SPIN_STREAMS, host_columns,
                                    host_verdict, repeat_until_settled, spin_for)
from bench.schema import INT, TEXT, column
from bench.timing import CallDuringSpin, Context, SpinWatch, StopRule, host_interval

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


CALL_NAMES = ("(nothing)", "cudaFree", "cudaFreeHost", "cudaMalloc", "cudaDeviceSynchronize",
              "cudaStreamSynchronize (legacy stream)", "cudaMemcpyPeer 4 KiB")

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


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Each call's verdict with the spin on its own GPU and on another."""
    ok = rows[rows["status"] == "ok"]
    lines = []
    for (call, spin_stream), group in ok.groupby(["call", "spin_stream"], sort=False):
        line = {"call": call, "spinning stream": spin_stream}
        for _, row in group.iterrows():
            line[f"spin on GPU {row['spin_gpu']}, call on GPU {row['call_gpu']}: verdict (host ms)"] = (
                f"{row['verdict']} ({row['host_ms']:.3f})")
        lines.append(line)
    return pd.DataFrame(lines)


def answer(rows: pd.DataFrame) -> str | None:
    """The calls that wait for a kernel on another GPU, and those that wait for one on their own."""
    ok = rows[rows["status"] == "ok"]
    if not len(ok):
        return None
    waits = ok[ok["verdict"] == "waits-for-device"]
    other = list(dict.fromkeys(waits.loc[waits["spin_gpu"] != waits["call_gpu"], "call"]))
    own = list(dict.fromkeys(waits.loc[waits["spin_gpu"] == waits["call_gpu"], "call"]))
    return f"wait for a kernel on another GPU: {listed(other)}; on their own GPU: {listed(own)}"


def crossgpu_figure(rows: pd.DataFrame, tables: dict) -> list:
    """Calls × (spin GPU, spinning stream), one panel per call GPU: verdict colours, host ms in each cell."""
    from bench.analysis import contradicts_docs, short_ms
    from bench.plots import VERDICT_COLORS, gpu_label, pyplot

    ok = rows[(rows["experiment"] == "crossgpu") & (rows["status"] == "ok")]
    if not len(ok):
        return []
    plt = pyplot()
    calls = [call for call in CALL_NAMES if call in set(ok["call"])]
    call_gpus = sorted(ok["call_gpu"].unique())
    columns = [(spin_gpu, stream) for spin_gpu in sorted(ok["spin_gpu"].unique()) for stream in SPIN_STREAMS
               if ((ok["spin_gpu"] == spin_gpu) & (ok["spin_stream"] == stream)).any()]
    figure, axes = plt.subplots(1, len(call_gpus), figsize=(4.5 * len(call_gpus) + 2, 0.42 * len(calls) + 2.2),
                                squeeze=False, constrained_layout=True)
    for ax, call_gpu in zip(axes[0], call_gpus):
        mine = ok[ok["call_gpu"] == call_gpu]
        cells = {(row["call"], row["spin_gpu"], row["spin_stream"]): row for _, row in mine.iterrows()}
        ax.set_xlim(-0.5, len(columns) - 0.5)
        ax.set_ylim(len(calls) - 0.5, -0.5)
        for y, call in enumerate(calls):
            for x, (spin_gpu, stream) in enumerate(columns):
                row = cells.get((call, spin_gpu, stream))
                if row is None:
                    continue
                ax.add_patch(plt.Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=VERDICT_COLORS[row["verdict"]],
                                           edgecolor="white", linewidth=1.5))
                ax.text(x, y, short_ms(row["host_ms"]) + ("!" if contradicts_docs(row) else ""), ha="center", va="center",
                        fontsize=7)
        ax.set_xticks(range(len(columns)), [f"spin on GPU {gpu}\n{'same' if gpu == call_gpu else 'other'} GPU\n"
                                            f"({stream})" for gpu, stream in columns], fontsize=7)
        ax.xaxis.tick_top()
        ax.set_yticks(range(len(calls)), calls if ax is axes[0][0] else [""] * len(calls), fontsize=8)
        ax.set_xlabel(f"call made on GPU {call_gpu}", fontsize=9)
    handles = [plt.Rectangle((0, 0), 1, 1, color=VERDICT_COLORS[verdict]) for verdict in VERDICTS]
    figure.legend(handles, list(VERDICTS), loc="outside lower center", ncol=len(handles), fontsize=8)
    figure.suptitle(f"Does a call on one GPU wait for a {SPIN_MS:g} ms kernel on another? {gpu_label(ok)} "
                    "(cell: host ms; ! = contradicts the docs)", fontsize=10)
    return [("crossgpu_truth_table", figure)]


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
    samples = repeats.samples([seen.host_ms for seen in repeats.seen], "ms", "host", METRIC)
    docs_waits = call.docs_waits[where]
    return {**config, **samples.columns(), **host_columns(repeats), "placement": where, "api": call.api,
            "spin_ms": spin_ms, "idle_host_ms": idle, "docs": call.docs, "source": call.source,
            "docs_waits": docs_waits, "status": "ok", "error": "",
            "matches_docs": None if docs_waits is None else docs_waits == (repeats.verdict == "waits-for-device")}


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
                yield {**config, "placement": placement(config), "status": "failed",
                       "error": f"{type(error).__name__}: {error}"}
    finally:
        for spinner in spinners.values():
            spinner.close()


EXPERIMENT = Experiment(
    name="crossgpu",
    description="blocking across GPUs: cudaFree, cudaMalloc, cudaDeviceSynchronize, cudaMemcpyPeer ... on one GPU "
                "while a kernel runs on another",
    axes={"call": CALL_NAMES, "call_gpu": (0, 1), "spin_gpu": (0, 1), "spin_stream": SPIN_STREAMS},
    quick={"call": ("(nothing)", "cudaFree", "cudaDeviceSynchronize")},
    columns=COLUMNS,
    measure=measure,
    headline=headline,
    answer=answer,
    seconds=seconds,
    figures=(crossgpu_figure,),
    outcome=("verdict",),
    size_axis="",
    order=92,
    share_s=0,  # multi-GPU: not in a one-GPU sweep's budget
    gpus=2,
    device_axes=("call_gpu", "spin_gpu"),
)
