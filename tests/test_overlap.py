import math

import pytest

from bench.experiments.overlap import bound_ms, concurrency, headline, rounds_for
from synthetic import overlap_rows


def test_concurrency_of_a_synthetic_timeline():
    # 0-4 alone, 4-6 two ops, 6-8 three ops, 8-10 alone: 4 of 10 ms have two or more running
    intervals = [(0.0, 6.0), (4.0, 8.0), (6.0, 8.0), (8.0, 10.0)]
    assert concurrency(intervals) == pytest.approx(0.4)
    assert concurrency([(0.0, 1.0), (1.0, 2.0)]) == 0.0  # back to back is not overlap
    assert concurrency([(0.0, 2.0), (0.0, 2.0)]) == 1.0
    assert math.isnan(concurrency([]))


def test_bound_model():
    # two or more copy engines: copies in opposite directions overlap each other and the kernel, at duplex rates
    assert bound_ms(kernel_ms=3, h2d_ms=5, d2h_ms=5, h2d_duplex_ms=5.4, d2h_duplex_ms=5.5, copy_engines=2) == 5.5
    assert bound_ms(kernel_ms=20, h2d_ms=5, d2h_ms=5, h2d_duplex_ms=5.4, d2h_duplex_ms=5.5, copy_engines=3) == 20
    # one copy engine: the copies serialize
    assert bound_ms(kernel_ms=3, h2d_ms=5, d2h_ms=5, h2d_duplex_ms=5.4, d2h_duplex_ms=5.5, copy_engines=1) == 10


def test_calibration_fits_a_line_through_two_measurements():
    # 0.1 ms launch overhead + 0.01 ms per round: 5 ms needs 490 rounds
    assert rounds_for(5.0, (16, 0.26), (256, 2.66)) == 490
    assert rounds_for(0.0001, (16, 0.26), (256, 2.66)) == 1  # never below one round
    with pytest.raises(ValueError):
        rounds_for(5.0, (16, 1.0), (256, 1.0))


def test_overlap_headline_picks_the_most_efficient_configuration():
    table = headline(overlap_rows())
    pinned = table[(table["host memory"] == "pinned") & (table["compute ratio"] == "1")].iloc[0]
    assert pinned["best configuration"] == "4 streams × 4 chunks, malloc, eager"  # first to reach 95%
    assert pinned["1-stream speedup"] == "1.00" and pinned["efficiency"] == "95.0%"
