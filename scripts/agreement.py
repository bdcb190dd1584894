"""Does the default sweep answer as the full grid does? Headline by headline, on the same GPU.

    python scripts/agreement.py DEFAULT_RESULTS FULL_RESULTS [REPEAT_RESULTS]

- bandwidth: every configuration both measured, median GB/s within 1%. REPEAT_RESULTS, a second full bandwidth grid
  of the same GPU measured after the first, says how well the full grid agrees with itself: a configuration that
  misses 1% still agrees when the default sweep's difference is within the largest repeat difference of its host
  memory and direction (the full grid's own reproducibility on this machine). Both counts are printed;
- overlap: per payload × compute ratio, the best pinned efficiency within 2 percentage points;
- blocking and serialization: the same verdict for every configuration.
Exit status 1 if any check fails.
"""

import sys

import pandas as pd

from bench.analysis import selection
from bench.results import store
from bench.experiments import registry

BANDWIDTH_KEYS = ["host_memory", "direction", "bytes"]


def _newest(path: str) -> pd.DataFrame:
    return selection.newest(store.read_any(path, store.suite_schema(registry())), registry())


def _gbps(frame: pd.DataFrame) -> pd.Series:
    ok = frame[(frame["experiment"] == "bandwidth") & (frame["status"] == "ok")]
    return ok.set_index(BANDWIDTH_KEYS)["gbps"]


def bandwidth(default: pd.DataFrame, full: pd.DataFrame, repeat: pd.DataFrame | None) -> bool:
    ours, theirs = _gbps(default), _gbps(full)
    again = _gbps(repeat) if repeat is not None else pd.Series(dtype=float)
    common = ours.index.intersection(theirs.index)
    spread: dict[tuple, float] = {}  # (host memory, direction) -> the largest |repeat / full - 1|
    for key in theirs.index.intersection(again.index):
        group = key[:2]
        spread[group] = max(spread.get(group, 0.0), abs(again[key] / theirs[key] - 1))
    within, reproducible, failures = 0, 0, []
    for key in common:
        change = ours[key] / theirs[key] - 1
        repeat_text = f", repeat {again[key] / theirs[key] - 1:+.2%}" if key in again.index else ""
        if abs(change) <= 0.01:
            within += 1
        elif abs(change) <= spread.get(key[:2], 0.0):
            reproducible += 1
        else:
            failures.append(f"  {' '.join(map(str, key))}: {ours[key]:.2f} vs {theirs[key]:.2f} GB/s "
                            f"({change:+.2%}{repeat_text})")
    print(f"bandwidth: {len(common)} configurations in both; {within} within 1%, {reproducible} more within the full "
          f"grid's own repeat difference, {len(failures)} outside")
    for group, largest in spread.items():
        print(f"  full grid against its repeat, {' '.join(group)}: largest difference {largest:.2%}")
    print("\n".join(failures))
    _headline(ours, theirs, again)
    return not failures and len(common) > 0


def _headline(ours: pd.Series, theirs: pd.Series, again: pd.Series) -> None:
    """The README's headline copies: GB/s at 16 MiB and the peak, default vs full (and the repeat's peak)."""
    def of(series: pd.Series, host_memory: str, direction: str) -> pd.Series:
        if not len(series):
            return series
        frame = series.reset_index()
        frame = frame[(frame["host_memory"] == host_memory) & (frame["direction"] == direction)]
        return frame.set_index("bytes")["gbps"]

    for host_memory, direction in [("pinned", "H2D"), ("pinned", "D2H"), ("registered", "H2D"),
                                   ("registered", "D2H"), ("device", "D2D")]:
        mine, full, repeated = (of(series, host_memory, direction) for series in (ours, theirs, again))
        if not len(mine) or not len(full) or (16 << 20) not in mine.index or (16 << 20) not in full.index:
            continue
        at, peak = mine[16 << 20] / full[16 << 20] - 1, mine.max() / full.max() - 1
        line = (f"headline {host_memory} {direction}: at 16 MiB {mine[16 << 20]:.1f} vs {full[16 << 20]:.1f} GB/s "
                f"({at:+.2%}); peak {mine.max():.1f} vs {full.max():.1f} ({peak:+.2%})")
        print(line + (f"; the repeat's peak {repeated.max():.1f}" if len(repeated) else ""))


def overlap(default: pd.DataFrame, full: pd.DataFrame) -> bool:
    best = []
    for frame in (default, full):
        ok = frame[(frame["experiment"] == "overlap") & (frame["status"] == "ok") & (frame["host_memory"] == "pinned")]
        best.append(ok.groupby(["total_bytes", "compute_ratio"])["efficiency"].max())
    common = best[0].index.intersection(best[1].index)
    passed = True
    for key in common:
        difference = best[0][key] - best[1][key]
        within = abs(difference) <= 0.02
        passed &= within
        print(f"overlap {key[0] >> 20} MiB, ratio {key[1]:g}: best pinned efficiency {best[0][key]:.1%} (default) vs "
              f"{best[1][key]:.1%} (full): {difference * 100:+.1f} pp {'ok' if within else 'OUTSIDE 2 pp'}")
    return passed and len(common) > 0


def verdicts(default: pd.DataFrame, full: pd.DataFrame, name: str) -> bool:
    keys = ["call", "placement", "spin_stream"]
    ok = [frame[(frame["experiment"] == name) & (frame["status"] == "ok")].set_index(keys)["verdict"]
          for frame in (default, full)]
    common = ok[0].index.intersection(ok[1].index)
    differ = [key for key in common if ok[0][key] != ok[1][key]]
    print(f"{name}: {len(common)} configurations in both, {len(differ)} with different verdicts")
    for key in differ:
        print(f"  {' / '.join(key)}: {ok[0][key]} (default) vs {ok[1][key]} (full)")
    return not differ and len(common) > 0


def main() -> int:
    default, full = _newest(sys.argv[1]), _newest(sys.argv[2])
    repeat = _newest(sys.argv[3]) if len(sys.argv) > 3 else None
    uuids = set(default["gpu_uuid"].dropna())
    if len(uuids) != 1:
        print(f"agreement: NO (the default sweep must come from one GPU, not {', '.join(sorted(uuids))})")
        return 1
    (uuid,) = uuids
    full = full[full["gpu_uuid"] == uuid]  # the full grid of the same GPU only
    if repeat is not None:
        repeat = repeat[repeat["gpu_uuid"] == uuid]
    print(f"GPU: {uuid}; full-grid rows of it: {len(full)}; repeat rows: {0 if repeat is None else len(repeat)}")
    results = [bandwidth(default, full, repeat), overlap(default, full), verdicts(default, full, "blocking"),
               verdicts(default, full, "serialization")]
    print("agreement:", "yes" if all(results) else "NO")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
