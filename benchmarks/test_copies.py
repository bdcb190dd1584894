"""cudaMemcpyAsync H2D/D2H (pinned vs pageable) and D2D, each copy verified once before it is timed."""

import pytest
from gpu import GATED, UNGATED, iterations_for, run

from bench.measure.copies import verified_copy
from bench.platform.units import format_size

SIZES = (64 << 10, 16 << 20, 256 << 20)
RATE_GBPS = {"pinned": 50, "pageable": 10, "device": 1500}  # rough, only to size the rounds


def _clock(host: str):
    return UNGATED if host == "pageable" else GATED  # pageable copies wait on the host: no gate


def _case(direction: str, host: str, size: int):
    return pytest.param(direction, host, size, marks=pytest.mark.benchmark(timer=_clock(host)),
                        id=f"{direction.lower()}-{host}-{format_size(size).replace(' ', '')}")


CASES = [_case(direction, host, size) for direction in ("H2D", "D2H") for host in ("pinned", "pageable")
         for size in SIZES] + [_case("D2D", "device", size) for size in SIZES[1:]]


@pytest.mark.parametrize("direction, host, size", CASES)
def test_copy(benchmark, direction, host, size):
    benchmark.group = f"copy {format_size(size)}"
    clock = _clock(host)
    with verified_copy(direction, host, size, clock.stream) as copy:
        median_s = run(benchmark, clock, copy, iterations=iterations_for(size / RATE_GBPS[host] / 1e6))
    benchmark.extra_info.update(bytes=size, gbps=size / median_s / 1e9, verified=True)
