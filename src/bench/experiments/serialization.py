"""Which CUDA calls keep kernels on different streams from overlapping (implicit synchronization on the device).

Two spin kernels of ``SPIN_MS`` each go to two streams (both ``blocking`` or both ``non-blocking``): the first one is
launched, and once the host sees it running the call is made (on its placement stream, see :mod:`bench.calls`), then
the second is launched. Both kernels stamp their start and end with the GPU's global timer, so the result needs no
events: ``overlap_ms`` is how long both ran at once and ``makespan_ms`` first start to last end. The verdict is
``overlaps`` when they ran together for at least half a spin, ``serializes`` when the second started only after the
first ended, ``partial`` in between. ``host_waited`` says the call itself held the host until the first kernel
ended (the second could not even be launched earlier), which serializes them from the host; otherwise the
serialization, if any, happened on the device. ``docs_serializes`` is the Programming Guide's list of operations
that keep streams from running concurrently, plus "any CUDA command to the NULL stream" for blocking streams.
"""

from __future__ import annotations

import statistics
import time

import pandas as pd
from cupy.cuda import runtime

from bench.calls import GUIDE_IMPLICIT, Kit, catalog, documented_serializes, placement_stream
from bench.experiments import Config, Row
from bench.experiments.blocking import REPEATS, SPIN_MS, Streams, catalog_experiment, consensus
from bench.timing import Spinner

SERIALIZATION_VERDICTS = ("overlaps", "partial", "serializes")


def classify(first: tuple[float, float], second: tuple[float, float], spin_ms: float) -> str:
    """Verdict from the two kernels' (start, end) in ms."""
    overlap = min(first[1], second[1]) - max(first[0], second[0])
    if overlap >= 0.5 * spin_ms:
        return "overlaps"
    if second[0] >= first[1] - 0.01 * spin_ms:
        return "serializes"
    return "partial"


def _measure(config: Config, kit: Kit, spinner: Spinner) -> Row:
    call = catalog()[config["call"]]
    spin_blocking = config["spin_stream"] == "blocking"
    overlaps, makespans, host_ms, waited, verdicts = [], [], [], [], []
    for _ in range(REPEATS):
        with Streams(spin_blocking) as streams:
            prepared = call.prepare(kit, placement_stream(config["placement"], streams.spinning, streams.other))
            spinner.launch(streams.spinning, 0, SPIN_MS)
            spinner.wait_started(0)
            prepared.arm()
            started = time.perf_counter()
            prepared.call()
            host_ms.append((time.perf_counter() - started) * 1e3)
            waited.append(not spinner.running(0))
            spinner.launch(streams.second, 1, SPIN_MS)
            runtime.deviceSynchronize()
            prepared.cleanup()
        origin = int(spinner.stamps[0])
        first, second = spinner.interval_ms(0, origin), spinner.interval_ms(1, origin)
        overlaps.append(max(0.0, min(first[1], second[1]) - max(first[0], second[0])))
        makespans.append(max(first[1], second[1]) - min(first[0], second[0]))
        verdicts.append(classify(first, second, SPIN_MS))
    verdict, stable = consensus(verdicts, SERIALIZATION_VERDICTS)
    documented = documented_serializes(call, config["placement"], spin_blocking)
    return {**config, "api": call.api, "spin_ms": SPIN_MS, "overlap_ms_samples": overlaps,
            "overlap_ms": statistics.median(overlaps), "makespan_ms": statistics.median(makespans),
            "host_ms": statistics.median(host_ms), "host_waited": sum(waited) > len(waited) / 2,
            "verdicts": verdicts, "verdict": verdict, "stable": stable,
            "docs_serializes": "" if documented is None else "true",
            "matches_docs": "" if documented is None else str(verdict == "serializes").lower(),
            "docs": call.docs if call.guide_serializes else "", "source": GUIDE_IMPLICIT if documented else "",
            "status": "ok", "error": ""}


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Calls that kept the two kernels from overlapping, and why."""
    ok = rows[(rows["status"] == "ok") & (rows["verdict"] != "overlaps")]
    return pd.DataFrame([{
        "call": row["call"], "placement": row["placement"], "streams": row["spin_stream"],
        "overlap ms": f"{row['overlap_ms']:.2f}", "verdict": row["verdict"],
        "cause": "host waited" if row["host_waited"] else "device",
    } for _, row in ok.iterrows()])


EXPERIMENT = catalog_experiment(
    "serialization", "which CUDA calls, issued between two kernels on two streams, keep them from overlapping",
    _measure, headline)
