"""Compare bench's peer and host-link figures with nvbandwidth's device-to-device and all-GPU tests on the same
machine (run by scripts/gpu_check.sh "nvbandwidth-peer").

Usage: python scripts/compare_nvbandwidth_peer.py RESULTS.parquet NVBANDWIDTH.json [--bytes 268435456]
                                                  [--tolerance 0.05]

nvbandwidth runs with ``-b 256`` (256 MiB buffers). Its matrices are read cell by cell, ``[i][j]`` with ``i`` the
row GPU (the GPU whose context issues the copy), and each cell is paired with bench's row of the same meaning
(testcases_ce.cpp, testcases_sm.cpp):

- ``device_to_device_memcpy_read_{ce,sm}[i][j]``: data j → i, issued by i: bench ``peer`` src=j, dst=i, side read;
- ``device_to_device_memcpy_write_{ce,sm}[i][j]``: data i → j, issued by i: bench src=i, dst=j, side write;
- ``device_to_device_bidirectional_memcpy_{read,write}_{ce,sm}``: both ways at once, each copy issued by its own side;
  nvbandwidth sums each copy's own rate (its "total" matrix, the last of the three it writes into one JSON matrix),
  which is bench's ``forward_gbps + backward_gbps`` of the bidir row;
- ``host_to_all_memcpy_ce`` / ``all_to_host_memcpy_ce`` ``[0][d]``: GPU d's H2D / D2H rate while every other GPU
  copies too (nvbandwidth makes the others' copies twice as long so they overlap all of it): bench ``hostlinks``
  load=together, device=d;
- ``device_to_device_latency_sm[i][j]``: a kernel on i chasing pointers in j's memory: bench's chase src=j, dst=i.
  The methods differ (nvbandwidth walks its buffer in fixed strides; bench a random cycle of 256-byte slots), so that
  line is information, not a check.

Prints one line per cell and exits 1 if a checked pair differs by more than the tolerance.
"""

from __future__ import annotations

import sys

import pandas as pd
from compare_nvbandwidth import arguments, testcases, verdict  # scripts/, beside this one

PEER = {  # nvbandwidth test -> (method, side, direction)
    "device_to_device_memcpy_read_ce": ("ce", "read", "uni"),
    "device_to_device_memcpy_write_ce": ("ce", "write", "uni"),
    "device_to_device_bidirectional_memcpy_read_ce": ("ce", "read", "bidir"),
    "device_to_device_bidirectional_memcpy_write_ce": ("ce", "write", "bidir"),
    "device_to_device_memcpy_read_sm": ("sm", "read", "uni"),
    "device_to_device_memcpy_write_sm": ("sm", "write", "uni"),
    "device_to_device_bidirectional_memcpy_read_sm": ("sm", "read", "bidir"),
    "device_to_device_bidirectional_memcpy_write_sm": ("sm", "write", "bidir"),
}
HOST = {"host_to_all_memcpy_ce": "H2D", "all_to_host_memcpy_ce": "D2H"}
LATENCY = "device_to_device_latency_sm"
LATENCY_BYTES = 1 << 20


def matrices(path: str) -> dict[str, list[list[float | None]]]:
    """Test name -> its matrix (the last square block: a bidirectional test appends three matrices to one)."""
    found = {}
    for test in testcases(path):
        rows = [[None if cell == "N/A" else float(cell) for cell in row] for row in test.get("bandwidth_matrix", [])]
        if not rows:
            continue
        width = len(rows[0])
        block = width if len(rows) >= width and len(rows) % width == 0 else len(rows)
        found[test["name"]] = rows[-block:]
    return found


def pairs(rows: pd.DataFrame, theirs: dict, nbytes: int):
    """(label, bench value, nvbandwidth value, unit, checked) for every cell bench has a figure for."""
    ok = rows[rows["status"] == "ok"]
    peer = ok[(ok["experiment"] == "peer") & (ok["peer_access"] == "enabled")]
    for test, (method, side, direction) in PEER.items():
        for i, line in enumerate(theirs.get(test, [])):
            for j, value in enumerate(line):
                if value is None:
                    continue
                src, dst = (j, i) if side == "read" else (i, j)
                mine = peer[(peer["method"] == method) & (peer["side"] == side) & (peer["direction"] == direction)
                            & (peer["src"] == src) & (peer["dst"] == dst) & (peer["bytes"] == nbytes)]
                ours = None
                if len(mine):
                    first = mine.iloc[0]
                    ours = first["forward_gbps"] + first["backward_gbps"] if direction == "bidir" else first["gbps"]
                yield f"{test}[{i}][{j}]", ours, value, "GB/s", True
    links = ok[(ok["experiment"] == "hostlinks") & (ok["load"] == "together") & (ok["bytes"] == nbytes)]
    for test, direction in HOST.items():
        for line in theirs.get(test, []):
            for device, value in enumerate(line):
                mine = links[(links["direction"] == direction) & (links["device"] == device)]
                if value is not None:
                    yield f"{test}[0][{device}]", float(mine["gbps"].iloc[0]) if len(mine) else None, value, \
                        "GB/s", True
    chase = ok[(ok["experiment"] == "peer") & (ok["method"] == "chase") & (ok["bytes"] == LATENCY_BYTES)]
    for i, line in enumerate(theirs.get(LATENCY, [])):
        for j, value in enumerate(line):
            mine = chase[(chase["src"] == j) & (chase["dst"] == i)]
            if value is not None:
                yield f"{LATENCY}[{i}][{j}]", float(mine["ns_per_access"].iloc[0]) if len(mine) else None, value, \
                    "ns", False


def main() -> int:
    args = arguments(__doc__.splitlines()[0])
    rows = pd.read_parquet(args.results)
    theirs = matrices(args.nvbandwidth)
    print(f"{'nvbandwidth cell':<56} {'bench':>9} {'nvbandwidth':>11} {'unit':<5} {'diff':>8}  check")
    worst, failed, compared = 0.0, False, 0
    for label, ours, value, unit, checked in pairs(rows, theirs, args.bytes):
        if ours is None:
            print(f"{label:<56} {'—':>9} {value:>11.2f} {unit:<5} {'':>8}  missing in bench")
            failed |= checked
            continue
        diff = ours / value - 1
        within = abs(diff) <= args.tolerance
        if checked:
            compared += 1
            worst = max(worst, abs(diff))
            failed |= not within
        print(f"{label:<56} {ours:>9.2f} {value:>11.2f} {unit:<5} {diff:>+8.2%}  "
              f"{verdict(diff, args.tolerance, checked)}")
    print(f"{compared} checked cells, largest difference {worst:.2%}: "
          f"{'OUTSIDE' if failed else 'within'} ±{args.tolerance:.0%}")
    return 1 if failed or not compared else 0


if __name__ == "__main__":
    sys.exit(main())
