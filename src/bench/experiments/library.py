"""Which CuPy, numba-cuda and PyTorch calls block the host, and which keep kernels on other streams from
overlapping: each call in :mod:`bench.catalogs`, measured as the ``blocking`` and ``serialization`` experiments
measure CUDA runtime calls.

Every call has its own *call stream*, a fresh non-blocking stream that CuPy and PyTorch use as their current stream
and that numba-cuda calls are given (calls without a stream argument use the legacy default stream). Placements:

- ``same``: a spin kernel of ``SPIN_MS`` runs on the call's stream (for calls on the legacy default stream, on a
  blocking stream, which that stream waits for); the call is timed on the host, and the host reads whether the spin
  still ran when it returned. Verdicts as in ``blocking``: ``returns``, ``own-work`` (≥ 1 ms of its own),
  ``waits-for-device``;
- ``other``: the same with the spin on another non-blocking stream: does the call wait for work it has nothing to do
  with (a device-wide synchronization, a freed pool)?
- ``between``: the call is made between two spins on two other streams: do they still overlap (``overlaps``,
  ``partial``, ``serializes``, as in ``serialization``)?

Repeats run until ``MIN_REPEATS`` agree (at most five); ``stable`` says whether all agreed. ``idle_host_ms`` is a
warm call with nothing running, ``first_host_ms`` (on each call's first row) the first call of it in the process:
compilation, module loading, plan and handle creation (CuPy compiles on a first call unless its on-disk kernel cache
has the kernel: a sweep's warm-up fills it on a fresh machine; numba-cuda's target is built in advance by the
sweep's fork server, :mod:`bench.sweep.preload`). Calls that compile something new each time (``fresh``) pay that every
time: their kernels carry numbers no other process used. A spin must outlast
the call's own work, or a slow call would look as if it waited: each row's spin lasts ``SPIN_MS`` or four times the
call's idle time, whichever is longer (``spin_ms``). A call that raises is a failed row with its error; one that hangs is stopped by the runner's
watchdog. PyTorch rows are skipped, with the reason, where PyTorch is not installed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import pandas as pd

import bench
from bench.catalogs import LIBRARIES, LIBRARY_DOCS_HOST, STREAM_USE, CallStream, catalog, documented_waits
from bench.cuda import cupy, numba_cuda, runtime
from bench.experiments import Config, Experiment, Row
from bench.measure import columns
from bench.measure.verdicts import (DEVICE_VERDICTS, HOST_VERDICTS, SPIN_MS, host_columns, host_verdict,
                                    pair_columns, repeat_between_spins, repeat_until_settled, spin_for)
from bench.schema import FLAG, FLOAT, TEXT, column
from bench.timing import Context, SpinWatch, StopRule, host_interval

PLACEMENTS = ("same", "other", "between")
MIN_REPEATS = 2  # repeats that must agree (a row is unstable if they do not; at most five)

COLUMNS = (
    column("call", TEXT, "the library call, as named in bench.catalogs"),
    column("placement", TEXT, "where the spin kernels run: same (the call's stream), other (another stream), between "
                              "(two other streams, the call between them)", PLACEMENTS),
    column("library", TEXT, "cupy, numba-cuda or torch", LIBRARIES),
    column("category", TEXT, "what kind of call it is"),
    column("stream_use", TEXT, "the stream the call uses: the library's current stream, a stream it is given, the "
                               "legacy default stream, or none", STREAM_USE),
    columns.SPIN_MS,
    columns.HOST_MS,
    column("spin_left_ms", FLOAT, "same/other: median of how much of the spin was left when the call was made"),
    column("idle_host_ms", FLOAT, "host time of a warm call with nothing running"),
    column("first_host_ms", FLOAT, "host time of the call's first call in the process (its first row only)"),
    *columns.verdict_columns((*HOST_VERDICTS, *DEVICE_VERDICTS)),
    columns.STABLE,
    column("overlap_ms", FLOAT, "between: median time the two spins ran at once"),
    column("host_waited", FLAG, "between: the call held the host until the first spin ended (in most repeats)"),
    column("docs", TEXT, "what the library's documentation says"),
    columns.SOURCE,
    column("docs_host", TEXT, "what the docs say the call waits for", LIBRARY_DOCS_HOST),
    column("docs_waits", FLAG, "the docs say the call waits for this spin (empty: silent)"),
    columns.MATCHES_DOCS,
)


def valid(config: Config) -> bool:
    """A call that uses no stream has no ``same`` placement."""
    return config["placement"] != "same" or catalog()[config["call"]].stream != "none"


def seconds(config: Config, rule: StopRule) -> float:
    call = catalog()[config["call"]]
    spin_s = (0.15 if call.fresh else SPIN_MS / 1e3)  # a compiling call gets a long spin
    return 0.02 + (1 + MIN_REPEATS) * spin_s * (1.25 if config["placement"] == "between" else 1)


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Per library: calls that waited for the GPU on their own stream, on another, that serialized, and that
    contradict their documentation."""
    ok = rows[rows["status"] == "ok"]
    lines = []
    for library, group in ok.groupby("library", sort=False):
        def calls(mask) -> str:
            names = sorted({name.split(" ", 1)[1] for name in group[mask]["call"]})
            return ", ".join(names) or "—"

        waits = group["verdict"] == "waits-for-device"
        contradicts = group["matches_docs"].eq(False).fillna(False).astype(bool)
        lines.append({"library": library,
                      "waits on its own stream": calls(waits & (group["placement"] == "same")),
                      "waits for other streams": calls(waits & (group["placement"] == "other")),
                      "serializes kernels": calls(group["verdict"] == "serializes"),
                      "contradicts its docs": calls(contradicts)})
    return pd.DataFrame(lines)


