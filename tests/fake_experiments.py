"""Experiments without a GPU, importable by an isolated sweep's child process (tests of fault isolation)."""

import os
import time

import pandas as pd

from bench.experiments import Experiment


def _rows(configs, fail_after=None, how=None, pause_s=0.0):
    for index, config in enumerate(configs):
        if index == fail_after:
            if how == "crash":
                os._exit(3)  # what a process killed by a fault looks like from outside
            raise RuntimeError(how)
        time.sleep(pause_s)
        yield {**config, "samples_ms": [1.0, 1.1, 0.9], "median_ms": 1.0, "status": "ok", "error": ""}


def _experiment(name, run):
    return Experiment(name=name, description=name, axes={"n": tuple(range(5))}, run=run,
                      memory_needed=lambda configs: (0, 0), headline=lambda rows: pd.DataFrame(), size_axis="")


CRASHING = _experiment("crashing", lambda configs, timer: _rows(configs, 2, "crash"))
STICKY = _experiment("sticky", lambda configs, timer: _rows(
    configs, 2, "CUDARuntimeError: cudaErrorIllegalAddress: an illegal memory access was encountered"))
OUT_OF_MEMORY = _experiment("out-of-memory", lambda configs, timer: _rows(
    configs, 1, "CUDARuntimeError: cudaErrorMemoryAllocation: out of memory"))
FINE = _experiment("fine", lambda configs, timer: _rows(configs))
SLOW = _experiment("slow", lambda configs, timer: _rows(configs, pause_s=0.4))
