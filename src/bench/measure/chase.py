"""A pointer chase: one thread following a random chain of dependent loads, so every load waits for the one before
and no prefetcher can guess the next address. The chain is checked once (the kernel must end where the host says),
then launches of ``STEPS`` loads are timed."""

from __future__ import annotations

import numpy as np

from bench.platform.cuda import on_device
from bench.timing import MeasurementFailed
from bench.platform.vocabulary import CHASE_STEPS, Status

SLOT_BYTES = 256
STEPS = CHASE_STEPS  # the views name it too
CHASE_METRIC = f"GPU time of {STEPS} dependent loads"


def pointer_chain(nbytes: int, seed: int = 0) -> np.ndarray:
    """The chain as uint64 words: slot ``i`` starts with the byte offset of the slot after it, in one random cycle
    through every slot."""
    slots = nbytes // SLOT_BYTES
    if slots < 2:
        raise ValueError(f"a chain needs at least two {SLOT_BYTES}-byte slots")
    order = np.random.default_rng(seed).permutation(slots)
    order = np.concatenate([[0], order[order != 0]])  # the chase starts at slot 0
    words = np.zeros(nbytes // 8, dtype=np.uint64)
    following = np.roll(order, -1)
    words[order * (SLOT_BYTES // 8)] = following.astype(np.uint64) * SLOT_BYTES
    return words


def chain_end(words: np.ndarray, steps: int) -> int:
    """Where following ``steps`` links from offset 0 ends (the host's answer)."""
    offset = 0
    for _ in range(steps):
        offset = int(words[offset // 8])
    return offset


def timed_chase(row: dict, chase, stream, base: int, out, expected: int, timer, device: int | None = None) -> dict:
    """Walk the chain at ``base`` once from slot 0 and check that it ends at ``expected``, then time launches of
    ``STEPS`` loads (one a sample) with ``timer`` on ``stream``, of ``device`` (None: the current GPU). ``row`` with
    the verified, sample, status and ns_per_access columns; failed, with the error, where the walk or the timing
    went wrong."""
    with on_device(device):
        out.fill(0)
        chase.launch(stream, base, STEPS, out.data.ptr)
        stream.synchronize()
        reached = int(out[0])
    if reached != expected:
        return {**row, "error": f"chain mismatch: the kernel ended at offset {reached}, the host at {expected}"}

    def enqueue(ops: int) -> None:
        with on_device(device):
            for _ in range(ops):
                chase.launch(stream, base, STEPS, out.data.ptr)

    try:
        timing = timer.measure(enqueue, [stream], metric=CHASE_METRIC, ops_per_batch=1,
                               devices=None if device is None else [device])
    except MeasurementFailed as error:
        return {**row, "verified": True, "error": str(error)}
    return {**row, **timing.samples.columns(), "verified": True, "status": Status.OK,
            "ns_per_access": timing.median_ms * 1e6 / STEPS}