def answer(rows: pd.DataFrame) -> str | None:
    """How many library calls wait for the GPU, and how many contradict their documentation."""
    ok = rows[rows["status"] == "ok"]
    if not len(ok):
        return None
    waits = ok[ok["verdict"] == "waits-for-device"]
    own, other = (waits.loc[waits["placement"] == placement, "call"].nunique() for placement in ("same", "other"))
    contradicting = ok.loc[ok["matches_docs"].eq(False).fillna(False).astype(bool), "call"].nunique()
    return (f"of {ok['call'].nunique()} calls, {own} wait for a kernel on their own stream, {other} for other "
            f"streams; {contradicting} contradict their documentation")


def library_figure(rows: pd.DataFrame, tables: dict) -> list:
    """The library truth table: one row per call (grouped by library), a column per placement, coloured by verdict,
    host ms in the cell; ``!`` where the measurement contradicts the library's documentation."""
    from bench.analysis import short_ms
    from bench.plots import VERDICT_COLORS, gpu_label, pyplot

    ok = rows[(rows["experiment"] == "library") & (rows["status"] == "ok")]
    if not len(ok):
        return []
    plt = pyplot()
    calls = list(dict.fromkeys(ok["call"]))
    cells = {(row["call"], row["placement"]): row for _, row in ok.iterrows()}
    figure, ax = plt.subplots(figsize=(10, 0.26 * len(calls) + 2.4), constrained_layout=True)
    ax.set_xlim(-0.5, len(PLACEMENTS) - 0.5)
    ax.set_ylim(len(calls) - 0.5, -0.5)
    for y, call in enumerate(calls):
        for x, placement in enumerate(PLACEMENTS):
            row = cells.get((call, placement))
            if row is None:
                continue
            ax.add_patch(plt.Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=VERDICT_COLORS.get(row["verdict"], "w"),
                                       edgecolor="white", linewidth=1.5))
            text = "host" if placement == "between" and row["host_waited"] else (
                "" if placement == "between" else short_ms(row["host_ms"]))
            contradicts = row["matches_docs"] is not pd.NA and row["matches_docs"] is not None and \
                not bool(row["matches_docs"])
            ax.text(x, y, text + ("!" if contradicts else ""), ha="center", va="center", fontsize=6.5)
    ax.set_xticks(range(len(PLACEMENTS)), ["spin on the call's stream", "spin on another stream",
                                           "two spins around the call:\ndo they overlap?"], fontsize=8)
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(calls)), calls, fontsize=7)
    for y in range(1, len(calls)):
        if calls[y].split(" ", 1)[0] != calls[y - 1].split(" ", 1)[0]:
            ax.axhline(y - 0.5, color="k", linewidth=1.5)
    handles = [plt.Rectangle((0, 0), 1, 1, color=color) for color in VERDICT_COLORS.values()]
    figure.legend(handles, list(VERDICT_COLORS), loc="outside lower center", ncol=4, fontsize=8)
    env = ok.iloc[0]
    spin_ms = ok["spin_ms"].min() if ok["spin_ms"].notna().any() else SPIN_MS  # the run's: runs before differ
    figure.suptitle(f"Do CuPy, numba-cuda and PyTorch calls block? {gpu_label(ok)}, {env['cupy_version']}, "
                    f"{env['numba_cuda_version']}; cell: host ms while a kernel of {spin_ms:g} ms (or 4× the call's "
                    "own time) runs; ! = contradicts the library's docs", fontsize=9)
    return [("library_truth_table", figure)]


