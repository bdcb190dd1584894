"""Which CUDA calls block the host: each call in :mod:`bench.calls`, made while a spin kernel runs.

A one-thread kernel busy-waits ``SPIN_MS`` on the GPU's global timer on the *spinning* stream (created ``blocking``,
i.e. with default flags, so the legacy default stream synchronizes with it, or ``non-blocking``). Once the host
sees it running, the call is made on its placement stream and timed on the host; right after it returns, the host
reads whether the spin is still running (:meth:`bench.timing.SpinWatch.call_during_spin`). Each configuration is
repeated (fresh streams each time) until ``MIN_REPEATS`` agree, or ``MAX_REPEATS`` were made, and made once with no
spin (``idle_host_ms``: what the call costs by itself). The verdict of one repeat:

- ``waits-for-device``: the spin had ended when the call returned, and the call took at least half of what was left
  of the spin when it was made: it waited for the GPU;
- ``own-work``: the spin was still running, but the call took at least ``OWN_WORK_MS`` (a copy, an allocation);
- ``returns``: the spin was still running and the call took less than ``OWN_WORK_MS``.

The row's verdict is the most common one and ``stable`` says whether all repeats agreed. ``docs_waits`` is what the
documentation says (:func:`bench.calls.documented_waits`), and ``matches_docs`` compares it with whether the call
waited for the device; both are empty where the docs are silent or vague.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial

import pandas as pd

from bench.calls import KIT_MEMORY, PLACEMENTS, Kit, catalog, documented_waits, placement_stream
from bench.cuda import runtime
from bench.experiments import Config, Experiment, Row, listed
from bench.memory import OwnedStream
from bench.schema import FLAG, FLOAT, TEXT, TEXTS, column
from bench.timing import CallDuringSpin, Context, Samples, SpinWatch, StopRule, Summary, host_interval

SPIN_MS = 10.0  # the shortest spin; a slow call gets a longer one (spin_for)
OWN_WORK_MS = 1.0  # well above what returning calls cost (≤ 0.3 ms on the H200), well below a 64 MiB copy
MIN_REPEATS = 3  # repeats that must agree (serialization's spins are twice as long: it asks for 2)
MAX_REPEATS = 5
VERDICTS = ("returns", "own-work", "waits-for-device", "unclear")
SPIN_STREAMS = ("blocking", "non-blocking")
METRIC = "host time of the call while a kernel runs"

CATALOG_COLUMNS = (
    column("call", TEXT, "the call, as named in the catalog (bench.calls)"),
    column("placement", TEXT, "the call's stream: same (the spinning stream), other (a non-blocking stream), legacy "
                              "(the NULL stream), per-thread, or none (the call takes no stream)", PLACEMENTS),
    column("spin_stream", TEXT, "how the spinning stream was created", SPIN_STREAMS),
    column("api", TEXT, "the CUDA runtime function"),
    column("spin_ms", FLOAT, "length of each spin kernel"),
    column("host_ms", FLOAT, "median host time of the call"),
    column("stable", FLAG, "all repeats gave the same verdict"),
    column("docs", TEXT, "what the documentation says"),
    column("source", TEXT, "the documentation page"),
    column("matches_docs", FLAG, "the measurement agrees with the documentation (empty: the docs say nothing)"),
)
COLUMNS = (
    *CATALOG_COLUMNS,
    column("spin_left_ms", FLOAT, "median of how much of the spin was left when the call was made"),
    column("idle_host_ms", FLOAT, "host time of the call with nothing running"),
    column("verdict", TEXT, "the most common verdict over the repeats", VERDICTS),
    column("verdicts", TEXTS, "each repeat's verdict", VERDICTS),
    column("docs_host", TEXT, "what the docs say the call waits for on the host",
           ("never", "stream", "device", "maybe", "silent")),
    column("docs_waits", FLAG, "the docs say the call waits for the spinning kernel (empty: silent or vague)"),
)


def classify(host_ms: float, spin_running: bool, spin_left_ms: float) -> str:
    """The verdict of one repeat (see the module docstring)."""
    if not spin_running:
        return "waits-for-device" if host_ms >= 0.5 * spin_left_ms else "unclear"
    return "own-work" if host_ms >= OWN_WORK_MS else "returns"


def consensus(verdicts: Sequence[str], order: Sequence[str] = ("unclear", *VERDICTS[:3])) -> tuple[str, bool]:
    """The most common verdict (ties go to the one later in ``order``) and whether all agreed."""
    counts = Counter(verdicts)
    verdict = max(counts, key=lambda verdict: (counts[verdict], order.index(verdict)))
    return verdict, len(counts) == 1


def settled(verdicts: Sequence[str], minimum: int = MIN_REPEATS) -> bool:
    """Enough repeats: ``minimum`` that all agree, or ``MAX_REPEATS`` in all."""
    return len(verdicts) >= MAX_REPEATS or (len(verdicts) >= minimum and len(set(verdicts)) == 1)


@dataclass(frozen=True)
class Repeats:
    """One call measured until its verdicts settled: each repeat's measurement and verdict, and the outcome."""

    seen: list  # one bench.timing.CallDuringSpin or SpinPair per repeat
    verdicts: list[str]
    verdict: str
    stable: bool

    def samples(self, values: Sequence[float], unit: str, clock: str, metric: str) -> Samples:
        """Samples of the repeats: converged when they agreed."""
        return Samples(list(values), unit, clock, metric, "converged" if self.stable else "max_samples")


