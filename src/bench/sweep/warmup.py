"""Compiling a fresh machine's kernel caches before measuring: each cold experiment's first configuration under the
quick stop rules in a process of its own (:func:`warm_parts`), a marker file per experiment once it compiled
(:func:`warm_up`).

It imports :mod:`bench.sweep.plan` and :mod:`bench.sweep.processes`; nothing CUDA (the processes measure).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable, Iterator, Sequence

from bench.sweep.plan import Plan, rules_for
from bench.sweep.processes import FailedMessage, Warming, interleaved, isolated
from bench.timing import Stopwatch

WARM_CONTEXT_BYTES = 2 << 30  # device memory a warm-up process may take: its CUDA context and first configuration


def warm_parts(plans: Sequence[Plan]) -> list[tuple[Plan, Warming]]:
    """Each experiment's first configuration under the quick stop rules, in a process of its own, which then runs
    the first shard of the experiment's ``warm`` hook over the plan's configurations; its other shards
    (``Experiment.processes.warm_shards``, never more than the plan has configurations) in processes of their own,
    with no configuration: enough to compile the kernels the plan's processes build (numba-cuda's, CuPy's, Triton's
    and XLA's on-disk caches) on a fresh machine."""
    parts, seen = [], set()
    for item in plans:
        if item.experiment.name in seen or not item.configs:
            continue
        seen.add(item.experiment.name)
        first = dataclasses.replace(item.parts()[0], rules=rules_for(item.experiment, "quick"))
        processes = item.experiment.processes
        shards = 1 if processes.warm is None else min(max(1, processes.warm_shards), len(item.configs))
        parts += [(dataclasses.replace(first, configs=first.configs[:1] if shard == 0 else []),
                   Warming(list(item.configs), shard, shards)) for shard in range(shards)]
    return parts


def warm_up(plans: Sequence[Plan], gpu, environment, device: int, reporter) -> tuple[float, dict[str, float]]:
    """Where the kernel caches are cold for some experiments (no warm marker: ``gpu.warm_markers``), compile their
    kernels at once, a process per experiment and shard of its warm hook (fewer at a time only if the GPU lacks
    :data:`WARM_CONTEXT_BYTES` of free memory for each), before measuring anything: what they measure is dropped.
    Done once per experiment, machine, bench version and GPU architecture; an experiment whose warm-up process failed
    stays cold. Returns the seconds it took (0: everything was warm) and each experiment's own, having told
    ``reporter``."""
    markers = gpu.warm_markers(environment)
    if markers is None:
        return 0.0, {}
    parts = [(part, warming) for part, warming in warm_parts(plans) if not (markers / part.experiment.name).exists()]
    if not parts:
        return 0.0, {}
    watch = Stopwatch()
    child_device = gpu.child_device(device)
    cpus = gpu.child_cpus(environment)
    at_once = max(1, min(len(parts), gpu.free_bytes(environment) // WARM_CONTEXT_BYTES))
    markers.mkdir(parents=True, exist_ok=True)
    failed: dict[str, str] = {}
    each_s: dict[str, float] = {}  # from the warm-up's start until its last process ended
    for start in range(0, len(parts), at_once):
        batch = parts[start:start + at_once]
        sources = [_timed(functools.partial(isolated, part, child_device, cpus, warming=warming),
                          part.experiment.name, watch, each_s) for part, warming in batch]
        for index, message in interleaved(sources):
            if isinstance(message, FailedMessage):
                failed[batch[index][0].experiment.name] = message.why
    for name in dict.fromkeys(part.experiment.name for part, _ in parts):
        if name not in failed:  # a process that failed may not have compiled everything
            (markers / name).touch()
    seconds = watch.seconds()
    each_s = {part.experiment.name: each_s.get(part.experiment.name, 0.0) for part, _ in parts}
    reporter.warmed(seconds, each_s, failed)
    return seconds, each_s


def _timed(source: Callable[[threading.Event], Iterator], name: str, began: Stopwatch,
           each_s: dict[str, float]) -> Callable[[threading.Event], Iterator]:
    """``source``, noting in ``each_s[name]`` when it ended (its process gone), ``began`` counting."""
    def messages(stop: threading.Event) -> Iterator:
        yield from source(stop)
        each_s[name] = max(each_s.get(name, 0.0), began.seconds())

    return messages
