"""One step of a training framework's loop, watched as ``bench syncs`` watches a region: the step before it as it is
(how long each line stands still on its own), then the chosen step under the device-wide hold (every line that waits
for the GPU), and, where asked, the step after it traced. The framework's callbacks (:mod:`.lightning`,
:mod:`.transformers`) call :meth:`StepWatch.close_step`, then :meth:`StepWatch.open_step` as each step starts: a step
runs to the next one's start.

The framework's own frames count as the region's code (:func:`bench.usercode.stacks.own_libraries`): a wait in its
loop is named at its line. A step that never ends (an exception the framework does not report) is let go after
``timeout_s``; a held step let go fails a gate, which cannot tell whether it waited.
"""

from __future__ import annotations

import datetime
import sys
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from bench.platform.errors import UsageError
from bench.usercode.syncs.result import DEFAULT_SETTLE_MS, SyncsResult


class StepCallback:
    """What a framework's callback is beside its hooks: the watch of its steps (``FRAMEWORKS``: its libraries), their
    count, and a step's start: the step before it closed and said (logged, saved, judged by ``_said``), then it
    opened. Mixed into the framework's own callback class."""

    FRAMEWORKS: frozenset[str] = frozenset()

    def __init__(self, step: int = 10, trace: bool = False, fail_on_wait: bool = False,
                 baseline: str | Path | None = None, settle_ms: float = DEFAULT_SETTLE_MS,
                 timeout_s: float = 120.0) -> None:
        self.watch = StepWatch(step, self.FRAMEWORKS, trace=trace, fail_on_wait=fail_on_wait, baseline=baseline,
                               settle_ms=settle_ms, timeout_s=timeout_s)
        self.steps = 0

    @property
    def found(self) -> Found:
        """What the watched steps found (``found.syncs``, ``found.trace``, ``found.files``)."""
        return self.watch.found

    def _step_starts(self, said: Callable[[list[str]], None]) -> None:
        """The framework starts its next step: the one before it said first, so that a failed verdict leaves
        nothing open and the next step's trace holds none of bench's work."""
        step, self.steps = self.steps, self.steps + 1
        said(self.watch.close_step())
        self.watch.open_step(step)


@dataclass
class Found:
    """What the watched steps found, and the files written of it."""

    syncs: SyncsResult | None = None
    trace: object | None = None  # a TraceResult
    files: list[Path] = field(default_factory=list)


