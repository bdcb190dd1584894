"""Which CuPy, numba-cuda, PyTorch and JAX calls block the host, and which keep kernels on other streams from
overlapping: each call in :mod:`bench.catalogs`, measured as the ``blocking`` and ``serialization`` experiments
measure CUDA runtime calls.

Every call has its own *call stream*; a spin kernel of ``spin_ms`` runs on it (``same``; for JAX, the device-wide hold
of :mod:`bench.usercode.hold`), on another stream (``other``), or as two spins on two other streams around the call
(``between``). Repeats run until ``MIN_REPEATS`` agree; ``idle_host_ms`` is a warm call with nothing running,
``first_host_ms`` the first call in the process. An optional library's rows are skipped where it cannot run
(:mod:`bench.platform.libraries`); every row records the version of the library it measured. The method in full:
docs/methodology.md.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from bench import catalogs
from bench.catalogs import LIBRARIES, LIBRARY_DOCS_HOST, STREAM_USE, CallStream, Prepared, catalog, documented_waits
from bench.platform.cuda import cupy, kept_device, make_current, runtime
from bench.experiments import Accuracy, Config, Cost, Experiment, Processes, Row, Sweeps
from bench.platform.libraries import BY_NAME, Library, measured_versions
from bench.measure import columns
from bench.measure.verdicts import (DEVICE_VERDICTS, HOST_VERDICTS, SPIN_MS, host_columns, host_verdict,
                                    pair_columns, repeat_between_spins, repeat_until_settled, spin_for)
from bench.results.schema import FLAG, FLOAT, TEXT, column
from bench.timing import Context, Floor, SpinWatch, StopRule, host_interval
from bench.usercode.hold import device_hold
from bench.platform.vocabulary import Clock, HostVerdict, LibraryPlacement, Status, Unit, values

PLACEMENTS = values(LibraryPlacement)
MIN_REPEATS = 2  # repeats that must agree (a row is unstable if they do not; at most five)
# The calls of a library that may leave another GPU current (its record's loading.moves_device: JAX) make the row's GPU
# current again as they return (a cudaGetDevice, well under a microsecond, inside the timed call), before bench's
# streams, spins and holds of that GPU are used.

COLUMNS = (
    column("call", TEXT, "the library call, as named in bench.catalogs"),
    column("placement", TEXT, "where the spin kernels run: same (the call's stream), other (another stream), between "
                              "(two other streams, the call between them)", PLACEMENTS),
    column("library", TEXT, f"{', '.join(LIBRARIES[:-1])} or {LIBRARIES[-1]}", LIBRARIES),
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


# --- measuring code --------------------------------------------------------------------------------------------

# Streams a library may still use after its calls returned (its record's streams.outlive), kept until the process
# ends: PyTorch records an event on a tensor's streams when the tensor (or a pinned block a copy read) is freed, and
# on a destroyed stream that aborts the process.
_OUTLIVING: list = []


class _Streams:
    """The streams of one configuration: the call's (a CuPy stream, and as the call's library names it), another
    non-blocking one, a second one for ``between``, and a blocking one (what the legacy default stream waits for)."""

    def __init__(self, library: Library) -> None:
        self.device = runtime.getDevice()  # the GPU they belong to
        self.library = library
        self.owned = [cupy.cuda.Stream(non_blocking=True) for _ in range(3)] + [cupy.cuda.Stream(non_blocking=False)]
        self.own, self.other, self.second, self.blocking = self.owned
        streams = library.streams
        if streams.outlive:
            _OUTLIVING.append(self.owned)
        self.call = CallStream(self.own.ptr, streams.stream(self.own) if streams.stream else None)

    @contextlib.contextmanager
    def current(self):
        """The call stream as CuPy's current stream (for every library: bench's streams are CuPy's) and as the call's
        library's, where it has one."""
        current = self.library.streams.current
        with self.own, (current(self.call.named) if current else contextlib.nullcontext()):
            yield

    def spinning(self, call, placement: str):
        if placement == "other":
            return self.other
        return self.blocking if call.stream == "default" else self.own


def _keeping(device: int, function):
    """``function``, making ``device`` current again as it returns (for a library that ``moves_device``); no context
    manager: it runs inside the timed call."""
    def kept():
        try:
            return function()
        finally:
            make_current(device)
    return kept