# --- measuring code --------------------------------------------------------------------------------------------

def _kit(library: str):
    if library == "cupy":
        from bench.catalogs.cupy_calls import Kit
    elif library == "numba-cuda":
        from bench.catalogs.numba_calls import Kit
    else:
        from bench.catalogs.torch_calls import Kit
    return Kit()


def torch_missing() -> str | None:
    """Why PyTorch rows cannot run here, or None."""
    try:
        import torch
    except ImportError as error:
        return f"PyTorch is not installed (pip install \"{bench.DISTRIBUTION}[torch]\"): {error}"
    if not torch.cuda.is_available():
        return "PyTorch is installed without CUDA support"
    return None


# Streams PyTorch has used, kept until the process ends: freeing a tensor (or a pinned block a copy read) later
# records an event on the streams it was used on, and on a destroyed stream that aborts the process.
_TORCH_USED: list = []


class _Streams:
    """The streams of one configuration: the call's (as each library names it), another non-blocking one, a second
    one for ``between``, and a blocking one (what the legacy default stream waits for)."""

    def __init__(self, with_torch: bool) -> None:
        self.owned = [cupy.cuda.Stream(non_blocking=True) for _ in range(3)] + [cupy.cuda.Stream(non_blocking=False)]
        call, self.other, self.second, self.blocking = self.owned
        torch_stream = None
        if with_torch:
            import torch

            torch_stream = torch.cuda.ExternalStream(call.ptr)
            _TORCH_USED.append(self.owned)
        self.call = CallStream(call.ptr, call, numba_cuda.external_stream(call.ptr), torch_stream)

    @contextlib.contextmanager
    def current(self):
        """The call stream as CuPy's and PyTorch's current stream."""
        with self.call.cupy, (self._torch_stream() if self.call.torch is not None else contextlib.nullcontext()):
            yield

    def _torch_stream(self):
        import torch

        return torch.cuda.stream(self.call.torch)

    def spinning(self, call, placement: str):
        if placement == "other":
            return self.other
        return self.blocking if call.stream == "default" else self.call.cupy


def _prepared(call, kit, streams: _Streams):
    with streams.current():
        prepared = call.prepare(kit, streams.call)
    runtime.deviceSynchronize()  # inputs ready before anything is timed
    return prepared


def _timed(call, kit, streams: _Streams) -> float:
    prepared = _prepared(call, kit, streams)
    with streams.current():
        ms, _ = host_interval(prepared.call)
    runtime.deviceSynchronize()
    prepared.cleanup()
    return ms


