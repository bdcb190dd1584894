"""Experiments without a GPU, for tests of the runner (fault isolation, interruption, resume); the GPU is
:mod:`fake_gpu`'s.

Everything here is module-level (functions, ``functools.partial`` of them), because an isolated sweep pickles the
experiment to a child process, which imports this module to unpickle it (tests/ is on its path).
"""

from __future__ import annotations

import dataclasses
import os
import time
from functools import partial
from pathlib import Path

from bench.experiments import Accuracy, Cost, Experiment, Processes, Sweeps
from bench.results.schema import FLOAT, INT, TEXT, column
from bench.timing import Floor, Samples

N = tuple(range(5))
STICKY_ERROR = "CUDARuntimeError: cudaErrorIllegalAddress: an illegal memory access was encountered"
MEMORY_ERROR = "CUDARuntimeError: cudaErrorMemoryAllocation: out of memory"
BRACKETED_ERROR = 'torch: pip install "cuda-sync-bench[torch]" [/x]'  # words that rich would take for markup


def sample_columns() -> dict:
    return Samples([1.0, 1.1, 0.9], "ms", "gpu", "fake time", "converged").columns()


def rows(configs, context, fail_after=None, how=None, pause_s=0.0, extra=None):
    """One ok row per configuration, until the ``fail_after``-th: then crash (``how="crash"``) or raise ``how``."""
    for index, config in enumerate(configs):
        if index == fail_after:
            if how == "crash":
                os._exit(3)  # what a process killed by a fault looks like from outside
            if how == "interrupt":
                raise KeyboardInterrupt
            raise RuntimeError(how)
        time.sleep(pause_s)
        yield {**config, **sample_columns(), "status": "ok", "error": "", **(extra or {})}


def orphaning_rows(configs, context, folder: str = ""):
    """One row, then the process dies while a process it forked keeps the pipe to the parent open: until the file
    ``released`` appears in ``folder`` (the test makes it once it heard of the death), else for 30 s, after which it
    leaves the file ``timed-out`` there; without a folder, for 3 s."""
    for index, config in enumerate(configs):
        if index == 1:
            if os.fork() == 0:
                if not folder:
                    time.sleep(3.0)
                    os._exit(0)
                deadline = time.monotonic() + 30.0
                while not (Path(folder) / "released").exists():
                    if time.monotonic() > deadline:
                        (Path(folder) / "timed-out").touch()
                        break
                    time.sleep(0.01)
                os._exit(0)
            os._exit(4)
        yield {**config, **sample_columns(), "status": "ok", "error": ""}


def rule_rows(configs, context):
    """Rows that record the stop rules the harness handed the experiment."""
    for config in configs:
        yield {**config, **sample_columns(), "status": "ok", "error": "", "note": (
            f"default={context.rule().min_samples},stage={context.rule('stage').min_samples}")}


def set_mode(mode: str, device: int) -> None:
    os.environ["BENCH_FAKE_MODE"] = mode


def mode_rows(configs, context):
    """Rows that say which process they came from and what its hook set; mode 'b' crashes after its first row."""
    for index, config in enumerate(configs):
        if config["mode"] == "b" and index == 1:
            os._exit(5)
        yield {**config, **sample_columns(), "status": "ok", "error": "",
               "note": f"{os.environ.get('BENCH_FAKE_MODE')}:{os.getpid()}"}


def bad_rows(configs, context):
    """The second row does not fit the schema: a text in an integer column, then an undeclared column."""
    for index, config in enumerate(configs):
        row = {**config, **sample_columns(), "status": "ok", "error": ""}
        if index == 1:
            row["count"] = "many"
        if index == 3:
            row["undeclared"] = 1.0
        yield row


def tabled_rows(configs, context):
    """Rows with side-table entries: a declared table and one nobody declared (dropped)."""
    for config in configs:
        yield {**config, **sample_columns(), "status": "ok", "error": "",
               "_timeline": [{"stream": 0, "chunk": 0, "op": "H2D", "start_ms": 0.0, "end_ms": 1.0}],
               "_undeclared": [{"x": 1}]}


def capped_rows(configs, context):
    """Rows that each sample host sleeps until the stop rule's time cap, as a measurement that never converges."""
    for config in configs:
        samples = context.host(lambda: time.sleep(0.002), metric="a sleep", unit="ms")
        yield {**config, **samples.columns(), "status": "ok", "error": "", "value": context.rule().time_cap_s}


def a_third_of_the_cap(config, rule) -> float:
    """A time model three times too optimistic for :func:`capped_rows`."""
    return rule.time_cap_s / 3


def seconds(config, rule) -> float:
    return 0.01


def no_memory(configs):
    return 0, 0


def huge_memory(configs):
    return 1 << 50, 0


COLUMNS = (column("n", INT, "index"), column("count", INT, "a count"), column("note", TEXT, "a note"),
           column("value", FLOAT, "a value"))


PARTS = {"sweeps": Sweeps, "cost": Cost, "accuracy": Accuracy, "processes": Processes}  # Experiment's parts


