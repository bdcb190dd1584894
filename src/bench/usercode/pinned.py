"""What pinned copies take on this GPU: the reference a trace's bound and its pageable copies are judged against.

Each copy is verified once (poisoned destination, random source) and timed with CUDA events behind the gate
(:class:`bench.timing.Timer`). Sizes above :data:`LARGEST` are measured at that size and scaled by bytes: a copy that
large runs at the link's steady rate. What was measured is kept (:mod:`bench.platform.cache`) under this GPU's UUID, its
driver, bench's code and the sizes: the next trace of the same copies on this machine reads it instead of copying
for seconds again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.platform import cache
from bench.platform.cuda import runtime
from bench.measure.copies import CopyBuffers, mismatch
from bench.measure.pipeline import BOUND_RULE, bound_ms
from bench.timing import MeasurementFailed, StopRule, Timer

LARGEST = 256 << 20
RULE = StopRule(min_samples=10, time_cap_s=1.0)  # the overlap experiment's stage rule: a pageable copy's reference
BOUND = StopRule(**BOUND_RULE)  # the copies in the bound, as the overlap experiment measures its own


@dataclass(frozen=True)
class CopyEngines:
    """The region's copy volume at pinned speed as the bound counts it (fastest samples, ms): each direction while
    the other runs too (``at_once``: two or more copy engines and bytes both ways), else each direction alone."""

    h2d_ms: float
    d2h_ms: float
    engines: int  # asyncEngineCount
    at_once: bool

    def bound_ms(self) -> float:
        """The least time the copies can take: with two or more copy engines the slower direction (at once), else
        one after the other (the overlap experiment's rule, without its kernel)."""
        return bound_ms(0.0, self.h2d_ms, self.d2h_ms, self.h2d_ms, self.d2h_ms, self.engines)


def _scaled(nbytes: int) -> tuple[int, float]:
    measured = min(nbytes, LARGEST)
    return measured, nbytes / measured if measured else 0.0


def _verified(copy, size: int) -> None:
    """Poison, copy once, compare: MeasurementFailed if the data did not arrive."""
    problem = mismatch([copy], size)
    if problem:
        raise MeasurementFailed(f"pinned reference copy: {problem}")


def _timed(copies, sizes: list[int], timer: Timer) -> list[float]:
    """Each (verified) copy's fastest time (ms), all of them enqueued together once per operation."""

    def enqueue(ops: int) -> None:
        for _ in range(ops):
            for copy, size in zip(copies, sizes):
                copy.enqueue(size)

    timing = timer.measure(enqueue, [copy.stream for copy in copies], metric="pinned reference copy")
    return [timing.stream_fastest_ms(index) for index in range(len(copies))]


def this_gpu() -> list[str]:
    """What a kept measurement of the current GPU is keyed by: its UUID (its name and PCI address where CUDA gives
    none) and the driver's version."""
    device = runtime.getDevice()
    properties = runtime.getDeviceProperties(device)
    identity = properties.get("uuid") or f"{properties['name']!r} {runtime.deviceGetPCIBusId(device)}"
    try:
        driver = Path("/proc/driver/nvidia/version").read_text().splitlines()[0]
    except (OSError, IndexError):
        driver = f"CUDA driver {runtime.driverGetVersion()}"
    return [repr(identity), driver]


def _kept(what: str, arguments: tuple, measure: Callable[[], dict]) -> dict:
    """``measure()`` (a JSON object) of this GPU, driver and code, read from the cache where it was measured
    before."""
    return cache.kept_json(cache.key("pinned", [what, repr(arguments), repr((RULE, BOUND)), *this_gpu()]), measure)


def copy_engines(h2d_bytes: int, d2h_bytes: int) -> CopyEngines:
    """The pinned times of ``h2d_bytes`` up and ``d2h_bytes`` down that the bound counts: at once with two or more
    copy engines (and bytes both ways), else each alone; under the bound's rule (:data:`BOUND`). Kept per GPU,
    driver and code (:func:`_kept`)."""
    return CopyEngines(**_kept("copy engines", (h2d_bytes, d2h_bytes),
                               lambda: asdict(_measured_engines(h2d_bytes, d2h_bytes))))


def _measured_engines(h2d_bytes: int, d2h_bytes: int) -> CopyEngines:
    engines = int(runtime.getDeviceProperties(runtime.getDevice())["asyncEngineCount"])
    scale = max(1.0, max(h2d_bytes, d2h_bytes) / LARGEST)  # both directions shrunk alike: their proportion kept
    up, down = round(h2d_bytes / scale), round(d2h_bytes / scale)
    up_scale, down_scale = (h2d_bytes / up if up else 0.0), (d2h_bytes / down if down else 0.0)
    timer = Timer(BOUND)
    at_once = bool(up and down and engines >= 2)
    with CopyBuffers("pinned", max(up, down, 1)) as buffers:
        h2d, d2h = buffers.copies("BIDIR")
        for copy, size in ((h2d, up), (d2h, down)):
            if size:
                _verified(copy, size)
        if at_once:
            up_ms, down_ms = _timed([h2d, d2h], [up, down], timer)
        else:
            up_ms = _timed([h2d], [up], timer)[0] if up else 0.0
            down_ms = _timed([d2h], [down], timer)[0] if down else 0.0
    return CopyEngines(up_ms * up_scale, down_ms * down_scale, engines, at_once)


def pinned_copy_ms(direction: str, nbytes: int) -> float:
    """The median time of one pinned ``direction`` (H2D or D2H) copy of ``nbytes``; kept per GPU, driver and code
    (:func:`_kept`)."""
    return _kept("pinned copy", (direction, nbytes), lambda: {"ms": _measured_copy_ms(direction, nbytes)})["ms"]


def _measured_copy_ms(direction: str, nbytes: int) -> float:
    measured, scale = _scaled(nbytes)
    timer = Timer(RULE)
    with CopyBuffers("pinned", measured) as buffers:
        (copy,) = buffers.copies(direction)
        _verified(copy, measured)
        timing = timer.measure(lambda ops: [copy.enqueue(measured) for _ in range(ops)], [copy.stream],
                               metric="pinned reference copy")
    return timing.median_ms * scale
