"""One vocabulary: the closed sets of values are str enums that the schema takes its allowed values from, and every
call catalog, the runtime's and the libraries', is of one model. CPU only."""

import json

import pytest

from bench import catalogs, timing
from bench.catalogs import cupy_calls, numba_calls, runtime, torch_calls
from bench.experiments import registry
from bench.results.schema import COMMON, SAMPLES
from bench.platform.vocabulary import (PLACEMENTS, Clock, DeviceVerdict, DocsHost, HostVerdict, Status, StopReason,
                                       Unit, values)


def _column(columns, name):
    return next(item for item in columns if item.name == name)


@pytest.mark.parametrize(("columns", "name", "kind"), [
    (COMMON, "status", Status),
    (SAMPLES, "unit", Unit),
    (SAMPLES, "clock", Clock),
    (SAMPLES, "stop_reason", StopReason),
])
def test_each_enum_is_its_schema_column(columns, name, kind):
    allowed = _column(columns, name).values
    assert allowed == values(kind)  # the same values, in the same order (the files' metadata lists them)
    assert set(allowed) == set(kind)
    assert all(type(value) is str for value in allowed)  # plain strings in the schema's metadata


def test_verdict_and_docs_columns_take_the_enums():
    experiments = registry()
    assert set(_column(experiments["blocking"].columns, "verdict").values) == set(HostVerdict)
    assert set(_column(experiments["serialization"].columns, "verdict").values) == set(DeviceVerdict)
    assert set(_column(experiments["library"].columns, "verdict").values) == set(HostVerdict) | set(DeviceVerdict)
    assert set(_column(experiments["blocking"].columns, "docs_host").values) == set(DocsHost)
    assert _column(experiments["library"].columns, "docs_host").values == catalogs.LIBRARY_DOCS_HOST


def test_timing_keeps_to_the_vocabulary():
    """Until timing takes its units, clocks and stop reasons from bench.platform.vocabulary, they must not drift apart."""
    assert tuple(timing.UNITS) == values(Unit)
    assert tuple(timing.CLOCKS) == values(Clock)
    assert tuple(timing.STOP_REASONS) == values(StopReason)


def test_members_read_as_their_strings():
    member = HostVerdict.WAITS_FOR_DEVICE
    assert member == "waits-for-device" and hash(member) == hash("waits-for-device")
    assert str(member) == f"{member}" == "waits-for-device" and f"{member:>17}" == " waits-for-device"
    assert json.dumps([member, Status.OK]) == '["waits-for-device", "ok"]'
    assert {"ok": 1}[Status.OK] == 1 and Status("ok") is Status.OK


def test_every_catalog_is_of_the_one_model():
    assert set(catalogs.MODULES) == {catalogs.RUNTIME, *catalogs.LIBRARIES}
    for module, library in ((runtime, catalogs.RUNTIME), (cupy_calls, "cupy"), (numba_calls, "numba-cuda"),
                            (torch_calls, "torch")):
        assert module.CALLS and module.Prepared is catalogs.Prepared
        assert catalogs.calls(library) is module.CALLS
        for call in module.CALLS:
            assert type(call) is catalogs.Call and call.library == library
            assert type(call.docs_host) is DocsHost and call.docs and call.source.startswith(("https://", ""))
    everything = catalogs.catalog(*catalogs.MODULES)
    assert len(everything) == sum(len(catalogs.calls(library)) for library in catalogs.MODULES)  # unique names
    assert runtime.catalog() == catalogs.catalog(catalogs.RUNTIME)
    assert list(catalogs.catalog()) == [call.name for library in catalogs.LIBRARIES for call in catalogs.calls(library)]
    assert all(call.docs_host in catalogs.LIBRARY_DOCS_HOST for call in catalogs.catalog().values())  # no "maybe"
    assert all(call.category in catalogs.CATEGORIES and call.stream in catalogs.STREAM_USE
               for call in catalogs.catalog().values())
    assert all(call.api and set(call.placements) <= set(PLACEMENTS) for call in runtime.CALLS)


def test_one_documented_waits_for_every_catalog():
    """A library call on its own stream (``same``) is ordered behind the spin, on another it is not: the runtime's
    rule with a non-blocking spinning stream."""
    stream_call = catalogs.catalog()["cupy stream.synchronize()"]
    assert catalogs.documented_waits(stream_call, "same") is True
    assert catalogs.documented_waits(stream_call, "other") is False
    runtime_call = runtime.catalog()["cudaStreamSynchronize"]
    assert catalogs.documented_waits(runtime_call, "legacy", spin_blocking=True) is True
    assert catalogs.documented_waits(runtime_call, "legacy", spin_blocking=False) is False
    with pytest.raises(ValueError):
        catalogs.Call("x", "cupy", "sometimes", "", "", lambda kit, stream: None)
    with pytest.raises(ValueError):
        catalogs.Call("x", "tensorflow", "never", "", "", lambda kit, stream: None)


def test_words_both_sides_name_are_defined_once():
    """An axis whose words the views name too takes them from bench.platform.vocabulary (a subset of an enum's values where
    the experiment measures only some); so do the catalogs' placements and the spinning streams."""
    from bench.experiments import batched, bandwidth, hostlinks, hostmemory, roundtrip, zerocopy
    from bench.measure import columns
    from bench.platform.vocabulary import SPIN_STREAMS, Direction, HostMemory, HostOperation

    assert catalogs.STREAM_PLACEMENTS == PLACEMENTS[:-1] and PLACEMENTS[-1] == "none"
    assert columns.SPIN_STREAM.values == SPIN_STREAMS
    assert bandwidth.DIRECTIONS == values(Direction)
    for module in (hostlinks, roundtrip, zerocopy):
        assert set(module.DIRECTIONS) <= set(values(Direction))
    assert set(hostmemory.COPIES) <= set(values(HostOperation)) and hostmemory.OPERATIONS == values(HostOperation)
    for kinds in (batched.HOST_KINDS, hostmemory.HOST_KINDS):
        assert set(kinds) <= set(values(HostMemory))