def experiment(name: str, measure, **changes) -> Experiment:
    """A fake experiment of one axis ``n``; ``changes``: fields of the experiment or of one of its parts, by name
    (``own_gpu=True`` is its processes')."""
    owner = {item.name: part for part, record in PARTS.items() for item in dataclasses.fields(record)}
    parts = {"sweeps": {"size_axis": ""}, "cost": {"seconds": seconds, "memory_needed": no_memory}, "accuracy": {},
             "processes": {}}
    fields = {"description": name, "axes": {"n": N}, "columns": COLUMNS}
    for key, value in changes.items():
        (parts[owner[key]] if key in owner else fields)[key] = value
    return Experiment(name=name, measure=measure, **fields,
                      **{part: PARTS[part](**values) for part, values in parts.items()})


FINE = experiment("fine", rows)
CRASHING = experiment("crashing", partial(rows, fail_after=2, how="crash"))
STICKY = experiment("sticky", partial(rows, fail_after=2, how=STICKY_ERROR))
BRACKETED = experiment("bracketed", partial(rows, fail_after=0, how=BRACKETED_ERROR))
OUT_OF_MEMORY = experiment("out-of-memory", partial(rows, fail_after=1, how=MEMORY_ERROR))
SLOW = experiment("slow", partial(rows, pause_s=0.3))
BAD_ROWS = experiment("bad-rows", bad_rows)
RULES = experiment("rules", rule_rows, stop_rules={"default": {"min_samples": 3}, "stage": {"min_samples": 7}})
CAPPED = experiment("capped", capped_rows, axes={"n": tuple(range(12))}, seconds=a_third_of_the_cap,
                    stop_rules={"default": {"time_cap_s": 0.1, "target_relerr": 1e-12, "min_samples": 6}},
                    floor=Floor(min_samples=6))
HUNGRY = experiment("hungry", rows, memory_needed=huge_memory)
INTERRUPTED = experiment("interrupted", partial(rows, fail_after=2, how="interrupt"))
INTERRUPTED_AT_ONCE = experiment("interrupted-at-once", partial(rows, fail_after=0, how="interrupt"))
PER_MODE = experiment("per-mode", mode_rows, axes={"mode": ("a", "b", "c"), "n": (0, 1)},
                      columns=(column("mode", TEXT, "a process each"), *COLUMNS), process_axis="mode",
                      before_cuda=set_mode)
# A side table as the overlap experiment's timeline, keyed by one of its axes (the experiment declares it: the store
# knows the tables of the experiments the sweep hands it).
TIMELINE = (column("stream", INT, "stream index"), column("chunk", INT, "chunk index"),
            column("op", TEXT, "the operation"), column("start_ms", FLOAT, "start"), column("end_ms", FLOAT, "end"))
TABLED = experiment("tabled", tabled_rows, axes={"streams": (1, 2)}, columns=(column("streams", INT, "streams"),),
                    tables={"timeline": TIMELINE})


def touching_rows(configs, context, directory: str):
    """Rows, each leaving a file named after its process and configuration in ``directory``."""
    for config in configs:
        (Path(directory) / f"{os.getpid()}-{config['n']}").touch()
        yield {**config, **sample_columns(), "status": "ok", "error": ""}


def touch_warm(directory: str, configs, shard: int, shards: int) -> None:
    """A warm hook: leaves a file named after its process, shard and the configurations it was handed in
    ``directory``."""
    (Path(directory) / f"{os.getpid()}-{shard}-{shards}-{len(configs)}").touch()


def touch_ahead(configs, directory: str) -> None:
    """An ahead hook: leaves a file named after its process in ``directory``."""
    (Path(directory) / f"ahead-{os.getpid()}").touch()


def ahead_seen(directory: str, wait_s: float = 60.0) -> bool:
    """Whether an ahead hook left its file in ``directory``, waiting for it up to ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while not any(Path(directory).glob("ahead-*")) and time.monotonic() < deadline:
        time.sleep(0.01)
    return any(Path(directory).glob("ahead-*"))


def waiting_rows(configs, context, directory: str):
    """Rows noting whether another process's ahead hook left its file first (:func:`ahead_seen`)."""
    seen = ahead_seen(directory)
    for config in configs:
        yield {**config, **sample_columns(), "status": "ok", "error": "", "note": f"seen={seen}"}


def pid_rows(configs, context):
    """Rows noting their process."""
    for config in configs:
        yield {**config, **sample_columns(), "status": "ok", "error": "", "note": str(os.getpid())}


def cuda_seen_rows(configs, context):
    """Rows noting how many GPUs CUDA shows the process, and the UUID of its device 0 (needs a GPU)."""
    import cupy

    raw = bytes(cupy.cuda.runtime.getDeviceProperties(0)["uuid"]).hex()
    uuid = f"GPU-{raw[:8]}-{raw[8:12]}-{raw[12:16]}-{raw[16:20]}-{raw[20:]}"
    for config in configs:
        yield {**config, **sample_columns(), "status": "ok", "error": "",
               "note": f"{cupy.cuda.runtime.getDeviceCount()} {uuid}"}


def visible_rows(configs, context):
    """Rows noting the GPUs CUDA was told to show their process."""
    for config in configs:
        yield {**config, **sample_columns(), "status": "ok", "error": "",
               "note": os.environ.get("CUDA_VISIBLE_DEVICES", "(all)")}


def different(config) -> bool:
    return config["a"] != config["b"]


# A multi-GPU experiment: one process over every selected GPU, its device axes filled from --devices.
PAIRS = experiment("pairs", rows, axes={"a": (0, 1), "b": (0, 1)}, valid=different, gpus=2, device_axes=("a", "b"),
                   columns=(column("a", INT, "one GPU"), column("b", INT, "the other"), *COLUMNS))
