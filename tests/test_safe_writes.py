"""Writing files safely (bench.results.store): a new run's file never replaces another file, however many runs race for a
name; a symlink is never written through (every writer: tests/test_symlinks.py); a device, a pipe or a directory is
never replaced; a full disk is one error and leaves the old file as it was."""

import errno
import os
import stat
import threading

import pytest

import disks
import synthetic
from bench.results import store, writes
from bench.platform.errors import WriteError

ROWS = synthetic.launch_records()


def _write(path, run_id="r1", new=True):
    return store.write(path, synthetic.tagged(ROWS, run_id=run_id), synthetic.suite(), {"run_id": run_id},
                       new=new)


def _run_ids(path) -> set:
    return set(store.read(path, synthetic.suite())["run_id"])


def test_a_new_file_takes_the_next_free_name_and_replaces_nothing(tmp_path):
    taken = tmp_path / "20261121T000000Z-GPU.parquet"
    taken.write_bytes(b"another run's results")
    assert _write(taken, "r1") == tmp_path / "20261121T000000Z-GPU_2.parquet"
    assert _write(taken, "r2") == tmp_path / "20261121T000000Z-GPU_3.parquet"
    assert taken.read_bytes() == b"another run's results"
    assert _run_ids(tmp_path / "20261121T000000Z-GPU_2.parquet") == {"r1"}
    assert store.newest(tmp_path).name == "20261121T000000Z-GPU_3.parquet"  # the later run sorts last
    assert _write(taken, "r3", new=False) == taken and _run_ids(taken) == {"r3"}  # a run's own file: rewritten
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "20261121T000000Z-GPU.parquet", "20261121T000000Z-GPU_2.parquet", "20261121T000000Z-GPU_3.parquet"]


def test_runs_racing_for_one_name_each_get_a_file_of_their_own(tmp_path):
    path, racers = tmp_path / "r.parquet", 12
    start, written = threading.Barrier(racers), {}

    def race(run_id: str) -> None:
        start.wait()
        written[run_id] = _write(path, run_id)

    threads = [threading.Thread(target=race, args=(f"r{index}",)) for index in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(written.values())) == racers and path in written.values()
    assert all(_run_ids(where) == {run_id} for run_id, where in written.items())
    assert len(list(tmp_path.iterdir())) == racers  # and no temporary file left


def test_without_hard_links_a_new_file_is_still_exclusive(tmp_path, monkeypatch):
    def no_links(source, target):
        raise OSError(errno.EPERM, os.strerror(errno.EPERM))

    monkeypatch.setattr(os, "link", no_links)
    path = tmp_path / "r.parquet"
    assert _write(path, "r1") == path and _write(path, "r2") == tmp_path / "r_2.parquet"
    assert _run_ids(path) == {"r1"} and _run_ids(tmp_path / "r_2.parquet") == {"r2"}
    assert len(list(tmp_path.iterdir())) == 2


def _device(path):
    """A character device like /dev/full at ``path`` (root only), or skip."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    except (PermissionError, AttributeError):
        pytest.skip("creating a device node needs root")
    return path


@pytest.mark.parametrize("kind, make", [
    ("a pipe", os.mkfifo),
    ("a directory", os.mkdir),
    ("a character device", _device),
])
def test_what_is_not_a_regular_file_is_never_replaced(tmp_path, kind, make):
    make(tmp_path / "target")
    (tmp_path / "link").symlink_to("target")
    mode = (tmp_path / "target").lstat().st_mode
    with pytest.raises(WriteError, match=f"^{tmp_path / 'target'} is {kind}, not a regular file; bench writes only "
                                         "regular files$"):
        writes.write_bytes(tmp_path / "target", b"report")
    with pytest.raises(WriteError, match=f"^--out: {tmp_path / 'link'} is a symlink"):
        writes.write_target(tmp_path / "link", "--out")
    with pytest.raises(WriteError, match="is a symlink"):
        _write(tmp_path / "link")
    assert (tmp_path / "target").lstat().st_mode == mode and (tmp_path / "link").is_symlink()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["link", "target"]


def test_a_full_disk_is_one_error_and_the_old_file_stays(tmp_path, monkeypatch):
    report = tmp_path / "report.html"
    report.write_text("the old report")
    results = _write(tmp_path / "r.parquet", "r1")

    def full(descriptor):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(WriteError, match=f"^cannot write {report}: No space left on device$"):
        writes.write_bytes(report, b"x" * 100_000)
    monkeypatch.undo()
    disks.fills_after(monkeypatch, 0)
    with pytest.raises(WriteError, match=f"^cannot write {results}: No space left on device$"):
        _write(results, "r2", new=False)
    with pytest.raises(WriteError, match="No space left on device"):
        _write(tmp_path / "new.parquet", "r3")
    assert report.read_text() == "the old report" and _run_ids(results) == {"r1"}
    assert sorted(path.name for path in tmp_path.iterdir()) == ["r.parquet", "report.html"]