def host_verdict(seen: CallDuringSpin) -> str:
    return classify(seen.host_ms, seen.spin_running, seen.spin_left_ms)


def repeat_until_settled(once: Callable[[], object], judge: Callable[[object], str], minimum: int = MIN_REPEATS,
                         order: Sequence[str] = ("unclear", *VERDICTS[:3])) -> Repeats:
    """``once()`` (one measurement) until :func:`settled`; ``judge`` gives each one's verdict."""
    seen, verdicts = [], []
    while not settled(verdicts, minimum):
        seen.append(once())
        verdicts.append(judge(seen[-1]))
    verdict, stable = consensus(verdicts, order)
    return Repeats(seen, verdicts, verdict, stable)


def takes_placement(config: Config) -> bool:
    return config["placement"] in catalog()[config["call"]].placements


def kit_memory(configs: Sequence[Config]) -> tuple[int, int]:
    return KIT_MEMORY


def seconds(config: Config, rule: StopRule) -> float:
    return 0.012 + MIN_REPEATS * SPIN_MS / 1e3  # fresh streams, the idle call and the repeats


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Calls that wait for the device, and rows that contradict the documentation."""
    ok = rows[rows["status"] == "ok"]
    waits = ok[ok["verdict"] == "waits-for-device"]
    contradicted = ok[[contradicts_docs(row) for _, row in ok.iterrows()]]
    lines = []
    for label, group in (("waits for the device", waits), ("contradicts the docs", contradicted)):
        for _, row in group.iterrows():
            lines.append({"finding": label, "call": row["call"], "placement": row["placement"],
                          "spinning stream": row["spin_stream"], "host ms": f"{row['host_ms']:.3f}",
                          "verdict": row["verdict"]})
    return pd.DataFrame(lines)


VERDICT_COLORS = {"returns": "#4daf4a", "own-work": "#ffd92f", "waits-for-device": "#e41a1c", "unclear": "#bdbdbd",
                  "overlaps": "#4daf4a", "partial": "#ff7f00", "serializes": "#e41a1c"}


def contradicts_docs(row) -> bool:
    """Whether a row's measurement contradicts the documentation (False where the docs say nothing)."""
    value = row["matches_docs"]
    return value is not None and value is not pd.NA and not bool(value)


def short_ms(value: float) -> str:
    """A cell's host time: whole ms from 10 ms, hundredths from 10 µs, whole µs from 1 µs, else tenths of a µs."""
    if value >= 10:
        return f"{value:.0f}"
    if value >= 0.01:
        return f"{value:.2f}"
    return f"{value * 1e3:.0f}µs" if value >= 1e-3 else f"{value * 1e3:.1f}µs"


def _truth_panel(plt, ax, rows: pd.DataFrame, calls: list[str], columns: list[tuple[str, str]], annotate) -> None:
    """One cell per (call, placement × spinning stream), coloured by verdict; ``!`` where it contradicts the docs."""
    ax.set_xlim(-0.5, len(columns) - 0.5)
    ax.set_ylim(len(calls) - 0.5, -0.5)
    cells = {(row["call"], row["placement"], row["spin_stream"]): row for _, row in rows.iterrows()}
    for y, call in enumerate(calls):
        for x, (spin, placement) in enumerate(columns):
            row = cells.get((call, placement, spin))
            if row is None:
                continue
            ax.add_patch(plt.Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=VERDICT_COLORS.get(row["verdict"], "w"),
                                       edgecolor="white", linewidth=1.5))
            ax.text(x, y, annotate(row) + ("!" if contradicts_docs(row) else ""), ha="center", va="center",
                    fontsize=6.5)
    ax.set_xticks(range(len(columns)), [f"{placement}\n({spin})" for spin, placement in columns], fontsize=7)
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(calls)), calls, fontsize=7.5)
    for x in range(1, len(columns)):
        if columns[x][0] != columns[x - 1][0]:
            ax.axvline(x - 0.5, color="k", linewidth=1.5)


