"""Before it exits, the command line waits until pyarrow's thread pools are idle (bench.results.arrow_threads says why)."""

import sys

import pandas as pd
import pytest

from bench import cli
from bench.results import arrow_threads


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="libarrow's C++ names are looked up as on Linux")
def test_the_pools_are_found_and_waited_for():
    import pyarrow  # noqa: F401  (what pandas' string columns load)

    found = arrow_threads.waiter()
    assert found is not None, "libarrow's ThreadPool::WaitForIdle not found: the exit could abort again"
    wait, pools = found
    assert len(pools) == 2 and all(pools)
    frame = pd.DataFrame({"key": ["a", "b"] * 50, "run": [str(value) for value in range(100)]})
    frame.groupby("key")["run"].transform("max")  # an Acero plan on the CPU pool, its ids a NumPy-backed buffer
    arrow_threads.wait_until_idle()


def test_every_command_waits_for_the_pools_however_it_ends(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    waits = []
    monkeypatch.setattr(arrow_threads, "wait_until_idle", lambda: waits.append(1))
    assert cli.main(["plot", "missing.parquet"]) == 2  # a user's mistake
    assert cli.main(["sweep", "--list"]) == 0
    assert waits == [1, 1]
