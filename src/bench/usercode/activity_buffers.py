"""CUPTI's activity buffers, taken through ctypes. A pool of buffers, allocated and touched before recording starts,
hands CUPTI one whenever it asks; a buffer CUPTI hands back is only put aside. No Python work is done per record
while a region runs (``cupti-python``'s own buffer callbacks build a Python object of every record of a buffer when
it completes, on a thread that then holds the GIL while the region's thread waits for it). The records are read
after recording stops (:func:`read`), field by field for all records of a kind at once, at the offsets
``cupti-python`` declares for CUPTI's record structures.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where records are read: ``import bench`` stays light
    import numpy as np

BUFFER_BYTES = 16 << 20  # records of some 70,000 kernels: none completes while a region of 40,000 runs (8 MiB did)
POOL = 4  # buffers allocated up front: one per thread that launches work, as CUPTI keeps a buffer per thread

_REQUESTED = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
                              ctypes.POINTER(ctypes.c_size_t))
_COMPLETED = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t,
                              ctypes.c_size_t)
_Buffer = ctypes.c_uint64 * (BUFFER_BYTES // 8)  # 8-byte aligned, as CUPTI's records need


class Pool:
    """Buffers for CUPTI: :meth:`requested` hands out a free one (a new one, counted in ``grown``, only when all are
    out), :meth:`completed` puts a filled one aside until :meth:`take`."""

    def __init__(self, count: int = POOL) -> None:
        self._free = [_Buffer() for _ in range(count)]  # ctypes zeroes them: their pages are touched now
        self._out: dict[int, ctypes.Array] = {}
        self._filled: list[tuple[ctypes.Array, int]] = []
        self.grown = 0

    def requested(self, buffer, size, most_records) -> None:
        """CUPTI asks for a buffer (any thread; must not raise: CUPTI would get nothing)."""
        try:
            chosen = self._free.pop() if self._free else self._grow()
            self._out[ctypes.addressof(chosen)] = chosen
            buffer[0], size[0], most_records[0] = ctypes.addressof(chosen), BUFFER_BYTES, 0
        except BaseException:  # noqa: BLE001 - out of memory: CUPTI drops the records (its dropped count says so)
            buffer[0], size[0], most_records[0] = None, 0, 0

    def _grow(self) -> ctypes.Array:
        self.grown += 1
        return _Buffer()

    def completed(self, context, stream, buffer, size, valid) -> None:
        """CUPTI hands a buffer back with ``valid`` bytes of records."""
        chosen = self._out.pop(buffer or 0, None)
        if chosen is not None:
            self._filled.append((chosen, int(valid)))

    def take(self) -> list[tuple[ctypes.Array, int]]:
        """The buffers handed back so far, each with its bytes of records; :meth:`give_back` each once read."""
        filled, self._filled = self._filled, []
        return filled

    def give_back(self, buffers: Iterable[tuple[ctypes.Array, int]]) -> None:
        self._free.extend(chosen for chosen, _ in buffers)


_POOL: Pool | None = None
_CALLBACKS: tuple | None = None  # CUPTI calls these for the process's life: they are never collected


def registered(library: ctypes.CDLL, check) -> Pool:
    """The process's pool, registered with CUPTI once (``check`` raises on a CUPTI error status)."""
    global _POOL, _CALLBACKS
    if _POOL is None:
        pool = Pool()
        callbacks = (_REQUESTED(pool.requested), _COMPLETED(pool.completed))
        library.cuptiActivityRegisterCallbacks.argtypes = (_REQUESTED, _COMPLETED)
        library.cuptiActivityGetNextRecord.argtypes = (ctypes.c_void_p, ctypes.c_size_t,
                                                       ctypes.POINTER(ctypes.c_void_p))
        check(library.cuptiActivityRegisterCallbacks(*callbacks))
        _POOL, _CALLBACKS = pool, callbacks
    return _POOL


@dataclass(frozen=True)
class Layout:
    """Where a record structure's fields lie (``cupti-python``'s dtype of it): name -> (numpy type, offset)."""

    fields: dict[str, tuple[np.dtype, int]]

    @classmethod
    def of(cls, dtype: np.dtype, names: Iterable[str]) -> Layout:
        return cls({name: (dtype.fields[name][0], dtype.fields[name][1]) for name in names})

    def columns(self, memory: np.ndarray, offsets: np.ndarray) -> dict[str, np.ndarray]:
        """Each field of the records at ``offsets`` (bytes into ``memory``), as one array per field."""
        import numpy as np

        found = {}
        for name, (kind, at) in self.fields.items():
            spans = offsets[:, None] + at + np.arange(kind.itemsize)
            found[name] = memory[spans].copy().view(kind).reshape(len(offsets))
        return found


def record_offsets(library: ctypes.CDLL, buffer: ctypes.Array, valid: int) -> tuple[np.ndarray, np.ndarray]:
    """Each record's offset in ``buffer`` and its kind, in CUPTI's order (``library`` as :func:`registered` left
    it)."""
    import numpy as np

    base = ctypes.addressof(buffer)
    record = ctypes.c_void_p(None)
    offsets, kinds = [], []
    next_record, kind_at = library.cuptiActivityGetNextRecord, ctypes.c_uint32.from_address
    while next_record(base, valid, ctypes.byref(record)) == 0:
        offsets.append(record.value - base)
        kinds.append(kind_at(record.value).value)
    return np.asarray(offsets, dtype=np.int64), np.asarray(kinds, dtype=np.int64)


def read(library: ctypes.CDLL, buffers: Iterable[tuple[ctypes.Array, int]],
         layouts: dict[int, Layout]) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """The records of the kinds in ``layouts``, buffer by buffer: (kind, its fields as arrays)."""
    import numpy as np

    for buffer, valid in buffers:
        if not valid:
            continue
        offsets, kinds = record_offsets(library, buffer, valid)
        memory = np.frombuffer(buffer, dtype=np.uint8, count=valid)
        for kind, layout in layouts.items():
            mine = offsets[kinds == kind]
            if len(mine):
                yield kind, layout.columns(memory, mine)
