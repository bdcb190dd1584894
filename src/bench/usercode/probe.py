"""Does *my* code block? Probe any callable the way the truth tables probe library calls.

    import bench
    result = bench.probe(step, batch)            # the whole GPU held: work on any stream, of any library
    result = bench.probe(step, batch, stream=s)  # or a spin on one stream (CuPy, PyTorch, numba, a handle; 0: legacy)

:func:`probe` holds the GPU (the device-wide hold of :mod:`bench.usercode.hold`, or with ``stream`` a spin kernel on
that stream) for ``spin_ms`` more than twice the call's own time, calls ``fn(*args, **kwargs)`` while it holds, times
the call on the host and reads whether the hold still ran when it returned, until ``repeats`` verdicts agree (at most
five); with ``serialization`` it also makes the call between two spins on two other streams. The GPU is not held inside
a ``bench.allow_waits`` scope of the call's thread. Make the callable repeatable. More: docs/usage.md, docs/syncs.md.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bench.timing import Summary, host_interval
from bench.timing.phases import HOLD_SETUP, WARM_UP, phase
from bench.usercode.defaults import DEFAULT_SPIN_MS
from bench.platform.vocabulary import HostVerdict

if TYPE_CHECKING:
    from bench.timing.spin import CallDuringSpin


@dataclass(frozen=True)
class ProbeResult:
    verdict: str  # returns, own-work or waits-for-device
    host_ms: float  # median host time of the call while the spin ran
    gpu_busy_after: bool  # the spin still ran when the call returned (in most repeats)
    idle_host_ms: float  # the call with nothing running
    stable: bool  # all repeats agreed
    verdicts: list[str] = field(default_factory=list)
    serialization: str | None = None  # overlaps, partial or serializes (None: not checked)
    spin_ms: float = DEFAULT_SPIN_MS
    held: str = "every stream"  # what was held: every stream (the device-wide hold) or one stream
    allowed: tuple[str, ...] = ()  # the reasons of the allow_waits scopes the call entered (not held nor timed)

    @property
    def waited(self) -> bool:
        return self.verdict == HostVerdict.WAITS_FOR_DEVICE

    def _repr_html_(self) -> str:
        from bench.usercode.html import probe_html

        return probe_html(self)

    def __str__(self) -> str:
        what = {HostVerdict.RETURNS: "returned while the GPU was busy",
                HostVerdict.OWN_WORK: "did not wait for the GPU, but took a while of its own",
                HostVerdict.WAITS_FOR_DEVICE: "waited for the GPU"}.get(self.verdict, "could not tell")
        text = (f"{self.verdict}: {what}; held the host {self.host_ms:.3f} ms with a {self.spin_ms:g} ms kernel "
                f"running on {self.held} ({self.idle_host_ms:.3f} ms with nothing running)")
        if not self.stable:
            text += f"; repeats disagreed: {', '.join(self.verdicts)}"
        if self.allowed:
            text += f"; not held inside allow_waits ({'; '.join(self.allowed)})"
        if self.serialization:
            text += f"; kernels on two other streams around it: {self.serialization}"
        return text


def stream_handle(stream) -> int | None:
    """The CUDA handle of a stream given as CuPy, PyTorch or numba-cuda stream, or as an int; None for None."""
    if stream is None or isinstance(stream, int):
        return stream
    for attribute in ("ptr", "cuda_stream"):  # CuPy, PyTorch
        if hasattr(stream, attribute):
            return int(getattr(stream, attribute))
    handle = getattr(stream, "handle", None)  # numba-cuda
    if handle is not None:
        return int(getattr(handle, "value", handle) or 0)
    raise TypeError(f"cannot tell the CUDA stream of {stream!r}; give a CuPy, PyTorch or numba stream or a handle")


class _Unheld:
    """The allow_waits scopes of the probed call: the GPU is let go on entering the outermost and held again on
    leaving it (:func:`bench.usercode.allowance.listening`); ``aside_s`` is the host time from entry to held again.
    A hold (or spin) that had already ended on entering a scope means the call waited before it (``waited``)."""

    def __init__(self, let_go: Callable[[], None], hold_again: Callable[[], None],
                 ended: Callable[[], bool]) -> None:
        self.let_go, self.hold_again, self.ended = let_go, hold_again, ended
        self.reasons: dict[str, None] = {}
        self.depth = 0
        self.entered_s = 0.0
        self.aside_s = 0.0
        self.waited = False

    def entered(self, reason: str) -> None:
        self.reasons[reason] = None
        self.depth += 1
        if self.depth == 1:
            self.entered_s = time.perf_counter()
            self.waited = self.waited or self.ended()  # it waited before the scope: a new hold must not hide that
            self.let_go()

    def left(self) -> None:
        self.depth -= 1
        if self.depth == 0:
            self._held_again()

    def _held_again(self) -> None:
        """Out of the outermost scope: the GPU held again, the time since its entry set aside."""
        self.depth = 0
        self.hold_again()
        self.aside_s += time.perf_counter() - self.entered_s

    def timed(self, during: Callable[[Callable[[], object]], CallDuringSpin],
              call: Callable[[], object]) -> CallDuringSpin:
        """``during(call)`` with the scopes the call enters listened to; its host time less the time set aside (a
        scope still open when it returned: set aside to the return), and not held at its end where it waited before a
        scope."""
        from bench.usercode.allowance import listening

        def listened() -> None:
            with listening(self):
                try:
                    call()
                finally:
                    if self.depth:  # left open (a generator's scope): let go to the end, held again for the verdict
                        self._held_again()

        self.aside_s, self.depth, self.waited = 0.0, 0, False
        result = during(listened)
        return dataclasses.replace(result, host_ms=result.host_ms - self.aside_s * 1e3,
                                   spin_running=result.spin_running and not self.waited)


def outlasting(spin_ms: float, idle_ms: float) -> float:
    """How long to hold: ``spin_ms`` more than twice the call's own time without a hold, so that a call that only
    works on the host (a sleep, a long loop) returns while the GPU is still held, and one that waits cannot."""
    return spin_ms + 2 * idle_ms


def probe(fn: Callable, *args, stream=None, spin_ms: float = DEFAULT_SPIN_MS, repeats: int = 3,
          serialization: bool = True, **kwargs) -> ProbeResult:
    """Whether ``fn(*args, **kwargs)`` returns while the GPU is busy, waits for it, or takes long on its own (see
    the module docstring). Needs a GPU."""
    handle = stream_handle(stream)
    with phase(HOLD_SETUP):  # what the phases inside it do not count: imports, streams, the hold
        return _probed(fn, args, kwargs, handle, spin_ms, repeats, serialization)


def _probed(fn: Callable, args: tuple, kwargs: dict, handle: int | None, spin_ms: float, repeats: int,
            serialization: bool) -> ProbeResult:
    from bench.measure.memory import OwnedStream

    owned = [OwnedStream(blocking=True), OwnedStream(blocking=False), OwnedStream(blocking=False)]
    try:
        return _held(fn, args, kwargs, handle, spin_ms, repeats, serialization, owned)
    finally:
        for stream in owned:
            stream.close()


def _held(fn: Callable, args: tuple, kwargs: dict, handle: int | None, spin_ms: float, repeats: int,
          serialization: bool, owned: list) -> ProbeResult:
    from bench.platform.cuda import runtime
    from bench.measure.memory import StreamRef
    from bench.measure.verdicts import DEVICE_VERDICTS, classify_pair, consensus, host_verdict, repeat_until_settled
    from bench.timing import SpinWatch
    from bench.usercode.hold import in_use

    spinning = owned[0] if not handle else StreamRef(handle)
    call = lambda: fn(*args, **kwargs)  # noqa: E731
    with phase(WARM_UP):  # the first call loads what it needs (a library's handles, its kernels): not its own time
        call()
        runtime.deviceSynchronize()
    idle_ms, _ = host_interval(call)
    runtime.deviceSynchronize()
    spin_ms = outlasting(spin_ms, idle_ms)
    watch = SpinWatch()
    if handle is None:
        hold = in_use()
        unheld = _Unheld(hold.release, lambda: _hold_again(hold, spin_ms), hold.ended)
        during = lambda: unheld.timed(lambda listened: hold.call_during(spin_ms, listened), call)  # noqa: E731
    else:  # a spin cannot be let go: a new one runs from the scope's end, where the first one ended in it
        unheld = _Unheld(lambda: None, lambda: _spin_again(watch, spinning, spin_ms), lambda: not watch.running(0))
        during = lambda: unheld.timed(  # noqa: E731
            lambda listened: watch.call_during_spin(spinning, spin_ms, listened), call)
    with phase("your code, held (the repeats)"):
        measured = repeat_until_settled(during, host_verdict, repeats)
    serializes = None
    if serialization:
        with phase("your code between two spins"):
            pairs = [watch.call_between_spins(owned[1], owned[2], spin_ms, call) for _ in range(2)]
        serializes = consensus([classify_pair(pair.first, pair.second, spin_ms) for pair in pairs],
                               DEVICE_VERDICTS)[0]
    busy = [result.spin_running for result in measured.seen]
    return ProbeResult(measured.verdict, Summary.of([result.host_ms for result in measured.seen]).median,
                       sum(busy) > len(busy) / 2, idle_ms, measured.stable, measured.verdicts, serializes, spin_ms,
                       "every stream" if handle is None else f"stream {handle:#x}", tuple(unheld.reasons))


def _hold_again(holds, hold_ms: float) -> None:
    """A new hold of ``hold_ms``, once it fills the GPU."""
    holds.launch(hold_ms / 1e3)
    holds.wait_full()


def _spin_again(watch, stream, spin_ms: float) -> None:
    """A new spin of ``spin_ms`` on ``stream`` where the first one has ended, once it runs."""
    if not watch.running(0):
        watch.launch(stream, 0, spin_ms)
        watch.wait_started(0)
