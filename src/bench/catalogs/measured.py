"""The runtime call catalog (:mod:`bench.catalogs.runtime`) measured call by call: the axes of an experiment over
it, fresh streams for every measurement, and a run over configurations in which one call's failure does not end the
others. The ``blocking`` and ``serialization`` experiments are built from these. It stands on the catalog and on the
measuring tools (:mod:`bench.measure`), as the catalogs do."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from bench.catalogs.runtime import KIT_MEMORY, Kit, catalog, placement_stream
from bench.platform.cuda import runtime
from bench.measure.memory import OwnedStream
from bench.timing import Context, Samples, SpinWatch, host_interval
from bench.platform.vocabulary import PLACEMENTS, SPIN_STREAMS, Status

QUICK_CALLS = {"call": ("(nothing)", "cudaFree", "cudaMemcpyAsync H2D pageable 64 MiB", "kernel launch")}
# --quick: a control, a call that waits, one that stages on the host, one that returns


def catalog_axes() -> dict[str, tuple]:
    return {"call": tuple(catalog()), "placement": PLACEMENTS, "spin_stream": SPIN_STREAMS}


def takes_placement(config: dict) -> bool:
    return config["placement"] in catalog()[config["call"]].placements


def kit_memory(configs: Sequence[dict]) -> tuple[int, int]:
    return KIT_MEMORY


class Streams:
    """The streams of one measurement: the spinning stream, a second spinning stream (for calls between two spins)
    and a non-blocking ``other`` stream, all destroyed on exit unless a call destroyed one."""

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


def catalog_row(config: dict, call, samples: Samples) -> dict:
    """The columns every catalog experiment's rows share."""
    return {**config, **samples.columns(), "api": call.api, "docs": call.docs, "source": call.source,
            "status": Status.OK, "error": ""}


def on_fresh_streams(config: dict, kit: Kit, measure: Callable) -> object:
    """``measure(streams, prepared)`` with the configuration's call prepared on new streams, cleaned up after."""
    call = catalog()[config["call"]]
    with Streams(config["spin_stream"] == "blocking") as streams:
        prepared = call.prepare(kit, placement_stream(config["placement"], streams.spinning, streams.other))
        measured = measure(streams, prepared)
        prepared.cleanup()
    return measured


def idle_ms(streams: Streams, prepared) -> float:
    """The call's host time with nothing running."""
    prepared.arm()
    ms, _ = host_interval(prepared.call)
    runtime.deviceSynchronize()
    return ms


def run_each(configs: Sequence[dict], context: Context, measure_one: Callable) -> Iterator[dict]:
    """``measure_one(config, kit, watch)`` for each configuration; a call that fails is a failed row with its
    error, and the others go on."""
    watch = SpinWatch()
    with Kit() as kit:
        for config in configs:
            try:
                yield measure_one(config, kit, watch)
            except Exception as error:  # the runtime's refusal of one call must not end the others
                runtime.deviceSynchronize()
                yield {**config, "status": Status.FAILED, "error": f"{type(error).__name__}: {error}"}
