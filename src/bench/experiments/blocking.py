"""Which CUDA calls block the host: each call in :mod:`bench.calls`, made while a spin kernel runs.

A one-thread kernel busy-waits ``SPIN_MS`` on the GPU's global timer on the *spinning* stream (created ``blocking``,
i.e. with default flags, so the legacy default stream synchronizes with it, or ``non-blocking``). Once the host
sees it running, the call is made on its placement stream and timed on the host; right after it returns, the host
reads whether the spin is still running. Each configuration does this ``REPEATS`` times (fresh streams each time),
and once with no spin (``idle_host_ms``: what the call costs by itself). The verdict of one repeat:

- ``waits-for-device``: the spin had ended when the call returned, and the call took at least half of what was left
  of the spin when it was made: it waited for the GPU;
- ``own-work``: the spin was still running, but the call took at least ``OWN_WORK_MS`` (a copy, an allocation);
- ``returns``: the spin was still running and the call took less than ``OWN_WORK_MS``.

The row's verdict is the most common one and ``stable`` says whether all repeats agreed. ``docs_waits`` is what the
documentation says (:func:`bench.calls.documented_waits`), and ``matches_docs`` compares it with whether the call
waited for the device; it is empty where the docs are silent or vague.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Iterator, Sequence

import pandas as pd
from cupy.cuda import runtime

from bench.calls import KIT_MEMORY, PLACEMENTS, Kit, catalog, documented_waits, placement_stream
from bench.experiments import Config, Experiment, Row
from bench.memory import OwnedStream
from bench.timing import Spinner

SPIN_MS = 20.0
OWN_WORK_MS = 1.0  # well above what returning calls cost (≤ 0.3 ms on the H200), well below a 64 MiB copy
REPEATS = 3
VERDICTS = ("returns", "own-work", "waits-for-device")
SPIN_STREAMS = ("blocking", "non-blocking")


def classify(host_ms: float, spin_running: bool, spin_left_ms: float) -> str:
    """The verdict of one repeat (see the module docstring)."""
    if not spin_running:
        return "waits-for-device" if host_ms >= 0.5 * spin_left_ms else "unclear"
    return "own-work" if host_ms >= OWN_WORK_MS else "returns"


def consensus(verdicts: Sequence[str], order: Sequence[str] = ("unclear", *VERDICTS)) -> tuple[str, bool]:
    """The most common verdict (ties go to the one later in ``order``) and whether all agreed."""
    counts = Counter(verdicts)
    verdict = max(counts, key=lambda verdict: (counts[verdict], order.index(verdict)))
    return verdict, len(counts) == 1


class Streams:
    """The streams of one measurement: the spinning stream, a second spinning stream (for the serialization
    experiment) and a non-blocking ``other`` stream, all destroyed on exit unless a call destroyed one."""

    def __init__(self, spin_blocking: bool) -> None:
        self.spinning = OwnedStream(blocking=spin_blocking)
        self.second = OwnedStream(blocking=spin_blocking)
        self.other = OwnedStream(blocking=False)

    def __enter__(self) -> Streams:
        return self

    def __exit__(self, *exc) -> None:
        runtime.deviceSynchronize()
        for stream in (self.spinning, self.second, self.other):
            stream.close()


def _timed(prepared) -> float:
    started = time.perf_counter()
    prepared.call()
    return (time.perf_counter() - started) * 1e3


def _measure(config: Config, kit: Kit, spinner: Spinner) -> Row:
    call = catalog()[config["call"]]
    spin_blocking = config["spin_stream"] == "blocking"
    host_ms, spin_left_ms, verdicts = [], [], []
    for _ in range(REPEATS):
        with Streams(spin_blocking) as streams:
            prepared = call.prepare(kit, placement_stream(config["placement"], streams.spinning, streams.other))
            spinner.launch(streams.spinning, 0, SPIN_MS)
            seen = spinner.wait_started(0)
            prepared.arm()
            started = time.perf_counter()
            prepared.call()
            returned = time.perf_counter()
            running = spinner.running(0)
            runtime.deviceSynchronize()
            prepared.cleanup()
        host_ms.append((returned - started) * 1e3)
        spin_left_ms.append(SPIN_MS - (started - seen) * 1e3)
        verdicts.append(classify(host_ms[-1], running, spin_left_ms[-1]))
    with Streams(spin_blocking) as streams:
        prepared = call.prepare(kit, placement_stream(config["placement"], streams.spinning, streams.other))
        prepared.arm()
        idle_ms = _timed(prepared)
        runtime.deviceSynchronize()
        prepared.cleanup()
    verdict, stable = consensus(verdicts)
    docs_waits = documented_waits(call, config["placement"], spin_blocking)
    waited = verdict == "waits-for-device"
    return {**config, "api": call.api, "spin_ms": SPIN_MS, "host_ms_samples": host_ms,
            "host_ms": statistics.median(host_ms), "spin_left_ms": statistics.median(spin_left_ms),
            "idle_host_ms": idle_ms, "verdicts": verdicts, "verdict": verdict, "stable": stable,
            "docs_host": call.docs_host, "docs_waits": "" if docs_waits is None else str(docs_waits).lower(),
            "matches_docs": "" if docs_waits is None else str(docs_waits == waited).lower(),
            "docs": call.docs, "source": call.source, "status": "ok", "error": ""}


def run_each(configs: Sequence[Config], measure) -> Iterator[Row]:
    """``measure(config, kit, spinner)`` for each configuration; a call that fails is a failed row with its
    error, and the others go on."""
    spinner = Spinner()
    with Kit() as kit:
        for config in configs:
            try:
                yield measure(config, kit, spinner)
            except Exception as error:  # the runtime's refusal of one call must not end the others
                runtime.deviceSynchronize()
                yield {**config, "status": "failed", "error": f"{type(error).__name__}: {error}"}


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Calls that wait for the device, and rows that contradict the documentation."""
    ok = rows[rows["status"] == "ok"]
    waits = ok[ok["verdict"] == "waits-for-device"]
    contradicted = ok[ok["matches_docs"] == "false"]
    lines = []
    for label, group in (("waits for the device", waits), ("contradicts the docs", contradicted)):
        for _, row in group.iterrows():
            lines.append({"finding": label, "call": row["call"], "placement": row["placement"],
                          "spinning stream": row["spin_stream"], "host ms": f"{row['host_ms']:.3f}",
                          "verdict": row["verdict"]})
    return pd.DataFrame(lines)


def takes_placement(config: Config) -> bool:
    return config["placement"] in catalog()[config["call"]].placements


def catalog_experiment(name: str, description: str, measure, headline) -> Experiment:
    """An experiment over the call catalog: every call in each placement it takes, with each kind of spinning
    stream; ``measure(config, kit, spinner)`` gives one row."""
    return Experiment(
        name=name,
        description=description,
        axes={"call": tuple(catalog()), "placement": PLACEMENTS, "spin_stream": SPIN_STREAMS},
        run=lambda configs, timer: run_each(configs, measure),
        memory_needed=lambda configs: KIT_MEMORY,
        headline=headline,
        valid=takes_placement,
        size_axis="",
    )


EXPERIMENT = catalog_experiment(
    "blocking", "which CUDA calls block the host while a kernel runs, by placement, against the documentation",
    _measure, headline)