def _prepared(call, kit, streams: _Streams):
    with streams.current(), kept_device(streams.device):
        prepared = call.prepare(kit, streams.call)
    if BY_NAME[call.library].loading.moves_device:
        prepared = Prepared(call=_keeping(streams.device, prepared.call), arm=_keeping(streams.device, prepared.arm),
                            cleanup=_keeping(streams.device, prepared.cleanup), keep=prepared.keep)
    runtime.deviceSynchronize()  # inputs ready before anything is timed
    return prepared


def _timed(call, kit, streams: _Streams) -> float:
    prepared = _prepared(call, kit, streams)
    with streams.current():
        prepared.arm()
        ms, _ = host_interval(prepared.call)
    runtime.deviceSynchronize()
    prepared.cleanup()
    return ms


def _measure(config: Config, call, kit, watch: SpinWatch, first: bool) -> Row:
    streams = _Streams(BY_NAME[call.library])
    first_ms = _timed(call, kit, streams) if first else None
    idle_ms = _timed(call, kit, streams)
    spin_ms = spin_for(idle_ms)
    row = {**config, "library": call.library, "category": call.category, "stream_use": call.stream,
           "spin_ms": spin_ms, "idle_host_ms": idle_ms, "first_host_ms": first_ms, "docs": call.docs,
           "source": call.source, "docs_host": call.docs_host, "status": Status.OK, "error": ""}
    placement = config["placement"]

    def once(measure):
        prepared = _prepared(call, kit, streams)
        with streams.current():
            seen = measure(prepared.call, prepared.arm)
        prepared.cleanup()
        return seen

    if placement == "between":
        repeats = repeat_between_spins(lambda: once(
            lambda made, arm: watch.call_between_spins(streams.other, streams.second, spin_ms, made, arm)), spin_ms)
        samples = repeats.samples([pair.makespan_ms for pair in repeats.seen], Unit.MS, Clock.GPU, "makespan of the two spins")
        return {**row, **samples.columns(), **pair_columns(repeats)}
    if call.stream == "own" and placement == "same":  # streams nobody can name: hold them all
        hold = device_hold()
        during = lambda made, arm: hold.call_during(spin_ms, made, arm)  # noqa: E731
    else:
        spinning = streams.spinning(call, placement)
        during = lambda made, arm: watch.call_during_spin(spinning, spin_ms, made, arm)  # noqa: E731
    repeats = repeat_until_settled(lambda: once(during), host_verdict, MIN_REPEATS)
    documented = documented_waits(call, placement)
    samples = repeats.samples([seen.host_ms for seen in repeats.seen], Unit.MS, Clock.HOST,
                              "host time of the call while a kernel runs")
    return {**row, **samples.columns(), **host_columns(repeats), "docs_waits": documented,
            "matches_docs": None if documented is None
            else documented == (repeats.verdict == HostVerdict.WAITS_FOR_DEVICE)}


def measure(configs: Sequence[Config], context: Context) -> Iterator[Row]:
    device = runtime.getDevice()  # this process's GPU: current again after anything a library did
    watch = SpinWatch()
    kits: dict[str, object] = {}
    used = {catalog()[config["call"]].library for config in configs}
    with kept_device(device):
        missing = {library: BY_NAME[library].missing() for library in used}
    versions = {library: measured_versions(library) for library in used}
    seen: set[str] = set()
    for config in configs:
        call = catalog()[config["call"]]
        if missing[call.library]:
            yield {**config, "library": call.library, "status": Status.SKIPPED, "error": missing[call.library],
                   **versions[call.library]}
            continue
        try:
            with kept_device(device):
                if call.library not in kits:
                    kits[call.library] = catalogs.kit(call.library)
                first = call.name not in seen
                seen.add(call.name)
                row = _measure(config, call, kits[call.library], watch, first)
        except Exception as error:  # the library's error for one call must not end the others
            runtime.deviceSynchronize()
            row = {**config, "library": call.library, "status": Status.FAILED,
                   "error": f"{type(error).__name__}: {error}"}
        yield {**row, **versions[call.library]}


