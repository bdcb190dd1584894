"""Choosing rows to analyse: the newest measurement of each configuration on each GPU, and one GPU of many.
pandas only; never imports CUDA."""

from __future__ import annotations

import pandas as pd

from bench.errors import UsageError

MACHINE = ("hostname", "gpu_uuid")  # what tells GPUs apart across a fleet


def config_columns(experiment: str) -> list[str]:
    """The axes that identify a configuration of ``experiment`` (none for an experiment bench does not know)."""
    from bench.experiments import registry

    known = registry().get(experiment)
    return list(known.axes) if known else []


def key_frame(rows: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    present = [column for column in columns if column in rows]
    return rows[present].astype(object).where(rows[present].notna(), "")


def newest(rows: pd.DataFrame) -> pd.DataFrame:
    """Of several measurements of a configuration on one GPU, the newest (run ids are UTC timestamps); every GPU
    and host keeps its own. Runs that measured different configurations (a 256 MiB and a 1 GiB overlap run) both
    stay."""
    if not len(rows) or "run_id" not in rows or "experiment" not in rows:
        return rows
    kept = []
    for name, group in rows.groupby("experiment", sort=False):
        keys = key_frame(group, [*MACHINE, *config_columns(name)])
        if not len(keys.columns):
            kept.append(group)
            continue
        latest = group.groupby([keys[column] for column in keys.columns])["run_id"].transform("max")
        kept.append(group[group["run_id"] == latest])
    return pd.concat(kept).sort_index().reset_index(drop=True)


def gpus(rows: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(hostname, gpu_uuid, gpu_name) of every GPU in the rows."""
    columns = [column for column in (*MACHINE, "gpu_name") if column in rows]
    if len(columns) < 3 or not len(rows):
        return []
    return sorted(set(map(tuple, key_frame(rows, columns).itertuples(index=False))))


def select_gpu(rows: pd.DataFrame, gpu: str | None) -> pd.DataFrame:
    """Only the rows of the GPU ``gpu`` names: its UUID or the start of it, its name, or its host. UsageError when
    none matches, or when it matches several GPUs."""
    if gpu is None:
        return rows
    matching = [machine for machine in gpus(rows)
                if machine[1].lower().startswith(gpu.lower()) or gpu.lower() in (machine[0].lower(),
                                                                                  machine[2].lower())]
    if not matching:
        known = "; ".join(f"{name} {uuid} on {host}" for host, uuid, name in gpus(rows)) or "none"
        raise UsageError(f"--gpu {gpu}: no such GPU in the results (they hold: {known})")
    if len(matching) > 1:
        raise UsageError(f"--gpu {gpu}: matches {len(matching)} GPUs; give more of a UUID")
    host, uuid, _ = matching[0]
    return rows[(rows["hostname"].fillna("") == host) & (rows["gpu_uuid"].fillna("") == uuid)].reset_index(drop=True)
