"""One policy for every writer (docs/usage.md, "Mistakes, failures and interruptions"): bench never writes through a
symlink. Each command that writes a file refuses a symlink where it would write, dangling or not: one line on
stderr, exit status 2, and the symlink and what it names are left as they were. CPU only: every refusal comes before
a GPU is looked for."""

from pathlib import Path

import pytest

import synthetic
from bench import cli
from bench.results import store, writes
from bench.platform.errors import WriteError

RESULTS = synthetic.launch_records()


@pytest.fixture
def here(tmp_path, monkeypatch):
    """An empty working directory with a results file, a script, a kept file and links to it and to nothing."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    store.write(tmp_path / "r.parquet", synthetic.tagged(RESULTS), synthetic.suite(),
                {"run_id": synthetic.RUN_ID, "schema_version": store.SCHEMA_VERSION})
    (tmp_path / "step.py").write_text("def step():\n    pass\n")
    (tmp_path / "kept").write_text("kept")
    return tmp_path


def _tree(directory: Path) -> dict[str, str]:
    """Every entry under ``directory``: a symlink as what it names, a file as its bytes' length."""
    return {str(path.relative_to(directory)): f"-> {path.readlink()}" if path.is_symlink() else
            (str(path.stat().st_size) if path.is_file() else "dir") for path in sorted(directory.rglob("*"))}


@pytest.mark.parametrize("link, args", [
    ("new.parquet", ["sweep", "--out", "new.parquet"]),
    ("new.parquet", ["claims", "r.parquet", "--measure", "--out", "new.parquet"]),
    ("report.html", ["report", "r.parquet", "--out", "report.html"]),
    ("figures/launch.svg", ["plot", "r.parquet", "--out", "figures"]),
    ("saved.parquet", ["syncs", "--save", "saved.parquet", "step.py:step"]),
    ("saved.parquet", ["trace", "--save", "saved.parquet", "step.py:step"]),
    ("timeline.png", ["trace", "--plot", "timeline.png", "step.py"]),
    ("timeline.json", ["trace", "--perfetto", "timeline.json", "step.py"]),
], ids=lambda value: value if isinstance(value, str) else " ".join(value[:2]))
@pytest.mark.parametrize("names", ["kept", "nothing"])
def test_every_writer_refuses_a_symlink(here, capsys, link, args, names):
    (here / link).parent.mkdir(exist_ok=True)
    (here / link).symlink_to(here / names)
    before = _tree(here)
    status = cli.main(args)
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.count("\n") == 1 and err.startswith("bench: error: ") and "Traceback" not in err, err
    assert f"{link} is a symlink (to {here / names}); bench never writes through a symlink" in err, err
    assert _tree(here) == before and (here / "kept").read_text() == "kept"  # plot too: all of its figures or none


def test_a_resumed_sweep_refuses_a_symlink(here, capsys):
    (here / "link.parquet").symlink_to("r.parquet")
    status = cli.main(["sweep", "--resume", "link.parquet"])
    err = capsys.readouterr().err
    assert status == 2 and "--resume: link.parquet is a symlink (to r.parquet)" in err, err


def test_the_store_writes_no_symlink(tmp_path):
    (tmp_path / "real.html").write_text("old")
    (tmp_path / "link.html").symlink_to("real.html")
    (tmp_path / "dangling.parquet").symlink_to("made.parquet")
    with pytest.raises(WriteError, match=f"^{tmp_path / 'link.html'} is a symlink"):
        writes.write_bytes(tmp_path / "link.html", b"new")
    with pytest.raises(WriteError, match="dangling.parquet is a symlink"):
        store.write(tmp_path / "dangling.parquet", synthetic.tagged(RESULTS), synthetic.suite(), {}, new=True)
    assert (tmp_path / "real.html").read_text() == "old" and not (tmp_path / "made.parquet").exists()
