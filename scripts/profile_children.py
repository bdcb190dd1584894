"""Where each experiment's process spends its time in a sweep: every experiment's plan (``--quick`` unless a mode
is named) runs in a process forked from the sweep's own fork server, under cProfile. Prints, per experiment, the
seconds to ready (GPU selected), to the first row, and to the last row, then the functions with the most cumulative
time (and, with ``--scale S``, the stop rules' time caps scaled by S from the start, as a paced default sweep
scales them), then the functions with the most time of their own. Run it on warm caches (after a sweep) to see
what every sweep pays again. Unlike a sweep, it runs an
experiment's whole plan in one process (no process per ``process_axis`` value, no CPU affinity): a profile, not a
measurement.

    python scripts/profile_children.py [quick|default] [--scale S] [EXPERIMENT ...]
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time

from bench.platform.env import use_device
from bench.sweep import plan as planning
from bench.sweep.processes import _processes

TOP = 25


def _child(sender, experiment, configs, rules, scale: float) -> None:
    import os

    started = time.perf_counter()
    profile = cProfile.Profile()
    profile.enable()
    marks: dict = {"rows": 0}
    try:
        use_device(0)
        marks["ready"] = time.perf_counter() - started
        from bench.timing import Context

        context = Context(rules)
        context.rescale(scale)
        for _row in experiment.measure(configs, context):
            marks["rows"] += 1
            if marks["rows"] == 1:
                marks["first row"] = time.perf_counter() - started
        marks["last row"] = time.perf_counter() - started
    except BaseException as error:  # report, then end like the sweep's child
        marks["error"] = f"{type(error).__name__}: {error}"
    profile.disable()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(TOP)
    own = io.StringIO()
    pstats.Stats(profile, stream=own).sort_stats("tottime").print_stats(TOP // 2)
    text.write("\n".join(own.getvalue().splitlines()[:TOP // 2 + 12]))
    sender.send((marks, text.getvalue()))
    sender.close()
    os._exit(0)


def main(arguments: list[str]) -> None:
    mode = arguments[0] if arguments and arguments[0] in planning.MODES else "quick"
    scale = 1.0
    if "--scale" in arguments:
        at = arguments.index("--scale")
        scale = float(arguments[at + 1])
        arguments = arguments[:at] + arguments[at + 2:]
    names = [name for name in arguments if name not in planning.MODES] or None
    context = _processes()
    for item in planning.make(names, mode=mode):
        if item.experiment.processes.gpus > 1:
            continue
        receiver, sender = context.Pipe(duplex=False)
        forked = time.perf_counter()
        child = context.Process(target=_child, args=(sender, item.experiment, item.configs, item.rules, scale))
        child.start()
        sender.close()
        marks, text = receiver.recv()
        child.join()
        wall = time.perf_counter() - forked
        print(f"== {item.name}: {wall:.2f} s from start() to the end; in the child: "
              + ", ".join(f"{key} {value:.2f} s" if isinstance(value, float) else f"{key} {value}"
                          for key, value in marks.items()))
        print(text)


if __name__ == "__main__":
    main(sys.argv[1:])
