"""Results rows asked one question at a time, as HolisticTraceAnalysis asks a trace: :class:`Results`, built once
from every row read, their side tables and the experiments' descriptions, with a method per question the report,
compare and claims ask. Each GPU's part is a :class:`GpuResults`. pandas only; never CUDA."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property

import pandas as pd

from bench.analysis import claims, compare, plots, selection
from bench.analysis.numbers import cell, plain_numbers
from bench.analysis.selection import Gpu, only
from bench.platform.libraries import LIBRARIES
from bench.platform.vocabulary import ClaimVerdict, Status
from bench.timing.phases import phase

VERSIONS = tuple(library.version_column for library in LIBRARIES)  # the libraries' versions
ENVIRONMENT = ("driver_version", "cuda_runtime", "pcie_gen", "pcie_width", *VERSIONS, "git_commit")
SECTION_COLUMNS = ("experiment", "status", "error", "run_id")  # what a section reads of an experiment's rows
# besides its axes (status, the configurations not ok) and what its view reads
TRUTH_TABLES = ("blocking", "serialization", "library", "crossgpu")  # shown as tables of verdicts, not figures
TRUTH_COLUMNS = ("call", "spin_stream", "placement", "spin_ms", "host_ms", "idle_host_ms", "host_waited", "overlap_ms",
                 "verdict", "verdicts", "stable", "matches_docs", "docs", "docs_waits", "docs_serializes", "source",
                 "call_gpu", "spin_gpu")  # what a truth table reads besides the section's columns


@dataclass(frozen=True)
class Answer:
    """An experiment's answer in a sentence, and the date its rows were measured."""

    experiment: str
    sentence: str
    date: str


@dataclass(frozen=True)
class Answers:
    """One GPU's answers: its newest run (``about``) and each experiment's; ``dated`` where some come from an
    earlier run."""

    about: str
    said: tuple[Answer, ...]
    dated: bool


@dataclass(frozen=True)
class GpuResults:
    """One GPU's part: its rows (the newest of each configuration), each experiment's rows (only the columns its
    section reads) and each experiment's headline table."""

    gpu: Gpu
    rows: pd.DataFrame
    experiments: dict[str, pd.DataFrame]
    headlines: dict[str, pd.DataFrame]
    claims: pd.DataFrame | None = None  # the folklore claims judged on its rows; None where none could be
    failures: dict[str, pd.DataFrame] = field(default_factory=dict)  # experiment -> its configurations not ok

    @property
    def latest(self) -> str:
        return latest_run(self.rows)


