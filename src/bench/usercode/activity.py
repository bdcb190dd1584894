"""What ran on the GPU, from CUPTI (``cupti-python``, the ``cupti`` extra): activity records of every kernel, copy
and memset with its GPU, its stream, the correlation id of the driver call that enqueued it, and its start and end
on the GPU (execution times: a copy's record begins when its engine starts it, not when it was enqueued), and
callbacks on the driver calls that may wait (:data:`bench.usercode.cuda_calls.WAITING`), each with its host start and
end on the same clock, its correlation id and, where it took long or copied, the Python stack that made it.
The records go into buffers allocated before recording starts and are read after it stops
(:mod:`bench.usercode.activity_buffers`): no Python work per record while a region runs.

:class:`Recorder` is opened once (:func:`open_recorder`, which says in one line why it cannot be: no cupti-python,
no libcupti, another profiler holding CUPTI) and records between :meth:`Recorder.start` and :meth:`Recorder.stop`.
"""

from __future__ import annotations

import contextlib
import ctypes
from dataclasses import dataclass
from threading import get_ident

from bench.usercode import activity_buffers
from bench.usercode.activity_buffers import Layout
from bench.usercode.cuda_calls import waiting_callback_ids
from bench.usercode.driver_callbacks import CuptiFailed, DriverCallbacks, caller_frame, check, library
from bench.usercode.stacks import Frame, frames_of, places_of
from bench.platform.vocabulary import Word

FRAMES_AFTER_NS = 20_000  # a watched driver call this long keeps its Python stack (a copy call always does)
KERNEL_FIELDS = ("start", "end", "device_id", "stream_id", "correlation_id", "name")
MEMSET_FIELDS = ("start", "end", "device_id", "stream_id", "correlation_id", "bytes")
MEMCPY_FIELDS = (*MEMSET_FIELDS, "copy_kind", "src_kind", "dst_kind")


class Op(Word):
    """What one activity record did."""

    KERNEL = "kernel"
    MEMSET = "memset"
    H2D = "H2D"
    D2H = "D2H"
    D2D = "D2D"
    H2H = "H2H"
    P2P = "P2P"


COPIES = (Op.H2D, Op.D2H, Op.D2D, Op.H2H, Op.P2P)


class TraceUnavailable(RuntimeError):
    """CUPTI cannot trace here; the message is one line that says why."""


@dataclass(frozen=True)
class Activity:
    """One kernel, copy or memset as the GPU ran it (CUPTI's clock, ns)."""

    op: Op
    stream: int
    start_ns: int
    end_ns: int
    bytes: int = 0  # copies and memsets
    host_memory: str = ""  # a copy's host side: pinned, pageable, managed; device for D2D; "" for kernels
    name: str = ""  # a kernel's name
    correlation: int = 0  # the driver call that enqueued it (:attr:`HostCall.correlation`)
    device: int = 0  # the GPU that ran it: CUPTI's device id
    rank: int | None = None  # the process that recorded it, in a trace merged from several (bench.usercode.trace.merge)


@dataclass(frozen=True)
class HostCall:
    """One watched driver call on the host (CUPTI's clock, ns), and where in Python it was made."""

    call: str
    start_ns: int
    end_ns: int
    correlation: int
    frames: tuple[Frame, ...] = ()  # outermost first; empty for short calls that copied nothing
    rank: int | None = None  # the process that made it, in a trace merged from several (bench.usercode.trace.merge)

    @property
    def ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


@dataclass
class Recording:
    """What one recorded stretch collected."""

    activities: list[Activity]
    calls: list[HostCall]


def _memory_kinds(cupti) -> dict[int, str]:
    kinds = cupti.ActivityMemoryKind
    names = {"PAGEABLE": "pageable", "PINNED": "pinned", "MANAGED": "managed", "MANAGED_STATIC": "managed",
             "DEVICE": "device", "DEVICE_STATIC": "device", "ARRAY": "array"}
    return {int(getattr(kinds, name)): value for name, value in names.items() if hasattr(kinds, name)}


def _copy_ops(cupti) -> dict[int, Op]:
    kinds = cupti.ActivityMemcpyKind
    names = {"HTOD": Op.H2D, "HTOA": Op.H2D, "DTOH": Op.D2H, "ATOH": Op.D2H, "DTOD": Op.D2D, "DTOA": Op.D2D,
             "ATOD": Op.D2D, "ATOA": Op.D2D, "HTOH": Op.H2H, "PTOP": Op.P2P}
    return {int(getattr(kinds, name)): op for name, op in names.items() if hasattr(kinds, name)}


