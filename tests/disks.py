"""A full disk for tests, without a tiny file system: parquet writes fail as on a full disk."""

from __future__ import annotations

import errno
import itertools
import os

import pyarrow.parquet as pq


def fills_after(monkeypatch, writes: int) -> None:
    """Every parquet write past the first ``writes`` fails as on a full disk: pyarrow writes part of the file, then
    raises OSError ENOSPC."""
    real, done = pq.write_table, itertools.count()

    def write_table(table, where, **options):
        if next(done) < writes:
            return real(table, where, **options)
        where.write(b"PAR1 part of a file")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pq, "write_table", write_table)
