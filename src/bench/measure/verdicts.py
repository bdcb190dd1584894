"""Verdicts on a call made while spin kernels run, and repeating it until they settle.

For the host, a call made while one spin runs (:meth:`bench.timing.SpinWatch.call_during_spin`):
``waits-for-device`` when the spin had ended when the call returned and the call took at least half of what was left
of it (``unclear`` when it took less); ``own-work`` when the spin still ran but the call took ``OWN_WORK_MS`` or more;
``returns`` when it took less. For the device, a call between two spins on two streams
(:meth:`bench.timing.SpinWatch.call_between_spins`): ``overlaps`` when they ran together for at least half a spin,
``serializes`` when the second started only after the first ended, ``partial`` in between. A call repeats until
``MIN_REPEATS`` verdicts agree (``DEVICE_MIN_REPEATS`` for the device's), or ``MAX_REPEATS`` were made; its verdict is
the most common one. The method: docs/methodology.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.timing import CallDuringSpin, SpinPair, Samples, Summary
from bench.platform.vocabulary import SPIN_MS, DeviceVerdict, HostVerdict, StopReason

OWN_WORK_MS = 1.0  # well above what returning calls cost (≤ 0.3 ms on the H200), well below a 64 MiB copy
MIN_REPEATS = 3  # repeats that must agree (calls between two spins, twice as long, need DEVICE_MIN_REPEATS)
MAX_REPEATS = 5
HOST_VERDICTS = tuple(HostVerdict)
DEVICE_VERDICTS = tuple(DeviceVerdict)
DEVICE_MIN_REPEATS = 2
HOST_ORDER = (HostVerdict.UNCLEAR, *HOST_VERDICTS[:3])  # ties go to the verdict later in the order
SPIN_METRIC = "host time of the call while a kernel runs"


def classify(host_ms: float, spin_running: bool, spin_left_ms: float) -> str:
    """The host verdict of one repeat (see the module docstring)."""
    if not spin_running:
        return HostVerdict.WAITS_FOR_DEVICE if host_ms >= 0.5 * spin_left_ms else HostVerdict.UNCLEAR
    return HostVerdict.OWN_WORK if host_ms >= OWN_WORK_MS else HostVerdict.RETURNS


def classify_pair(first: tuple[float, float], second: tuple[float, float], spin_ms: float) -> str:
    """The device verdict from the two kernels' (start, end) in ms."""
    overlap = min(first[1], second[1]) - max(first[0], second[0])
    if overlap >= 0.5 * spin_ms:
        return DeviceVerdict.OVERLAPS
    if second[0] >= first[1] - 0.01 * spin_ms:
        return DeviceVerdict.SERIALIZES
    return DeviceVerdict.PARTIAL


def consensus(verdicts: Sequence[str], order: Sequence[str] = HOST_ORDER) -> tuple[str, bool]:
    """The most common verdict (ties go to the one later in ``order``) and whether all agreed."""
    counts = Counter(verdicts)
    verdict = max(counts, key=lambda verdict: (counts[verdict], order.index(verdict)))
    return verdict, len(counts) == 1


def settled(verdicts: Sequence[str], minimum: int = MIN_REPEATS) -> bool:
    """Enough repeats: ``minimum`` that all agree, or ``MAX_REPEATS`` in all."""
    return len(verdicts) >= MAX_REPEATS or (len(verdicts) >= minimum and len(set(verdicts)) == 1)


@dataclass(frozen=True)
class Repeats:
    """One call measured until its verdicts settled: each repeat's measurement and verdict, and the outcome."""

    seen: list  # one bench.timing.CallDuringSpin or SpinPair per repeat
    verdicts: list[str]
    verdict: str
    stable: bool

    def samples(self, values: Sequence[float], unit: str, clock: str, metric: str) -> Samples:
        """Samples of the repeats: converged when they agreed."""
        reason = StopReason.CONVERGED if self.stable else StopReason.MAX_SAMPLES
        return Samples(list(values), unit, clock, metric, reason)


def host_verdict(seen: CallDuringSpin) -> str:
    return classify(seen.host_ms, seen.spin_running, seen.spin_left_ms)


def repeat_until_settled(once: Callable[[], object], judge: Callable[[object], str], minimum: int = MIN_REPEATS,
                         order: Sequence[str] = HOST_ORDER) -> Repeats:
    """``once()`` (one measurement) until :func:`settled`; ``judge`` gives each one's verdict."""
    seen, verdicts = [], []
    while not settled(verdicts, minimum):
        seen.append(once())
        verdicts.append(judge(seen[-1]))
    verdict, stable = consensus(verdicts, order)
    return Repeats(seen, verdicts, verdict, stable)


def repeat_between_spins(once: Callable[[], SpinPair], spin_ms: float) -> Repeats:
    """``once()`` (a call between two spins of ``spin_ms``) until the device verdicts settle."""
    return repeat_until_settled(once, lambda pair: classify_pair(pair.first, pair.second, spin_ms),
                                DEVICE_MIN_REPEATS, DEVICE_VERDICTS)


def host_columns(repeats: Repeats) -> dict:
    """The columns of a call's repeats with a spin running: host time, what was left of the spin, verdicts."""
    return {"host_ms": Summary.of([seen.host_ms for seen in repeats.seen]).median,
            "spin_left_ms": Summary.of([seen.spin_left_ms for seen in repeats.seen]).median,
            "verdicts": repeats.verdicts, "verdict": repeats.verdict, "stable": repeats.stable}


def pair_columns(repeats: Repeats) -> dict:
    """The columns of a call's repeats between two spins: overlap, host time, whether the call held the host,
    verdicts."""
    waited = [pair.host_waited for pair in repeats.seen]
    return {"overlap_ms": Summary.of([pair.overlap_ms for pair in repeats.seen]).median,
            "host_ms": Summary.of([pair.host_ms for pair in repeats.seen]).median,
            "host_waited": sum(waited) > len(waited) / 2, "verdicts": repeats.verdicts, "verdict": repeats.verdict,
            "stable": repeats.stable}


def spin_for(idle_ms: float) -> float:
    """A spin long enough that a call's own work (``idle_ms``, its host time with nothing running) ends well before
    it does: ``SPIN_MS``, or four times the call, in 5 ms steps."""
    return float(max(SPIN_MS, 5 * round(4 * idle_ms / 5 + 0.5)))
