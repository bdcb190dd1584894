"""What the GPU tests share: an experiment's rows measured in this process under a short stop rule, checked against
the suite's schema as the sweep would write them, typed."""

import pandas as pd

import synthetic


def quick_context(**changes):
    """Every purpose under one short rule (``changes`` applied); a purpose not named falls back to ``default``."""
    from bench.timing import Context, StopRule

    rule = StopRule(min_samples=5, time_cap_s=0.1).replace(**changes)
    return Context({"default": rule, "stage": rule})


def rows_of(name: str, configs, context=None) -> pd.DataFrame:
    """An experiment's rows, each checked against the suite's schema (what the sweep would write), typed."""
    from bench.results import store
    from bench.experiments import registry
    from bench.results.schema import RowCheck

    rows = list(registry()[name].measure(configs, context or quick_context()))
    schema = synthetic.suite()
    check = RowCheck(schema)
    for row in rows:
        check({"experiment": name, **{key: value for key, value in row.items() if not key.startswith("_")}})
    return store.typed(pd.DataFrame(rows), schema)


def forked_state() -> dict:
    """In a process forked from the sweep's fork server: was the CUDA driver untouched, numba-cuda's target built,
    and does a numba-cuda kernel (the gate) then run on a context of this process's own?"""
    import sys

    from numba.cuda.cudadrv.driver import driver

    untouched = not driver.is_initialized
    built = "numba.cuda.np.arraymath" in sys.modules  # imported by the target's registries
    from bench.platform.cuda import cupy
    from bench.platform.env import use_device
    from bench.timing import Gate

    use_device(0)
    stream = cupy.cuda.Stream(non_blocking=True)
    gate = Gate(1.0)
    gate.close(stream)
    gate.open()
    stream.synchronize()
    return {"driver untouched": untouched, "target built": built, "gate ran": True}
