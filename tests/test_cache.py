"""What bench keeps from one command to the next (:mod:`bench.platform.cache`): keys that name every input, entries written
whole and pruned oldest first, a cache that is off or unwritable passed over; the report kept whole and its figures
by what they show; and ``-v``, where a command's seconds went (:mod:`bench.timing.phases`)."""

import hashlib
import os
import re
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

import synthetic
from bench.platform import cache
from bench.report import figures
from bench.timing import phases
from commands import bench

# --- keys ------------------------------------------------------------------------------------------------------


def test_a_key_is_the_same_for_the_same_parts_and_names_its_kind():
    assert cache.key("report", ["a", b"b"]) == cache.key("report", ["a", b"b"])
    assert re.fullmatch(r"report-[0-9a-f]{64}", cache.key("report", ["a", b"b"]))
    assert cache.key("k", ["\udcff"])  # a path's undecodable byte, as Python keeps it in a str


def test_a_key_changes_with_any_part_and_with_the_kind():
    parts = ["one", b"two", "three"]
    others = [parts[:i] + ["changed"] + parts[i + 1:] for i in range(len(parts))]
    keys = {cache.key("k", parts), cache.key("other", parts), cache.key("k", parts[:2]),
            *(cache.key("k", changed) for changed in others)}
    assert len(keys) == 2 + 1 + len(others)


def test_a_part_boundary_cannot_move():
    assert cache.key("k", ["ab", "c"]) != cache.key("k", ["a", "bc"])
    assert cache.key("k", ["a"]) != cache.key("k", ["a", ""])
    assert cache.key("k", []) != cache.key("", ["k"])


def test_a_key_changes_with_bench_s_code_and_the_libraries_named(monkeypatch):
    before = cache.key("k", ["a"])
    assert cache.key("k", ["a"], ["numpy"]) != before
    monkeypatch.setattr(cache, "_source_digest", lambda: "another line of bench")
    assert cache.key("k", ["a"]) != before


def test_a_files_digest_is_the_sha256_of_its_bytes(tmp_path):
    data = os.urandom((1 << 20) + 3)  # more than a block
    (tmp_path / "f").write_bytes(data)
    assert cache.file_digest(tmp_path / "f") == hashlib.sha256(data).hexdigest()


# --- where entries live ----------------------------------------------------------------------------------------


def test_the_cache_is_under_xdg_cache_home_else_home(tmp_path, monkeypatch):
    monkeypatch.delenv("BENCH_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.directory() == tmp_path / "xdg" / "cuda-sync-bench"
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.directory() == tmp_path / "home" / ".cache" / "cuda-sync-bench"
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "mine"))
    assert cache.directory() == tmp_path / "mine"
    monkeypatch.setenv("BENCH_CACHE_DIR", "off")
    assert cache.directory() is None


@pytest.fixture
def kept_in(tmp_path, monkeypatch) -> Path:
    """A cache directory of this test's own (not yet made)."""
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_what_is_put_is_got_back_and_nothing_else(kept_in):
    assert cache.get("k-1") is None and not kept_in.exists()
    cache.put("k-1", b"first")
    cache.put("k-2", b"")
    cache.put("k-1", b"again")
    assert cache.get("k-1") == b"again" and cache.get("k-2") == b"" and cache.get("k-3") is None
    assert sorted(path.name for path in kept_in.iterdir()) == ["k-1", "k-2"]  # no partial file left


def test_a_cache_that_is_off_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_CACHE_DIR", "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cache.put("k-1", b"data")
    assert cache.get("k-1") is None and list(tmp_path.iterdir()) == []


def test_a_cache_that_cannot_be_written_is_passed_over(tmp_path, monkeypatch):
    (tmp_path / "a file").write_text("mine")
    for where in (tmp_path / "a file", tmp_path / "a file" / "below"):
        monkeypatch.setenv("BENCH_CACHE_DIR", str(where))
        cache.put("k-1", b"data")
        assert cache.get("k-1") is None
    assert os.listdir(tmp_path) == ["a file"] and (tmp_path / "a file").read_text() == "mine"


