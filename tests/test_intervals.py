"""The interval arithmetic of traces: unions, shared time, gaps, concurrency."""

from bench.timing.intervals import concurrent, gaps, length, shared, union


def test_union_and_length_count_overlaps_once():
    assert union([(5, 8), (0, 2), (1, 3), (8, 9)]) == [(0, 3), (5, 9)]
    assert length([(0, 10), (5, 15), (20, 21)]) == 16 and length([]) == 0


def test_shared_is_the_time_both_cover():
    copies, kernels = [(0, 10), (20, 30)], [(5, 25)]
    assert shared(copies, kernels) == 10 and shared(kernels, copies) == 10
    assert shared([(0, 1)], [(1, 2)]) == 0 and shared([(0, 100)], [(10, 20), (15, 30)]) == 20


def test_gaps_between_and_within():
    assert gaps([(0, 2), (5, 6), (6, 9)]) == [(2, 5)]
    assert gaps([(3, 4)], within=(0, 10)) == [(0, 3), (4, 10)]
    assert gaps([], within=(0, 5)) == [(0, 5)] and gaps([]) == []


def test_concurrent_counts_two_or_more_at_once():
    assert concurrent([(0, 10), (5, 15), (7, 8)]) == 5
    assert concurrent([(0, 1), (1, 2)]) == 0