def _measure(config: Config, call, kit, watch: SpinWatch, first: bool) -> Row:
    streams = _Streams(call.library == "torch")
    first_ms = _timed(call, kit, streams) if first else None
    idle_ms = _timed(call, kit, streams)
    spin_ms = spin_for(idle_ms)
    row = {**config, "library": call.library, "category": call.category, "stream_use": call.stream,
           "spin_ms": spin_ms, "idle_host_ms": idle_ms, "first_host_ms": first_ms, "docs": call.docs,
           "source": call.source, "docs_host": call.docs_host, "status": "ok", "error": ""}
    placement = config["placement"]

    def once(measure):
        prepared = _prepared(call, kit, streams)
        with streams.current():
            seen = measure(prepared.call)
        prepared.cleanup()
        return seen

    if placement == "between":
        repeats = repeat_between_spins(lambda: once(
            lambda made: watch.call_between_spins(streams.other, streams.second, spin_ms, made)), spin_ms)
        samples = repeats.samples([pair.makespan_ms for pair in repeats.seen], "ms", "gpu", "makespan of the two spins")
        return {**row, **samples.columns(), **pair_columns(repeats)}
    spinning = streams.spinning(call, placement)
    repeats = repeat_until_settled(lambda: once(lambda made: watch.call_during_spin(spinning, spin_ms, made)),
                                   host_verdict, MIN_REPEATS)
    documented = documented_waits(call, placement)
    samples = repeats.samples([seen.host_ms for seen in repeats.seen], "ms", "host",
                              "host time of the call while a kernel runs")
    return {**row, **samples.columns(), **host_columns(repeats), "docs_waits": documented,
            "matches_docs": None if documented is None else documented == (repeats.verdict == "waits-for-device")}


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    watch = SpinWatch()
    kits: dict[str, object] = {}
    missing = {"torch": torch_missing()} if any(catalog()[c["call"]].library == "torch" for c in configs) else {}
    seen: set[str] = set()
    for config in configs:
        call = catalog()[config["call"]]
        if missing.get(call.library):
            yield {**config, "library": call.library, "status": "skipped", "error": missing[call.library]}
            continue
        try:
            if call.library not in kits:
                kits[call.library] = _kit(call.library)
            first = call.name not in seen
            seen.add(call.name)
            yield _measure(config, call, kits[call.library], watch, first)
        except Exception as error:  # the library's error for one call must not end the others
            runtime.deviceSynchronize()
            yield {**config, "library": call.library, "status": "failed", "error": f"{type(error).__name__}: {error}"}


def warm() -> None:
    """Every call of the catalog once, untimed: CuPy compiles the kernels behind them into its on-disk cache
    (``cupy.bincount``'s first call took 3.2 s on a fresh H200, ``cupy.histogram``'s 0.9 s) before a sweep
    measures them. Not the ``fresh`` calls: each compiles a kernel nothing has seen, which is what they measure."""
    kits: dict[str, object] = {}
    for call in catalog().values():
        if call.fresh or (call.library == "torch" and torch_missing()):
            continue
        try:
            if call.library not in kits:
                kits[call.library] = _kit(call.library)
            _timed(call, kits[call.library], _Streams(call.library == "torch"))
        except Exception:  # measured (and reported) by the sweep itself
            runtime.deviceSynchronize()


EXPERIMENT = Experiment(
    name="library",
    description="which CuPy, numba-cuda and PyTorch calls block the host or serialize kernels, against their docs",
    axes={"call": tuple(catalog()), "placement": PLACEMENTS},
    # --quick leaves PyTorch to the default sweep: importing it takes 2-4 s of the smoke test's 20 s
    quick={"call": ("cupy a.item()", "cupy cupy.asarray(numpy pageable)", "numba cuda.to_device(pageable)")},
    columns=COLUMNS,
    measure=measure,
    headline=headline,
    answer=answer,
    seconds=seconds,
    valid=valid,
    figures=(library_figure,),
    outcome=("verdict",),
    size_axis="",
    order=55,
    share_s=22,
    row_timeout_s=60,
    warm=warm,
)