def truth_table_figure(rows: pd.DataFrame, tables: dict) -> list:
    """The blocking truth table: does the call hold the host (left), do two kernels around it still overlap
    (right); calls × placement and spinning stream, host ms in each cell."""
    from bench.plots import gpu_label, pyplot

    panels = [(name, rows[(rows["experiment"] == name) & (rows["status"] == "ok")])
              for name in ("blocking", "serialization")]
    panels = [(name, ok) for name, ok in panels if len(ok)]
    if not panels:
        return []
    plt = pyplot()
    calls = list(dict.fromkeys(call for _, ok in panels for call in ok["call"]))
    figure, axes = plt.subplots(1, len(panels), figsize=(9.5 * len(panels), 0.3 * len(calls) + 2.6), squeeze=False,
                                constrained_layout=True)
    for ax, (name, ok) in zip(axes[0], panels):
        present = set(zip(ok["spin_stream"], ok["placement"]))
        columns = [(spin, placement) for spin in SPIN_STREAMS for placement in PLACEMENTS
                   if (spin, placement) in present]
        if name == "blocking":
            _truth_panel(plt, ax, ok, calls, columns, lambda row: short_ms(row["host_ms"]))
            ax.set_title(f"host: does the call return while a {SPIN_MS:g} ms kernel runs? (cell: host ms)",
                         fontsize=10)
        else:
            _truth_panel(plt, ax, ok, calls, columns, lambda row: "host" if row["host_waited"] else "")
            ax.set_title("device: do kernels on two streams around the call overlap? (\"host\": the call held the "
                         "host)", fontsize=10)
        if ax is not axes[0][0]:
            ax.set_yticks(range(len(calls)), [""] * len(calls))
    handles = [plt.Rectangle((0, 0), 1, 1, color=color) for color in VERDICT_COLORS.values()]
    figure.legend(handles, list(VERDICT_COLORS), loc="outside lower center", ncol=len(handles), fontsize=8)
    env = panels[0][1].iloc[0]
    figure.suptitle(f"Which CUDA calls block, on {gpu_label(panels[0][1])} (driver {env['driver_version']}); "
                    "columns: the call's stream (the spinning stream's kind); ! = contradicts the CUDA documentation",
                    fontsize=10)
    return [("blocking_truth_table", figure)]


# --- measuring code --------------------------------------------------------------------------------------------

class Streams:
    """The streams of one measurement: the spinning stream, a second spinning stream (for the serialization
    experiment) and a non-blocking ``other`` stream, all destroyed on exit unless a call destroyed one."""

    def __init__(self, spin_blocking: bool) -> None:
        self.spinning = OwnedStream(blocking=spin_blocking)
        self.second = OwnedStream(blocking=spin_blocking)
        self.other = OwnedStream(blocking=False)

    def __enter__(self) -> Streams:
        return self

    def __exit__(self, *exc) -> None:
        runtime.deviceSynchronize()
        for stream in (self.spinning, self.second, self.other):
            stream.close()


def catalog_row(config: Config, call, samples: Samples) -> dict:
    """The columns blocking and serialization rows share."""
    return {**config, **samples.columns(), "api": call.api, "docs": call.docs, "source": call.source, "status": "ok",
            "error": ""}


def spin_for(idle_ms: float) -> float:
    """A spin long enough that a call's own work (``idle_ms``, its host time with nothing running) ends well before
    it does: ``SPIN_MS``, or four times the call, in 5 ms steps."""
    return float(max(SPIN_MS, 5 * round(4 * idle_ms / 5 + 0.5)))