class StepWatch:
    """Watches step ``step`` (counted from 0 as the framework's hooks report them) and, with ``trace``, traces the
    next. ``frameworks``: the libraries whose frames are the region's code ('lightning', 'transformers')."""

    def __init__(self, step: int, frameworks: frozenset[str], *, trace: bool = False, fail_on_wait: bool = False,
                 baseline: str | Path | None = None, settle_ms: float = DEFAULT_SETTLE_MS, timeout_s: float = 120.0):
        if isinstance(step, bool) or not isinstance(step, int) or step < 2:
            raise UsageError(f"step must be a whole number of at least 2 (a step to warm up, one watched as it is "
                             f"before the held one), not {step!r}")
        self.step, self.frameworks, self.trace = step, frameworks, trace
        self.fail_on_wait, self.settle_ms, self.timeout_s = fail_on_wait, settle_ms, timeout_s
        self.baseline = Path(baseline) if baseline is not None else None
        self.found = Found()
        self._stack: ExitStack | None = None
        self._natural: dict = {}
        self._watcher = None
        self._region = None
        self._traced = None
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._open_step = 0
        self._began = 0.0
        self._took_ms: dict[int, float] = {}  # -1: the step as it is, 0: held (the hold's stops in it)
        self._saved_syncs = self._saved_trace = self._judged = self._unwatched = False
        self._let_go: int | None = None  # the step a timer let go

    @property
    def done(self) -> bool:
        return self.found.syncs is not None and (not self.trace or self.found.trace is not None)

    def close_step(self) -> list[str]:
        """The framework starts another step (or training ended): the watched step open until now ends, and what to
        log of it is returned (lines). A step runs from its start to the next one's: its hooks, its logging and the
        next batch's fetch are in it, as the framework runs them. Log, save and judge it before :meth:`open_step`:
        then neither the next step's trace holds bench's own work nor a failed verdict leaves it open."""
        said = self._close()
        if self._let_go is not None and not said:
            step, self._let_go = self._let_go, None
            if step == self.step:
                self._unwatched = True
                said = [f"bench syncs of step {step}: let go after {self.timeout_s:g} s, the longest a watched step "
                        "may run (timeout_s): what it waited for is not known"]
        return said

    def open_step(self, step: int) -> None:
        """The framework starts step ``step``: watched where it is one of ours."""
        from bench.usercode.stacks import own_libraries

        if step not in (self.step - 1, self.step, self.step + 1) or (step == self.step + 1 and not self.trace):
            return
        stack = ExitStack()
        stack.enter_context(own_libraries(self.frameworks))
        try:
            if step == self.step - 1:
                self._watch_as_it_is(stack)
            elif step == self.step:
                self._hold(stack)
            else:
                from bench.usercode.trace.run import tracing

                self._traced = stack.enter_context(tracing(target=f"step {step}", bound=False))
        except BaseException:
            stack.close()
            raise
        with self._lock:  # a step that never ends lets the GPU go after timeout_s; a late timer closes only its own
            self._stack, self._open_step, self._began = stack, step, time.perf_counter()
            self._timer = threading.Timer(self.timeout_s, self._expire, args=(stack,))
            self._timer.daemon = True
            self._timer.start()

    def _expire(self, stack: ExitStack) -> None:
        with self._lock:
            if self._stack is not stack:
                return
            self._let_go = self._open_step
        self.abandon()

    def _watch_as_it_is(self, stack: ExitStack) -> None:
        from bench.usercode.hold import devices_in_use, synchronize
        from bench.usercode.watcher import Watcher

        synchronize(devices_in_use())
        self._watcher = Watcher(threading.get_ident(), settle_s=self.settle_ms / 1e3).start()
        stack.callback(self._watcher.stop)

    def _hold(self, stack: ExitStack) -> None:
        from bench.usercode.syncs.run import held_region

        # no frame of the framework's hooks is above the step's code (they return before it runs): stacks run whole
        self._region = stack.enter_context(held_region(self.settle_ms, entry=sys._getframe()))

    def _take(self) -> ExitStack | None:
        """The open step's stack, taken (none is open after), its timer cancelled."""
        with self._lock:
            stack, self._stack = self._stack, None
            if self._timer is not None:
                self._timer.cancel()
        return stack

    def _close(self) -> list[str]:
        from bench.usercode.stacks import own_libraries

        stack = self._take()
        if stack is None:
            return []
        step = self._open_step
        with own_libraries(self.frameworks):  # a line is its innermost frame of the step's own code, until all is said
            stack.close()
            self._took_ms[step - self.step] = (time.perf_counter() - self._began) * 1e3
            if step == self.step - 1:
                from bench.usercode.hold import devices_in_use, synchronize

                synchronize(devices_in_use())
                self._natural = dict(self._watcher.dwell.ms)
                return []
            if step == self.step:
                return self._held_step()
            self.found.trace = self._traced.result
            return [f"bench trace of step {step}:", *str(self.found.trace).splitlines()]

    def _held_step(self) -> list[str]:
        from bench.platform.libraries import loaded_versions
        from bench.usercode.syncs.result import places

        waits = self._region.waits
        waited, own = places(waits, self._natural, self.settle_ms)
        self.found.syncs = SyncsResult([p for p in waited if not p.allowed], own, self._took_ms.get(-1, 0.0),
                                       self._took_ms.get(0, 0.0), self.settle_ms,
                                       self._region.watcher.hold.describe(), "", loaded_versions(),
                                       [p for p in waited if p.allowed])
        return [f"bench syncs of step {self.step}: {self.found.syncs}"]

    def verdict(self) -> None:
        """Raise :class:`bench.usercode.syncs.checks.WaitedForGpu` naming the lines where the held step waited
        (outside ``allow_waits``, host work left out) and ``fail_on_wait``, or where it broke ``baseline``."""
        from bench.usercode.stacks import own_libraries
        from bench.usercode.syncs.checks import WaitedForGpu, gate_waits

        found = self.found.syncs
        if self._judged or (found is None and not self._unwatched):
            return
        self._judged = True
        if found is None:  # let go: a gate that cannot tell fails
            if self.baseline is not None or self.fail_on_wait:
                raise WaitedForGpu(f"step {self.step} ran past timeout_s={self.timeout_s:g} s under the hold and was "
                                   "let go: whether it waited is not known (give a larger timeout_s)")
            return
        if self.baseline is not None:
            host_work = {(place.file, place.line) for place in found.own_work}
            with own_libraries(self.frameworks):
                gate_waits([wait for wait in self._region.waits if (wait.line.file, wait.line.line) not in host_work],
                           self.baseline, update=False, settle_ms=self.settle_ms)
        elif self.fail_on_wait and found.places:
            raise WaitedForGpu(f"step {self.step} waited for the GPU: {found}")

    def abandon(self) -> None:
        """Let the GPU go: the step did not end (the framework stopped on an exception, or took too long)."""
        stack = self._take()
        if stack is not None:
            stack.close()

    def save(self, directory: str | Path, rank: int | None = None) -> list[Path]:
        """Write what was found into ``directory`` (the framework's output directory): the syncs text and JSON, the
        trace's text and Perfetto timeline, each named by the step, the rank (of several) and the time; new files,
        never replacing one. What was written before is not written again."""
        from bench.results import writes

        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        stamp = stamp if rank is None else f"rank{rank}-{stamp}"
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        outputs: list[tuple[str, str | bytes]] = []
        if self.found.syncs is not None and not self._saved_syncs:
            self._saved_syncs = True
            outputs += [(f"bench-syncs-step{self.step}-{stamp}.txt", str(self.found.syncs) + "\n"),
                        (f"bench-syncs-step{self.step}-{stamp}.json", self.found.syncs.to_json() + "\n")]
        if self.found.trace is not None and not self._saved_trace:
            from bench.usercode.stacks import own_libraries
            from bench.usercode.trace.perfetto import encoded

            self._saved_trace = True
            with own_libraries(self.frameworks):
                trace_text, timeline = str(self.found.trace) + "\n", encoded(self.found.trace)
            outputs += [(f"bench-trace-step{self.step + 1}-{stamp}.txt", trace_text),
                        (f"bench-trace-step{self.step + 1}-{stamp}.perfetto.json", timeline)]
        for name, content in outputs:
            data = content.encode() if isinstance(content, str) else content
            path = writes.write_file(directory / name, lambda out, data=data: out.write(data), 0o644, new=True)
            self.found.files.append(path)
        return self.found.files[-len(outputs):] if outputs else []