class Results:
    """Every row read (``rows``), their side ``tables``, the ``experiments`` (name -> description, in the sweep's
    order) and their ``views`` (:func:`bench.views.in_order`, handed down as the experiments are); of several
    measurements of a configuration on one GPU, the newest is the one shown."""

    def __init__(self, rows: pd.DataFrame, experiments: Mapping, views: Mapping,
                 tables: Mapping | None = None) -> None:
        self.rows, self.experiments, self.views, self.tables = rows, experiments, views, dict(tables or {})

    @cached_property
    def shown(self) -> pd.DataFrame:
        with phase("the newest measurement of each configuration"):
            return selection.newest(self.rows, self.experiments)

    @cached_property
    def gpus(self) -> list[GpuResults]:
        """Each GPU's part, in the rows' order of GPUs."""
        parts = []
        for gpu, mine in selection.by_gpu(self.shown):
            split = self._by_experiment(mine)
            with phase("headline tables"):
                made = {name: self.views[name].headline(rows) for name, rows in split.items() if name in self.views}
            judged = claims.table(mine)
            failed = {name: failures(self.experiments[name], rows) for name, rows in split.items()}
            parts.append(GpuResults(gpu, mine, split, made, None if _none_judged(judged) else judged,
                                    {name: frame for name, frame in failed.items() if frame is not None}))
        return parts

    def _by_experiment(self, rows: pd.DataFrame) -> dict[str, pd.DataFrame]:
        """Each experiment with rows here: its rows, with only the columns its section reads. Selected once: every
        reader of an experiment's rows then copies a few columns, not the suite's."""
        views = self.views
        positions = rows.groupby("experiment", sort=False).indices if "experiment" in rows else {}
        found = {}
        for name, experiment in self.experiments.items():
            if name in positions:
                columns = [*SECTION_COLUMNS, *experiment.axes, *(TRUTH_COLUMNS if name in TRUTH_TABLES else ()),
                           *(views[name].reads() if name in views else ())]
                found[name] = only(rows, columns).iloc[positions[name]]
        return found

    def labels(self) -> dict[Gpu, str]:
        """What the GPU column says for each GPU where there are several: name and start of UUID, and the host
        where hosts differ."""
        if len(self.gpus) < 2:
            return {}
        hosts = {part.gpu.host for part in self.gpus}
        return {part.gpu: f"{part.gpu.short} on {part.gpu.host}" if len(hosts) > 1 else part.gpu.short
                for part in self.gpus}

    @cached_property
    def figure_owners(self) -> dict[str, Gpu]:
        """experiment -> the GPU whose figures of it are shown: the one that measured it last (the first of them on
        a tie). The truth tables' experiments have tables of verdicts instead."""
        owners: dict[str, tuple[str, Gpu]] = {}
        names = [name for name in self.views if name not in TRUTH_TABLES]
        for part in self.gpus:
            mine = part.rows
            measured = mine.groupby("experiment")["run_id"].max() if "run_id" in mine else pd.Series(dtype=object)
            present = set(mine["experiment"])
            for name in names:
                if name not in present:
                    continue
                run = cell(measured.get(name))
                if name not in owners or run > owners[name][0]:
                    owners[name] = (run, part.gpu)
        return {name: gpu for name, (_, gpu) in owners.items()}

    def figure_rows(self) -> list[tuple[Gpu, str, pd.DataFrame, dict[str, pd.DataFrame]]]:
        """(GPU, experiment, rows, side tables) of each experiment's figures to draw, of the GPU that owns them, in
        the order they are shown: the columns and side tables the experiment's view reads."""
        views, owners, asked = self.views, self.figure_owners, []
        for part in self.gpus:
            owned = [name for name in views if owners.get(name) == part.gpu]
            if not owned:
                continue
            mine = part.rows
            drawable, side = ~mine["experiment"].isin(list(TRUTH_TABLES)), plots.tables_of(self.tables, mine)
            asked += [(part.gpu, name, only(mine, views[name].reads())[drawable],
                       {table: side[table] for table in views[name].tables if table in side}) for name in owned]
        return asked

    def summary(self) -> str:
        """How many runs on how many GPUs, the newest run, how many rows of how many are shown."""
        keys = selection.key_frame(self.rows, ["run_id", "hostname"])
        measured = keys[self.rows["run_id"].notna()] if "run_id" in self.rows else keys.iloc[0:0]
        runs = len(measured.drop_duplicates())  # a sweep: one run on one host
        newest = f"; newest run {cell(max(map(str, measured['run_id'])))}" if runs else ""
        count = len(self.gpus)
        return (f"{runs} run{'s' if runs != 1 else ''} on {count} GPU{'s' if count != 1 else ''}{newest}. Of "
                f"{len(self.rows)} result rows, the newest measurement of each configuration on each GPU is shown "
                f"({len(self.shown)} rows).")

    def newest_first(self) -> list[GpuResults]:
        """The GPUs' parts, the one measured last first."""
        return sorted(self.gpus, key=lambda part: part.latest, reverse=True)

    def answers(self, part: GpuResults) -> Answers:
        """One GPU's newest run (date, commit, driver) and each experiment's answer in a sentence."""
        rows, latest = part.rows, part.latest
        newest = rows.iloc[int((rows["run_id"].astype(str) == latest).to_numpy().argmax()) if latest else 0]
        about = (f"newest run {run_date(latest)} ({latest or 'no run id'}), commit "
                 f"{short_commit(newest.get('git_commit'))}, driver {cell(newest.get('driver_version'))}, CUDA "
                 f"runtime {cell(newest.get('cuda_runtime'))}")
        said = []
        for name, view in self.views.items():
            mine = part.experiments.get(name)
            answer = view.answer(mine, part.headlines[name]) if mine is not None else None
            if answer:
                said.append(Answer(name, plain_numbers(answer), run_date(latest_run(mine))))
        return Answers(about, tuple(said), len({answer.date for answer in said}) > 1)

    def runs(self) -> pd.DataFrame:
        """One line per run and GPU of the input: the GPU (name, UUID, host, index), what it measured, how much of
        it is shown."""
        keys = ["run_id", *selection.MACHINE, "gpu_name"]
        frame = selection.key_frame(self.rows, [*keys, "gpu_index", "experiment", *ENVIRONMENT])
        shown_keys = selection.key_frame(self.shown, keys)
        shown_counts = shown_keys.groupby(keys, sort=False).size() if len(self.shown) else pd.Series(dtype=int)
        lines = []
        for key, group in frame.groupby(keys, sort=True):
            run, host, uuid, name = key
            first = group.iloc[0]
            count = int(shown_counts.get(key, 0))
            lines.append({
                "run": run, "GPU": name, "UUID": uuid, "host": host, "index": first.get("gpu_index", ""),
                "experiments": ", ".join(dict.fromkeys(map(cell, group["experiment"]))), "rows": len(group),
                "shown": count if count else "0 (newer runs measured all of it)",
                "driver / CUDA runtime": f"{first.get('driver_version', '')} / {first.get('cuda_runtime', '')}",
                "PCIe": f"Gen{cell(first.get('pcie_gen'))} x{cell(first.get('pcie_width'))}",
                "libraries": ", ".join(dict.fromkeys(cell(value) for column in VERSIONS if column in group
                                                     for value in dict.fromkeys(group[column]) if cell(value))),
                "commit": cell(first.get("git_commit", ""))[:12],
            })
        return pd.DataFrame(lines)

    def claims(self, rows: pd.DataFrame | None = None) -> pd.DataFrame:
        """The folklore claims judged against ``rows`` (default: every row shown)."""
        return claims.table(self.shown if rows is None else rows)

    def compare(self, other: Results, gpu: str | None = None, record: pd.DataFrame | None = None):
        """What changed from these results to ``other``'s (:func:`bench.analysis.compare.compare`)."""
        return compare.compare(self.rows, other.rows, self.experiments, gpu=gpu, record=record)