def test_past_the_limit_the_entries_used_longest_ago_go_first(kept_in, monkeypatch):
    monkeypatch.setattr(cache, "LIMIT_BYTES", 2 * (32 + 4))  # two entries of 4 bytes, each with its SHA-256
    cache.put("a", b"1234")
    cache.put("b", b"1234")
    os.utime(kept_in / "a", ns=(1_000_000_000, 1_000_000_000))
    os.utime(kept_in / "b", ns=(2_000_000_000, 2_000_000_000))
    (kept_in / ".part-of-another-writer").write_bytes(b"x" * 100)  # neither counted nor removed
    cache.put("c", b"1234")
    assert sorted(path.name for path in kept_in.iterdir()) == [".part-of-another-writer", "b", "c"]
    os.utime(kept_in / "c", ns=(3_000_000_000, 3_000_000_000))
    assert cache.get("b") == b"1234"  # used now: newer than c
    cache.put("d", b"1234")
    assert sorted(path.name for path in kept_in.iterdir()) == [".part-of-another-writer", "b", "d"]


def test_an_entry_bigger_than_the_limit_is_not_kept(kept_in, monkeypatch):
    monkeypatch.setattr(cache, "LIMIT_BYTES", 32 + 3)
    cache.put("a", b"1234")
    assert cache.get("a") is None


# --- entries of several byte strings ---------------------------------------------------------------------------


def test_packed_fields_unpack_as_they_were():
    for fields in ([], [b""], [b"", b"x", b"\x00" * 9, b""], [bytes(range(256)) * 5]):
        assert cache.unpacked(cache.packed(fields)) == fields


def test_a_damaged_entry_unpacks_as_none():
    data = cache.packed([b"abc", b"de"])
    ends = {8 + 3, len(data)}  # where a field ends: a shorter entry, not a damaged one
    for cut in range(1, len(data)):
        if cut not in ends:
            assert cache.unpacked(data[:cut]) is None, cut
    assert cache.unpacked(b"\xff" * 8 + b"a") is None  # a length past the end


def test_figures_are_drawn_once_for_what_they_show(kept_in):
    drawn = []

    def draw(label):
        def paint() -> list[bytes]:
            drawn.append(label)
            return [label.encode(), b"", b"\x89PNG"]
        return paint

    rows = pd.DataFrame({"x": [1.0, 2.0]})
    assert figures.kept(draw("first"), (rows, {}, ["launch"]), figures.compact) == [b"first", b"", b"\x89PNG"]
    assert figures.kept(draw("again"), (rows.copy(), {}, ["launch"]), figures.compact) == [b"first", b"", b"\x89PNG"]
    assert figures.kept(draw("other rows"), (rows * 2, {}, ["launch"]), figures.compact)[0] == b"other rows"
    assert figures.kept(draw("other view"), (rows, {}, ["latency"]), figures.compact)[0] == b"other view"
    assert drawn == ["first", "other rows", "other view"]


def test_a_damaged_figures_entry_is_drawn_again(kept_in):
    shown = (pd.DataFrame({"x": [1.0]}), {}, ["launch"])
    figures.kept(lambda: [b"a", b"b", b"c"], shown, figures.compact)
    [entry] = kept_in.iterdir()
    entry.write_bytes(entry.read_bytes()[:-1])
    assert figures.kept(lambda: [b"drawn", b"b", b"c"], shown, figures.compact) == [b"drawn", b"b", b"c"]
    assert figures.kept(lambda: [b"not drawn"], shown, figures.compact) == [b"drawn", b"b", b"c"]


# --- phases ----------------------------------------------------------------------------------------------------


