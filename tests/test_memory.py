"""BufferSet's lifetime rules, with stand-ins for CuPy streams and buffers (no GPU needed)."""

from types import SimpleNamespace

import pytest

from bench.measure import memory


class FakeStream:
    synced = []

    def __init__(self, non_blocking):
        assert non_blocking

    def synchronize(self):
        FakeStream.synced.append(self)


class FakeBuffer:
    def __init__(self, name, log):
        self.name, self.log = name, log

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.log.append(self.name)


@pytest.fixture
def fake_streams(monkeypatch):
    FakeStream.synced = []
    monkeypatch.setattr(memory, "cupy", SimpleNamespace(cuda=SimpleNamespace(Stream=FakeStream)))  # no CuPy needed


def test_close_syncs_streams_then_frees_in_reverse(fake_streams):
    freed = []
    with memory.BufferSet(streams=3) as buffers:
        assert buffers.take(FakeBuffer("a", freed)).name == "a"
        buffers.take(FakeBuffer("b", freed))
        assert freed == []
    assert len(FakeStream.synced) == 3 and freed == ["b", "a"]


def test_allocation_failure_frees_what_was_taken(fake_streams):
    freed = []

    class Pair(memory.BufferSet):
        def __init__(self):
            super().__init__(streams=2)
            with self.freed_on_failure():
                self.take(FakeBuffer("first", freed))
                raise MemoryError("out of device memory")

    with pytest.raises(MemoryError):
        Pair()
    assert freed == ["first"] and len(FakeStream.synced) == 2