def _none_judged(judged: pd.DataFrame) -> bool:
    return bool((judged["verdict"] == ClaimVerdict.NOT_MEASURED).all())


def status(rows: pd.DataFrame) -> str:
    """How many of an experiment's configurations are ok, and of which runs."""
    failed = not_ok(rows)
    counts = rows["status"].value_counts() if failed.any() else {Status.OK: len(rows)}
    ok = int(counts.get(Status.OK, 0))
    others = ", ".join(f"{int(count)} {state}" for state, count in counts.items() if state != Status.OK)
    ids = rows["run_id"].to_numpy(dtype=object)
    runs = sorted(map(str, dict.fromkeys(ids[pd.notna(ids)])))
    measured = f" (run{'s' if len(runs) > 1 else ''} {', '.join(runs)})" if runs else ""
    return f"{ok} of {len(rows)} configurations ok{'; ' + others if others else ''}{measured}."


def not_ok(rows: pd.DataFrame):
    """Which of ``rows`` are not ok."""
    return rows["status"].to_numpy(dtype=object) != Status.OK


def failures(experiment, rows: pd.DataFrame) -> pd.DataFrame | None:
    """The configurations of ``rows`` not ok, each with its status and error; None where all are ok."""
    failed = not_ok(rows)
    if not failed.any():
        return None
    failed = rows[failed]
    return pd.DataFrame({"configuration": [compare.describe(experiment, row) for _, row in failed.iterrows()],
                         "status": failed["status"], "error": failed["error"]})


def latest_run(rows: pd.DataFrame) -> str:
    """The newest run id among ``rows`` ('' where they carry none)."""
    ids = rows["run_id"].to_numpy(dtype=object) if "run_id" in rows else []
    return max((str(run) for run in ids if not pd.isna(run)), default="")


def run_date(run_id) -> str:
    """'2026-11-22 03:42 UTC' for run 20261122T034221Z (run ids are UTC timestamps); the id itself if not one."""
    try:
        return datetime.strptime(str(run_id)[:15], "%Y%m%dT%H%M%S").strftime("%Y-%m-%d %H:%M UTC")
    except ValueError:
        return str(run_id)


def short_commit(commit) -> str:
    """The start of a commit hash, and whether the tree had changes ('2471437a1b2c', '2471437a1b2c-dirty')."""
    commit = cell(commit)
    return commit[:12] + ("-dirty" if commit.endswith("-dirty") else "")