class Clock:
    """A perf_counter that moves only when told."""

    def __init__(self, now: float = 100.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    """bench.timing.phases' clock, a fake; its own PHASES and nothing started."""
    fake = Clock()
    monkeypatch.setattr(phases, "time", SimpleNamespace(perf_counter=fake))
    monkeypatch.setattr(phases, "PHASES", phases.Phases())
    monkeypatch.setattr(phases, "_BEGAN", [])
    monkeypatch.setattr(phases, "process_age_s", lambda: 10.0)
    return fake


def test_a_phase_inside_another_counts_only_in_the_inner_one(clock):
    recorded = phases.Phases()
    with recorded("outer"):
        clock.now += 1
        with recorded("inner"):
            clock.now += 2
            with recorded("innermost"):
                clock.now += 4
        clock.now += 8
    with recorded("inner"):  # again: added
        clock.now += 16
    recorded.add("outer", 0.5)
    assert recorded.phases() == [phases.Phase("outer", 9.5), phases.Phase("inner", 18.0),
                                 phases.Phase("innermost", 4.0)]


def test_a_phase_ended_by_an_error_still_counts(clock):
    recorded = phases.Phases()
    with pytest.raises(KeyError), recorded("outer"):
        with recorded("inner"):
            clock.now += 2
            raise KeyError
    assert recorded.phases() == [phases.Phase("outer", 0.0), phases.Phase("inner", 2.0)]


def test_the_commands_phases_are_the_interpreters_start_the_marked_ones_and_the_rest(clock):
    assert phases.command_phases() == []  # nothing started: only what was marked
    clock.now = 101.0
    phases.started(100.0)  # bench's first line ran a second ago, the process 10 s ago
    phases.started(50.0)  # once only
    with phases.PHASES("work"):
        clock.now += 2
    clock.now += 1
    assert phases.command_phases() == [phases.Phase(phases.INTERPRETER, 9.0), phases.Phase(phases.IMPORTS, 1.0),
                                       phases.Phase("work", 2.0), phases.Phase(phases.OTHER, 1.0)]


# --- the report through the command line -----------------------------------------------------------------------


@pytest.fixture
def work(tmp_path) -> Path:
    """A directory with results/ of one small results file."""
    synthetic.write(tmp_path / "work" / "results" / "r.parquet", synthetic.launch_records())
    return tmp_path / "work"


def report(work: Path, kept: Path | str, *args) -> str:
    """``bench report ARGS`` in ``work``, the cache in ``kept``, figures painted blank: its stderr."""
    done = bench("report", *args, cwd=work, without_cuda=True, BENCH_CACHE_DIR=str(kept))
    assert done.returncode == 0 and done.stdout == f"wrote {args[args.index('--out') + 1]}\n", done.stderr
    return done.stderr


def reports(kept: Path) -> list[Path]:
    """The reports kept by commands whose figures were painted blank (tests/clone_site keeps them apart)."""
    return sorted((kept / "blank-painted").glob("report-*"))


def tree(directory: Path) -> dict[str, bytes]:
    return {str(path.relative_to(directory)): path.read_bytes() if path.is_file() else b"/"
            for path in directory.rglob("*")}


def test_a_report_is_kept_and_made_again_from_the_cache(work, tmp_path):
    kept = tmp_path / "cache"
    assert report(work, kept, "results", "--out", "a.html") == ""
    [entry] = reports(kept)
    assert entry.read_bytes()[32:] == (work / "a.html").read_bytes()  # after its SHA-256
    assert report(work, kept, "results", "--out", "b.html") == ""
    assert (work / "b.html").read_bytes() == (work / "a.html").read_bytes() and reports(kept) == [entry]
    held = b"what the cache held"
    entry.write_bytes(hashlib.sha256(held).digest() + held)  # an entry as the cache writes it: the next report is it
    report(work, kept, "results", "--out", "c.html")
    assert (work / "c.html").read_bytes() == b"what the cache held"


def test_a_report_leaves_the_results_and_the_working_directory_as_they_were(work, tmp_path):
    kept = tmp_path / "cache"
    before, written = tree(work), {}
    for out in ("a.html", "b.html"):  # made, then from the cache
        report(work, kept, "results", "--out", out)
        written[out] = (work / out).read_bytes()
        assert tree(work) == {**before, **written}


def test_other_results_bytes_miss_the_kept_report(work, tmp_path):
    kept = tmp_path / "cache"
    report(work, kept, "results", "--out", "a.html")
    synthetic.write(work / "results" / "more.parquet", synthetic.latency_records())  # another file
    report(work, kept, "results", "--out", "b.html")
    assert len(reports(kept)) == 2 and "latency" in (work / "b.html").read_text()
    synthetic.write(work / "results" / "more.parquet", synthetic.latency_records(), run_id="20261122T000000Z")
    report(work, kept, "results", "--out", "c.html")  # the same names, other bytes
    assert len(reports(kept)) == 3


def test_other_sources_or_another_gpu_choice_miss_the_kept_report(work, tmp_path):
    kept = tmp_path / "cache"
    report(work, kept, "results", "--out", "a.html")
    report(work, kept, "results", "--gpu", "Test GPU", "--out", "b.html")
    report(work, kept, "results/r.parquet", "--out", "c.html")
    assert len(reports(kept)) == 3


def test_a_report_that_skipped_a_file_is_not_kept(work, tmp_path):
    kept = tmp_path / "cache"
    (work / "results" / "torn.parquet").write_bytes(b"PAR1 half a file")
    for out in ("a.html", "b.html"):  # each run says so again
        said = report(work, kept, "results", "--out", out)
        assert said.startswith("bench: warning: skipped a file: ") and "torn.parquet" in said, said
    assert reports(kept) == []


def test_with_the_cache_off_nothing_is_kept_anywhere(work, tmp_path):
    done = bench("report", "results", "--out", "a.html", cwd=work, without_cuda=True, BENCH_CACHE_DIR="off",
                 XDG_CACHE_HOME=str(tmp_path / "xdg"), HOME=str(tmp_path / "home"))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    made = [path.relative_to(tmp_path) for path in tmp_path.rglob("*")
            if path.name == "cuda-sync-bench" or path.name.startswith(("report-", "figures-"))]
    assert made == [] and (work / "a.html").exists()  # (matplotlib keeps its font list in XDG_CACHE_HOME)


def test_an_unwritable_cache_does_not_stop_the_report(work, tmp_path):
    (tmp_path / "not a directory").write_text("mine")
    assert report(work, tmp_path / "not a directory", "results", "--out", "a.html") == ""
    assert (tmp_path / "not a directory").read_text() == "mine" and (work / "a.html").exists()


# --- -v: where the seconds went --------------------------------------------------------------------------------

HEADING = re.compile(r"bench: \d+\.\d\d s in all, by phase:")
LINE = re.compile(r"bench: +\d+\.\d{3} s +\d+% (\S.*)")


def phase_names(stderr: str) -> list[str]:
    """The phases ``-v`` named, checking that every line of ``stderr`` is its heading or a phase's line."""
    heading, *lines = stderr.splitlines()
    assert HEADING.fullmatch(heading), stderr
    assert all(LINE.fullmatch(line) for line in lines), stderr
    return [LINE.fullmatch(line).group(1) for line in lines]


def test_verbose_says_on_stderr_where_the_seconds_went(work, tmp_path):
    kept = tmp_path / "cache"
    for out in ("a.html", "b.html"):  # made, then from the cache
        names = phase_names(report(work, kept, "results", "--out", out, "-v"))
        assert {phases.INTERPRETER, phases.IMPORTS, phases.OTHER} <= set(names) and len(set(names)) == len(names)
    assert report(work, kept, "results", "--out", "c.html") == ""  # without -v: nothing


def test_plot_says_where_its_seconds_went_too(work, tmp_path):
    done = bench("plot", "results", "--out", "figures", "--verbose", cwd=work, without_cuda=True,
                 BENCH_CACHE_DIR=str(tmp_path / "cache"))
    assert done.returncode == 0 and phases.INTERPRETER in phase_names(done.stderr), done.stderr


@pytest.mark.parametrize("command", ["probe", "syncs", "trace", "plot", "report"])
def test_the_commands_that_say_where_the_seconds_went(command):
    """-v before the target: what follows a script's name is its own arguments."""
    from bench.cli.parser import parser

    target = [] if command in ("plot", "report") else ["m:f"]
    assert parser().parse_args([command, "-v", *target]).verbose
    assert not parser().parse_args([command, *target]).verbose


def test_a_json_value_is_made_once_and_made_again_where_damaged(kept_in):
    made = []

    def make():
        made.append(1)
        return {"ms": 1.5}

    assert cache.kept_json("k-1", make) == {"ms": 1.5} and cache.kept_json("k-1", make) == {"ms": 1.5}
    assert len(made) == 1
    (kept_in / "k-1").write_bytes(b"torn")
    assert cache.kept_json("k-1", make) == {"ms": 1.5} and len(made) == 2