def _newest(cupti, stem: str):
    """``cupti-python``'s dtype of the newest version of a record structure (``activity_kernel10_dtype`` for
    ``kernel``): the structure CUPTI writes (newer versions only add fields at the end)."""
    prefix = f"activity_{stem}"
    versions = {int(name[len(prefix):-6] or 0): name for name in dir(cupti)
                if name.startswith(prefix) and name.endswith("_dtype") and (name[len(prefix):-6] or "0").isdigit()}
    return getattr(cupti, versions[max(versions)])


def _layouts(cupti) -> dict[int, Layout]:
    """Where the fields bench reads lie in CUPTI's kernel, memset and copy records, by record kind."""
    kinds = cupti.ActivityKind
    return {int(kinds.CONCURRENT_KERNEL): Layout.of(_newest(cupti, "kernel"), KERNEL_FIELDS),
            int(kinds.MEMCPY): Layout.of(_newest(cupti, "memcpy"), MEMCPY_FIELDS),
            int(kinds.MEMSET): Layout.of(_newest(cupti, "memset"), MEMSET_FIELDS)}


class Recorder:
    """CUPTI's activity buffers registered and, with ``calls``, CUPTI subscribed to the driver calls that may wait,
    until :meth:`close`; records and callbacks are on only between :meth:`start` and :meth:`stop`. Every CUPTI
    error is :class:`TraceUnavailable`."""

    def __init__(self, calls: bool = True) -> None:
        from cupti import cupti

        self._cupti = cupti
        self._memory = _memory_kinds(cupti)
        self._copy = _copy_ops(cupti)
        self._kinds = (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMCPY, cupti.ActivityKind.MEMSET)
        self._names = waiting_callback_ids(cupti)
        self._copying = {callback_id for callback_id, name in self._names.items() if "Memcpy" in name}
        self._timestamp = cupti.get_timestamp
        self._layouts = _layouts(cupti)
        self._names_at: dict[int, str] = {}  # a kernel name's address in CUPTI -> the name
        self._open: dict[int, list[tuple[int, int, int]]] = {}
        self._calls: list[tuple] | None = None  # (callback id, start, end, correlation, places) while recording
        self._error: BaseException | None = None  # raised in a callback (an interrupt), re-raised by stop()
        self._scratch: int | None = None
        self._since = 0
        self._subscriber = self._subscribe() if calls else None
        try:
            self._library = library(cupti)
            self._pool = activity_buffers.registered(self._library, lambda status: check(self._library, status))
        except CuptiFailed as error:
            self._unsubscribe()
            raise TraceUnavailable(f"CUPTI: {error}") from None
        except BaseException:
            self._unsubscribe()
            raise

    def _subscribe(self) -> DriverCallbacks:
        try:
            return DriverCallbacks(self._cupti, "bench trace", self._names, self._on_call, self._on_error)
        except CuptiFailed as error:
            if error.holder is not None:
                raise TraceUnavailable(f"CUPTI is taken by {error.holder or 'another profiler'}: run bench trace "
                                       "outside the profiler") from None
            raise TraceUnavailable(f"CUPTI: {error}") from None

    def _unsubscribe(self) -> None:
        if self._subscriber is not None:
            self._subscriber.close()
            self._subscriber = None

    def _watch(self, on: bool) -> None:
        """The callbacks of the driver calls that may wait, on or off (off outside recording: no cost there)."""
        if self._subscriber is not None:
            try:
                self._subscriber.watch(on)
            except CuptiFailed as error:
                raise TraceUnavailable(f"CUPTI: {error}") from None

    def _on_call(self, callback_id: int, entering: bool, correlation: int) -> None:
        calls = self._calls
        if calls is None:
            return
        now = self._timestamp()
        open_calls = self._open.get(get_ident())
        if open_calls is None:
            open_calls = self._open[get_ident()] = []
        if entering:
            open_calls.append((callback_id, now, correlation))
            return
        if not open_calls:
            return
        callback_id, start, correlation = open_calls.pop()
        places = ()
        if now - start >= FRAMES_AFTER_NS or callback_id in self._copying:
            places = places_of(caller_frame(), to_user_line=True)  # short: the call is waiting
        calls.append((callback_id, start, now, correlation, places))

    def _on_error(self, error: BaseException) -> None:
        """What a callback raised (an interrupt that landed there): raised by :meth:`stop`."""
        self._error = self._error or error

    def start(self) -> None:
        """Record from now: activity records and watched calls. A 4-byte memset first makes CUPTI take its first
        activity buffer (a Python callback that would otherwise stall the region's first call); it and everything
        before it are dropped."""
        from bench.platform.cuda import runtime

        self._open, self._error = {}, None
        self._pool.give_back(self._pool.take())  # what came before is not this recording's
        try:
            with _cupti_errors():
                for kind in self._kinds:
                    self._cupti.activity_enable(kind)
                if self._scratch is None:
                    self._scratch = runtime.malloc(4)
                runtime.memset(self._scratch, 0, 4)
                runtime.deviceSynchronize()
                self._since = self._cupti.get_timestamp()
                self._watch(True)
        except BaseException:
            self._disable()
            raise
        self._calls = []

    def synchronize(self) -> None:
        """Wait for the GPUs to finish the region's work: bench's own wait, not one of the region's."""
        calls, self._calls = self._calls, None
        try:
            synchronize_used()
        finally:
            self._calls = calls

    def stop(self) -> Recording:
        """Stop recording (after :meth:`synchronize`) and return what was recorded."""
        calls, self._calls = self._calls or [], None
        try:
            with _cupti_errors():
                self._watch(False)
                self._cupti.activity_flush_all(1)
        finally:
            self._disable()
        buffers = self._pool.take()
        try:
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            activities = [activity for kind, fields in activity_buffers.read(self._library, buffers, self._layouts)
                          for activity in self._activities(kind, fields) if activity.start_ns >= self._since]
        finally:
            self._pool.give_back(buffers)
        activities.sort(key=lambda activity: (activity.start_ns, activity.end_ns))
        return Recording(activities,
                         [HostCall(self._names[callback_id], start, end, correlation, frames_of(places))
                          for callback_id, start, end, correlation, places in calls if start >= self._since])

    def _disable(self) -> None:
        for kind in self._kinds:
            with contextlib.suppress(Exception):
                self._cupti.activity_disable(kind)

    def _activities(self, kind: int, fields: dict) -> list[Activity]:
        """The records of one kind of one buffer (their fields as arrays) as activities."""
        rows = zip(*(fields[name].tolist() for name in MEMSET_FIELDS[:5]))
        if kind == self._kinds[0]:
            names = [self._name(address) for address in fields["name"].tolist()]
            return [Activity(Op.KERNEL, stream, start, end, 0, "", name, correlation, device)
                    for (start, end, device, stream, correlation), name in zip(rows, names)]
        if kind == self._kinds[2]:
            return [Activity(Op.MEMSET, stream, start, end, size, "", "", correlation, device)
                    for (start, end, device, stream, correlation), size in zip(rows, fields["bytes"].tolist())]
        found = []
        for (start, end, device, stream, correlation), size, copy, source, target in zip(
                rows, *(fields[name].tolist() for name in MEMCPY_FIELDS[5:])):
            op = self._copy.get(copy, Op.D2D)
            host_side = source if op == Op.H2D else target
            found.append(Activity(op, stream, start, end, size, self._memory.get(host_side, "unknown"), "",
                                  correlation, device))
        return found

    def _name(self, address: int) -> str:
        """A kernel's name from its address in CUPTI (names are CUPTI's for the process's life)."""
        name = self._names_at.get(address)
        if name is None:
            name = self._names_at[address] = ctypes.string_at(address).decode(errors="replace") if address else ""
        return name

    def close(self) -> None:
        self._calls = None
        self._disable()
        self._unsubscribe()
        if self._scratch is not None:
            from bench.platform.cuda import runtime

            runtime.free(self._scratch)
            self._scratch = None


def synchronize_used() -> None:
    """Wait for every GPU this process has used: the current one and each whose primary context is active (a region
    on several GPUs ends on all of them)."""
    from bench.platform.cuda import runtime
    from bench.usercode.hold import devices_in_use, synchronize

    synchronize(sorted({runtime.getDevice(), *devices_in_use()}))


@contextlib.contextmanager
def _cupti_errors():
    """CUPTI's errors as :class:`TraceUnavailable`, one line."""
    from cupti import cupti

    try:
        yield
    except cupti.cuptiError as error:
        raise TraceUnavailable(f"CUPTI: {error}") from None


def open_recorder(calls: bool = True) -> Recorder:
    """CUPTI ready to record (``calls``: the driver calls too), or :class:`TraceUnavailable` saying why in one
    line."""
    try:
        import cupti.cupti  # noqa: F401
    except ImportError:
        raise TraceUnavailable("tracing needs CUPTI: cupti-python is not installed "
                               "(pip install \"cuda-sync-bench[cupti]\")") from None
    try:
        return Recorder(calls)
    except TraceUnavailable:
        raise
    except Exception as error:  # no libcupti, an old driver
        raise TraceUnavailable(f"CUPTI cannot trace here: {type(error).__name__}: {error}") from None