def ahead(configs: Sequence[Config]) -> None:
    """Import the libraries the configurations call, before the experiment's turn (its first row took 6.3 s on an
    H100; importing PyTorch alone took 5.9 s there, cold)."""
    for name in dict.fromkeys(catalog()[config["call"]].library for config in configs):
        with contextlib.suppress(ImportError):  # its rows say so when they measure
            BY_NAME[name].load()


def warm_calls(names: Sequence[str], shard: int, shards: int) -> list:
    """The calls warm-up process ``shard`` of ``shards`` makes of those ``names`` names: all but the ``fresh`` ones
    (each compiles a kernel nothing has seen, which is what they measure) and those of a library that keeps what it
    compiles in memory only. Each library's calls go to processes of their own where there are enough (a process
    then imports one library: importing PyTorch took 5.9 s on a fresh H100), the shards left over to the libraries
    with the most calls per shard; with fewer shards than libraries, whole libraries share them."""
    calls: dict[str, list] = {}
    for name in dict.fromkeys(names):
        call = catalog()[name]
        if not call.fresh and BY_NAME[call.library].loading.compiles_to_disk:
            calls.setdefault(call.library, []).append(call)
    if not calls:
        return []
    groups = sorted(calls.values(), key=len, reverse=True)
    if shards < len(groups):
        packed: list[list] = [[] for _ in range(shards)]
        for group in groups:
            min(packed, key=len).extend(group)
        return packed[shard]
    parts = [1] * len(groups)
    for _ in range(shards - len(groups)):
        parts[max(range(len(groups)), key=lambda index: len(groups[index]) / parts[index])] += 1
    return [group[part::count] for group, count in zip(groups, parts) for part in range(count)][shard]


def warm(configs: Sequence[Config], shard: int = 0, shards: int = 1) -> None:
    """The configurations' calls of its shard (:func:`warm_calls`) once each, untimed: CuPy compiles the kernels
    behind them into its on-disk cache (``cupy.bincount``'s first call took 3.2 s on a fresh H200,
    ``cupy.histogram``'s 0.9 s), and so do Triton and XLA (the sweep's processes keep its compiled functions on disk:
    :attr:`bench.platform.libraries.Loading.disk_cache`), before a sweep measures them."""
    device = runtime.getDevice()
    kits: dict[str, object] = {}
    missing: dict[str, str | None] = {}  # by library: why its calls cannot run here, asked once
    for call in warm_calls([config["call"] for config in configs], shard, shards):
        try:
            with kept_device(device):
                library = BY_NAME[call.library]
                if call.library not in missing:
                    missing[call.library] = library.missing()
                if missing[call.library]:
                    continue
                if call.library not in kits:
                    kits[call.library] = catalogs.kit(call.library)
                _timed(call, kits[call.library], _Streams(library))
        except Exception:  # measured (and reported) by the sweep itself
            runtime.deviceSynchronize()


EXPERIMENT = Experiment(
    name="library",
    description="which CuPy, numba-cuda, PyTorch and JAX calls block the host or serialize kernels, against their docs",
    axes={"call": tuple(catalog()), "placement": PLACEMENTS},
    columns=COLUMNS,
    measure=measure,
    outcome=("verdict",),
    order=55,
    sweeps=Sweeps(
        # --quick leaves PyTorch to the default sweep: importing it takes 2-4 s of the smoke test's 20 s
        quick={"call": ("cupy a.item()", "cupy cupy.asarray(numpy pageable)", "numba cuda.to_device(pageable)")},
        valid=valid,
        size_axis="",
    ),
    cost=Cost(seconds, share_s=22),
    accuracy=Accuracy(floor=Floor(min_samples=MIN_REPEATS)),  # its verdict's repeats
    processes=Processes(
        own_gpu=True,  # its calls' host times beside a kernel of its own GPU; inputs of 4 MiB
        row_timeout_s=60,
        warm=warm,
        # the catalog's first calls (CuPy's and Triton's compiling): 27 s in one process on a fresh H100; in 8 processes
        # 22.1 s, where 4 took 19.0 s (all the warm-up's processes were slower), each importing every library; now a
        # process per library, CuPy's calls (the most compiling) in two
        warm_shards=5,
        ahead=ahead,
    ),
)