def on_fresh_streams(config: Config, kit: Kit, measure: Callable) -> object:
    """``measure(streams, prepared)`` with the configuration's call prepared on new streams, cleaned up after."""
    call = catalog()[config["call"]]
    with Streams(config["spin_stream"] == "blocking") as streams:
        prepared = call.prepare(kit, placement_stream(config["placement"], streams.spinning, streams.other))
        measured = measure(streams, prepared)
        prepared.cleanup()
    return measured


def idle_ms(streams: Streams, prepared) -> float:
    """The call's host time with nothing running."""
    prepared.arm()
    ms, _ = host_interval(prepared.call)
    runtime.deviceSynchronize()
    return ms


def _measure(config: Config, kit: Kit, watch: SpinWatch) -> Row:
    call = catalog()[config["call"]]
    spin_blocking = config["spin_stream"] == "blocking"
    idle = on_fresh_streams(config, kit, idle_ms)
    spin_ms = spin_for(idle)
    repeats = repeat_until_settled(lambda: on_fresh_streams(config, kit, lambda streams, prepared: (
        watch.call_during_spin(streams.spinning, spin_ms, prepared.call, prepared.arm))), host_verdict)
    docs_waits = documented_waits(call, config["placement"], spin_blocking)
    samples = repeats.samples([seen.host_ms for seen in repeats.seen], "ms", "host", METRIC)
    return {**catalog_row(config, call, samples), **host_columns(repeats), "idle_host_ms": idle, "spin_ms": spin_ms,
            "docs_host": call.docs_host, "docs_waits": docs_waits,
            "matches_docs": None if docs_waits is None else docs_waits == (repeats.verdict == "waits-for-device")}


def host_columns(repeats: Repeats) -> dict:
    """The columns of a call's repeats with a spin running: host time, what was left of the spin, verdicts."""
    return {"host_ms": Summary.of([seen.host_ms for seen in repeats.seen]).median,
            "spin_left_ms": Summary.of([seen.spin_left_ms for seen in repeats.seen]).median,
            "verdicts": repeats.verdicts, "verdict": repeats.verdict, "stable": repeats.stable}


def run_each(configs: Sequence[Config], context: Context, measure_one: Callable) -> Iterator[Row]:
    """``measure_one(config, kit, watch)`` for each configuration; a call that fails is a failed row with its
    error, and the others go on."""
    watch = SpinWatch()
    with Kit() as kit:
        for config in configs:
            try:
                yield measure_one(config, kit, watch)
            except Exception as error:  # the runtime's refusal of one call must not end the others
                runtime.deviceSynchronize()
                yield {**config, "status": "failed", "error": f"{type(error).__name__}: {error}"}


def catalog_axes() -> dict[str, tuple]:
    return {"call": tuple(catalog()), "placement": PLACEMENTS, "spin_stream": SPIN_STREAMS}


QUICK_CALLS = {"call": ("(nothing)", "cudaFree", "cudaMemcpyAsync H2D pageable 64 MiB", "kernel launch")}
# --quick: a control, a call that waits, one that stages on the host, one that returns


def catalog_answer(rows: pd.DataFrame, verdict: str, what: str) -> str | None:
    """The answer of a catalog experiment (with ``functools.partial``: an experiment pickles): the calls with
    ``verdict`` in some placement, which do ``what``."""
    ok = rows[rows["status"] == "ok"]
    if not len(ok):
        return None
    calls = list(dict.fromkeys(ok.loc[ok["verdict"] == verdict, "call"]))
    return f"{len(calls)} of {ok['call'].nunique()} calls {what}: {listed(calls)}"


def catalog_experiment(name: str, description: str, columns, measure_one, headline, answer, seconds, order: int,
                       share_s: float) -> Experiment:
    """An experiment over the runtime call catalog: every call in each placement it takes, with each kind of
    spinning stream; ``measure_one(config, kit, watch)`` gives one row."""
    return Experiment(name=name, description=description, axes=catalog_axes(), quick=QUICK_CALLS, columns=columns,
                      measure=partial(run_each, measure_one=measure_one), headline=headline, answer=answer,
                      seconds=seconds,
                      valid=takes_placement, memory_needed=kit_memory, figures=(truth_table_figure,),
                      outcome=("verdict",), size_axis="", order=order, share_s=share_s)


EXPERIMENT = catalog_experiment(
    "blocking", "which CUDA calls block the host while a kernel runs, by placement, against the documentation",
    COLUMNS, _measure, headline,
    partial(catalog_answer, verdict="waits-for-device", what="wait for a running kernel in some placement"), seconds,
    order=40, share_s=7)
