"""bench's pytest plugin: fail a test when a region of code waits for the GPU, naming the lines that waited, or when
its copies (or its NCCL communication) do not hide behind its kernels.

    def test_training_step_never_waits(assert_async):
        with assert_async():
            step(batch)

``assert_async`` holds the GPU (:mod:`bench.usercode.hold`) while a watcher finds where the region waits
(:mod:`bench.usercode.watcher`); ``assert_overlap`` traces the region (:mod:`bench.usercode.trace`). Without a GPU a
test is skipped. Registered through the ``pytest11`` entry point, :mod:`bench.pytest_plugin`, which gives these names;
it imports nothing CUDA until a test uses it. The fixtures' options and baselines: docs/usage.md, docs/trace.md,
docs/ci.md.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench.usercode.syncs.checks import WaitedForGpu, check_waits, gate_waits
from bench.usercode.syncs.result import DEFAULT_SETTLE_MS


@contextmanager
def assert_async(stream=None, timeout_s: float = 1.0, settle_ms: float = DEFAULT_SETTLE_MS,
                 max_waits: int = 0, baseline: str | Path | None = None,
                 update_baseline: bool = False) -> Iterator[None]:
    """Fail (:class:`WaitedForGpu`) if the block waits for the GPU more than ``max_waits`` times (by default, at
    all), naming the line of every wait: for work on any stream (the default), or only for work queued on
    ``stream``. A call that stands still ``settle_ms`` under the hold counts as waiting; a wait inside
    ``bench.allow_waits(...)`` never counts. With ``baseline`` (a syncs baseline file), fail only on a waiting place
    it lacks or more waits than it allows (``update_baseline``: write it instead, from this run's waits). Skips the
    test where no GPU is usable."""
    if isinstance(max_waits, bool) or not isinstance(max_waits, int) or max_waits < 0:
        raise ValueError(f"max_waits must be a whole number of at least 0, not {max_waits!r}")
    if baseline is not None and stream is not None:
        raise ValueError("a baseline gates waits by line: it needs the device-wide hold, not stream=")
    skip_without_gpu()
    if stream is not None:
        with _gated(stream, timeout_s, max_waits):
            yield
        return
    from bench.usercode.syncs.run import held_region

    with held_region(settle_ms, entry=sys._getframe(2).f_back) as region:
        yield
    if baseline is None:
        check_waits(region.waits, max_waits)
    else:
        gate_waits(region.waits, Path(baseline), update_baseline, settle_ms)


@contextmanager
def _gated(stream, timeout_s: float, max_waits: int) -> Iterator[None]:
    """The old meaning: a one-thread gate holds ``stream``; the region waited if the gate's watchdog released it."""
    from bench.platform.cuda import runtime
    from bench.measure.memory import StreamRef
    from bench.timing import Gate
    from bench.usercode.probe import stream_handle

    gate = Gate(timeout_s)
    gate.close(StreamRef(stream_handle(stream)))
    started = time.perf_counter()
    try:
        yield
    finally:
        held_ms = (time.perf_counter() - started) * 1e3
        waited = gate.expired()
        gate.open()
        runtime.deviceSynchronize()
    if waited and not max_waits:  # the gate tells one wait at most
        raise WaitedForGpu(f"the region waited for the GPU: it held the host {held_ms:.0f} ms and returned only "
                           f"after the gate holding the stream was released by its {timeout_s:g} s watchdog")


class DidNotOverlap(AssertionError):
    """The traced region's copies or communication hid less behind its kernels, or it ran further from its bound,
    than required."""


@contextmanager
def assert_overlap(min_hidden: float | None = None, min_efficiency: float | None = None,
                   min_comm_hidden: float | None = None, baseline: str | Path | None = None,
                   update_baseline: bool = False) -> Iterator[None]:
    """Trace one run of the block (:func:`bench.tracing`) and fail unless at least ``min_hidden`` of its H2D and D2H
    copy time ran while a kernel or memset ran, with ``min_efficiency`` it took at most bound / ``min_efficiency``,
    and with ``min_comm_hidden`` at least that share of its communication (NCCL's kernels) ran while compute ran on
    the same GPU (HTA's overlap: in a DDP step, its gradient all-reduces behind the backward pass). The failure gives
    the numbers and the copies exposed longest, with the lines that made them. A region without copies fails a
    ``min_hidden``, one without NCCL kernels a ``min_comm_hidden``: there is nothing to hide. With ``baseline`` (a
    trace file), also fail on a new host wait, a copy that became pageable, a new idle gap after a wait or streams
    that serialize (:mod:`bench.usercode.trace.regressions`; ``update_baseline``: write it instead). Skipped without
    a GPU or CUPTI."""
    from bench.usercode.activity import TraceUnavailable
    from bench.usercode.trace.run import tracing

    for name, value in (("min_hidden", min_hidden), ("min_efficiency", min_efficiency),
                        ("min_comm_hidden", min_comm_hidden)):
        if value is not None and not 0 <= value <= 1:
            raise ValueError(f"{name} must be between 0 and 1")
    skip_without_gpu()
    try:
        with tracing(bound=min_efficiency is not None) as traced:
            yield
    except TraceUnavailable as error:  # no CUPTI, or a profiler holds it: as without a GPU
        pytest.skip(str(error))
    check_overlap(traced.result, min_hidden, min_efficiency, min_comm_hidden)
    if baseline is not None:
        gate_trace(traced.result, Path(baseline), update_baseline)


def gate_trace(result, path: Path, update: bool, target: str = "") -> None:
    """A trace (one run's, :func:`bench.tracing`'s) against the trace baseline at ``path``: :class:`DidNotOverlap`
    naming each regression by line or stream; with ``update``, the baseline written from it instead."""
    from bench.platform.cuda import runtime
    from bench.platform.env import gpu_environment
    from bench.usercode.trace.compare import read
    from bench.usercode.trace.files import save
    from bench.usercode.trace.gate import regressions_of, text

    earlier = read(path) if path.exists() else None
    held = sorted(set(earlier["target"].astype(str))) if earlier is not None else []
    target = target or (held[0] if len(held) == 1 else path.stem)  # a file of one trace: whatever it named it
    if held and held != [target]:
        raise DidNotOverlap(f"{path} holds the traces of {', '.join(held[:5])}, not only of {target}: give this "
                            "block a baseline file of its own")
    environment = gpu_environment(runtime.getDevice())
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        written = save([(target, result)], environment, path.with_name(f".{path.stem}.new.parquet"))
        os.replace(written, path)  # the test's own baseline, written again: whole or not at all
        return
    if not held:
        raise DidNotOverlap(f"no trace baseline yet at {path}: --bench-update-baseline writes it")
    found = regressions_of(earlier, target, result, environment)
    if found:
        raise DidNotOverlap(text(found, target, str(path)))


def check_overlap(result, min_hidden: float | None = None, min_efficiency: float | None = None,
                  min_comm_hidden: float | None = None) -> None:
    """:class:`DidNotOverlap` unless the trace ``result`` (a :class:`bench.TraceResult`) meets every share given."""
    problems = []
    if min_hidden is not None and (result.hidden is None or result.hidden < min_hidden):
        shown = "no H2D or D2H copies ran" if result.hidden is None else f"{result.hidden:.0%} of its copy time"
        problems.append(f"copies hidden behind kernels: {shown} (at least {min_hidden:.0%} required)")
    if min_efficiency is not None and (result.efficiency is None or result.efficiency < min_efficiency):
        shown = "no bound" if result.efficiency is None else f"{result.efficiency:.0%} of its bound"
        problems.append(f"ran at {shown} (at least {min_efficiency:.0%} required)")
    if min_comm_hidden is not None and (result.comm_hidden is None or result.comm_hidden < min_comm_hidden):
        shown = ("no NCCL kernels ran" if result.comm_hidden is None else
                 f"{result.comm_hidden:.0%} of its {result.whole.comm_ms:.3f} ms, {result.comm_exposed_ms:.3f} ms "
                 "exposed")
        gpus = "; ".join(f"GPU {device}: {figures.comm_hidden:.0%}" for device, figures in result.gpus.items()
                         if figures.comm_hidden is not None)
        problems.append(f"communication hidden behind compute: {shown} (at least {min_comm_hidden:.0%} required)"
                        + (f" [{gpus}]" if len(result.gpus) > 1 and gpus else ""))
    if problems:
        worst = []
        for activity, exposed in result.worst_copies():
            line = result.line_of(activity)
            worst.append(f"{activity.op} {activity.bytes} bytes ({activity.host_memory}) exposed {exposed:.3f} ms"
                         + (f" at {line}" if line else ""))
        bound = "not measured" if result.bound_ms is None else f"{result.bound_ms:.3f} ms"
        raise DidNotOverlap("; ".join(problems) + f". Makespan {result.makespan_ms:.3f} ms, bound {bound}. Copies "
                            "exposed longest: " + ("; ".join(worst) or "none"))


def skip_without_gpu() -> None:
    """Skip the running test where no GPU is usable, saying why."""
    from bench.platform.env import gpu_skip_reason

    reason = gpu_skip_reason()
    if reason:
        pytest.skip(reason)


def pytest_addoption(parser) -> None:
    group = parser.getgroup("bench", "bench: waits for the GPU, and overlap")
    group.addoption("--bench-baseline", metavar="DIR", default=None,
                    help="gate each test's assert_async and assert_overlap blocks against their baselines in DIR "
                         "(a file per test and block): fail on a new waiting place or more waits, a new host wait, "
                         "a copy that became pageable, a new idle gap after a wait or streams that serialize")
    group.addoption("--bench-update-baseline", action="store_true",
                    help="with --bench-baseline: write each test's baselines from this run")


def pytest_configure(config) -> None:
    directory = config.getoption("--bench-baseline")
    if config.getoption("--bench-update-baseline") and directory is None:
        raise pytest.UsageError("--bench-update-baseline writes the baselines of --bench-baseline DIR: name DIR")
    if directory is not None:  # where pytest started: a test that changes directory keeps its baselines
        config.option.bench_baseline = str(Path(directory).resolve())


def baseline_path(directory: Path, test_id: str, block: int) -> Path:
    """Where a test's ``block``-th ``assert_async`` keeps its baseline: its id, made a file name, and a digest of it
    (ids differing only in characters a file name cannot hold stay apart)."""
    import hashlib

    name = "".join(character if character.isalnum() or character in "._-" else "_" for character in test_id)
    digest = hashlib.sha256(test_id.encode()).hexdigest()[:10]
    return directory / f"{name[-150:]}-{digest}{'' if block == 1 else f'-{block}'}.json"


@pytest.fixture(name="assert_async")
def assert_async_fixture(request):
    """:func:`assert_async`, as a fixture: ``with assert_async(): ...``; skips the test where no GPU is usable. With
    ``--bench-baseline DIR``, each block is gated against its baseline there (:func:`baseline_path`), but one that
    asks for another check (``stream=``, ``max_waits=``, its own ``baseline=``)."""
    def other(args: tuple, kwargs: dict) -> bool:
        return (args[:1] or (kwargs.get("stream"),))[0] is not None or bool({"max_waits", "baseline"} & set(kwargs))

    return _per_block(request, assert_async, ".json", other)


@pytest.fixture(name="assert_overlap")
def assert_overlap_fixture(request):
    """:func:`assert_overlap`, as a fixture; skips the test where no GPU is usable. With ``--bench-baseline DIR``,
    each block is also gated against its trace baseline there (a file per test and block), but one given its own
    ``baseline=``."""
    return _per_block(request, assert_overlap, ".parquet", lambda args, kwargs: "baseline" in kwargs)


def _per_block(request, check, suffix: str, other):
    """``check`` as a test's fixture gives it; with ``--bench-baseline DIR``, each block of the test gated against a
    baseline of its own there (:func:`baseline_path`, ending in ``suffix``), but a block that ``other(args,
    kwargs)`` says asks for another check."""
    skip_without_gpu()
    directory = request.config.getoption("--bench-baseline")
    if directory is None:
        return check
    update, blocks = request.config.getoption("--bench-update-baseline"), itertools.count(1)

    def against_baseline(*args, **kwargs):
        if other(args, kwargs):
            return check(*args, **kwargs)
        path = baseline_path(Path(directory), request.node.nodeid, next(blocks)).with_suffix(suffix)
        return check(*args, baseline=path, update_baseline=update, **kwargs)

    return against_baseline
