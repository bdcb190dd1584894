"""CUPTI's activity buffers as bench keeps them: the pool CUPTI takes buffers from, and the records read back at
the offsets a record structure's dtype gives (a fake CUPTI walks records of one size, as CUPTI's own would)."""

from __future__ import annotations

import ctypes

import numpy as np

from bench.usercode import activity_buffers
from bench.usercode.activity_buffers import BUFFER_BYTES, Layout, Pool, read

RECORD = np.dtype([("kind", np.uint32), ("pad", np.uint32), ("start", np.uint64), ("end", np.uint64),
                   ("stream_id", np.uint32), ("bytes", np.uint64)], align=True)


class FakeCupti:
    """``cuptiActivityGetNextRecord`` over records of ``RECORD.itemsize`` bytes each."""

    def cuptiActivityGetNextRecord(self, base, valid, record):  # noqa: N802 - CUPTI's name
        current = record._obj.value
        following = base if current is None else current + RECORD.itemsize
        if following + RECORD.itemsize > base + valid:
            return 1  # CUPTI_ERROR_MAX_LIMIT_REACHED (any non-zero status ends the walk)
        record._obj.value = following
        return 0


def ask(pool: Pool) -> tuple[int, int]:
    buffer, size, most = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t(7)
    pool.requested(ctypes.pointer(buffer), ctypes.pointer(size), ctypes.pointer(most))
    assert most.value == 0  # records fill the buffer, however many
    return buffer.value, size.value


def test_the_pool_hands_out_buffers_made_up_front_and_keeps_what_comes_back_until_taken() -> None:
    pool = Pool(count=2)
    first, size = ask(pool)
    second, _ = ask(pool)
    assert size == BUFFER_BYTES and first != second and first % 8 == 0 and pool.grown == 0
    third, _ = ask(pool)  # all out: a new one, counted
    assert pool.grown == 1 and third not in (first, second)
    pool.completed(None, 0, second, BUFFER_BYTES, 96)
    pool.completed(None, 0, first, BUFFER_BYTES, 0)
    pool.completed(None, 0, 12345, BUFFER_BYTES, 8)  # not one of the pool's: ignored
    taken = pool.take()
    assert [(ctypes.addressof(buffer), valid) for buffer, valid in taken] == [(second, 96), (first, 0)]
    assert pool.take() == []
    pool.give_back(taken)
    assert {ask(pool)[0], ask(pool)[0]} == {first, second} and pool.grown == 1  # reused, not grown


def test_records_are_read_field_by_field_at_the_dtype_offsets() -> None:
    pool = Pool(count=1)
    address, _ = ask(pool)
    records = np.zeros(3, dtype=RECORD)
    records["kind"] = [10, 5, 10]
    records["start"] = [2**40 + 1, 7, 2**40 + 3]
    records["end"] = [2**40 + 2, 8, 2**40 + 9]
    records["stream_id"] = [13, 1, 14]
    records["bytes"] = [0, 4096, 0]
    ctypes.memmove(address, records.tobytes(), records.nbytes)
    pool.completed(None, 0, address, BUFFER_BYTES, records.nbytes)
    layouts = {10: Layout.of(RECORD, ("start", "end", "stream_id")), 5: Layout.of(RECORD, ("bytes", "start"))}
    found = list(read(FakeCupti(), pool.take(), layouts))
    assert [kind for kind, _ in found] == [10, 5]
    kernels, copies = found[0][1], found[1][1]
    assert kernels["start"].tolist() == [2**40 + 1, 2**40 + 3] and kernels["end"].tolist() == [2**40 + 2, 2**40 + 9]
    assert kernels["stream_id"].tolist() == [13, 14] and kernels["stream_id"].dtype == np.uint32
    assert copies["bytes"].tolist() == [4096] and copies["start"].tolist() == [7]


def test_a_buffer_without_records_reads_as_none() -> None:
    pool = Pool(count=1)
    address, _ = ask(pool)
    pool.completed(None, 0, address, BUFFER_BYTES, 0)
    assert list(read(FakeCupti(), pool.take(), {10: Layout.of(RECORD, ("start",))})) == []


def test_the_process_registers_one_pool_with_cupti_once(monkeypatch) -> None:
    monkeypatch.setattr(activity_buffers, "_POOL", None)
    monkeypatch.setattr(activity_buffers, "_CALLBACKS", None)
    calls = []

    class Library:
        class cuptiActivityRegisterCallbacks:  # noqa: N801 - CUPTI's name
            argtypes = None

            def __new__(cls, requested, completed):
                calls.append((requested, completed))
                return 0

        class cuptiActivityGetNextRecord:  # noqa: N801 - CUPTI's name
            argtypes = None

    statuses = []
    pool = activity_buffers.registered(Library(), statuses.append)
    assert activity_buffers.registered(Library(), statuses.append) is pool
    assert len(calls) == 1 and statuses == [0]
