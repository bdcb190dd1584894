"""bench.measure.copies without a GPU: where two buffers differ, on NumPy arrays (CuPy's take the same path)."""

import numpy as np
import pytest

pytestmark = pytest.mark.cuda_libs  # bench.measure.copies imports CuPy


@pytest.mark.parametrize("nbytes", [4096, 4093])  # compared eight bytes at a time, and byte by byte
def test_differing_finds_every_differing_byte_or_none(nbytes):
    from bench.measure.copies import differing

    want = np.random.default_rng(0).integers(0, 255, nbytes, dtype=np.uint8)
    assert differing(want.copy(), want) is None
    got = want.copy()
    got[[0, 7, 8, nbytes - 1]] ^= 0x5A
    assert differing(got, want).tolist() == [0, 7, 8, nbytes - 1]


def test_differing_compares_elements_of_strided_views():
    from bench.measure.copies import differing

    want = np.arange(64, dtype=np.uint8)
    got = want.copy()
    got[1] = 200  # outside the view below
    assert differing(got[::2], want[::2]) is None
    got[2] = 201
    assert differing(got[::2], want[::2]).tolist() == [1]


def test_differing_gives_flat_indices_of_two_dimensional_arrays_whole_or_sliced():
    from bench.measure.copies import differing

    want = np.arange(64, dtype=np.uint8).reshape(4, 16)
    got = want.copy()
    got[2, 3] = 255
    assert differing(got, want).tolist() == [2 * 16 + 3]  # whole rows: compared eight bytes at a time first
    assert differing(got[:, :4], want[:, :4]).tolist() == [2 * 4 + 3]  # part of each row: element by element
    assert differing(got[:, 4:], want[:, 4:]) is None
