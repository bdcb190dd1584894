"""Does the default sweep answer as the full grid does? Headline by headline, on the same GPU.

    python scripts/agreement.py DEFAULT_RESULTS FULL_RESULTS

- bandwidth: every configuration both measured, median GB/s within 1% (pageable copies, timed with the host's
  staging in them, are judged by the noise-aware verdict instead when they miss 1%);
- overlap: per payload × compute ratio, the best pinned efficiency within 2 percentage points;
- blocking and serialization: the same verdict for every configuration.
Exit status 1 if any check fails.
"""

import sys

import pandas as pd

from bench import analysis, store
from bench.compare import verdict


def _newest(path: str) -> pd.DataFrame:
    return analysis.newest(store.read_any(path))


def bandwidth(default: pd.DataFrame, full: pd.DataFrame) -> bool:
    keys = ["host_memory", "direction", "bytes"]
    ok = [frame[(frame["experiment"] == "bandwidth") & (frame["status"] == "ok")].set_index(keys)
          for frame in (default, full)]
    common = ok[0].index.intersection(ok[1].index)
    worst, failures = 0.0, []
    for key in common:
        a, b = ok[0].loc[key], ok[1].loc[key]
        change = a["gbps"] / b["gbps"] - 1
        worst = max(worst, abs(change)) if key[0] != "pageable" else worst
        if abs(change) > 0.01:
            noise = verdict(list(b["samples"]), list(a["samples"]))
            if key[0] != "pageable" or noise not in ("same", "unclear"):
                failures.append(f"  {' '.join(map(str, key))}: {a['gbps']:.2f} vs {b['gbps']:.2f} GB/s "
                                f"({change:+.2%}, {noise})")
    pageable = [key for key in common if key[0] == "pageable"]
    print(f"bandwidth: {len(common)} configurations in both; largest difference of the gated copies "
          f"{worst:.2%}; {len(pageable)} pageable copies judged by noise; {len(failures)} outside")
    print("\n".join(failures))
    return not failures


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
    uuids = set(default["gpu_uuid"].dropna())
    if len(uuids) != 1:
        print(f"agreement: NO (the default sweep must come from one GPU, not {', '.join(sorted(uuids))})")
        return 1
    (uuid,) = uuids
    full = full[full["gpu_uuid"] == uuid]  # the full grid of the same GPU only
    print(f"GPU: {uuid}; full-grid rows of it: {len(full)}")
    results = [bandwidth(default, full), overlap(default, full), verdicts(default, full, "blocking"),
               verdicts(default, full, "serialization")]
    print("agreement:", "yes" if all(results) else "NO")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
