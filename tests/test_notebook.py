"""The notebook's face without a GPU: ``%load_ext bench`` in IPython, each magic's one line where it cannot answer,
lines renamed as the notebook shows them, and the results' HTML, escaped whatever a source line holds."""

import json
import os
from pathlib import Path

import pytest

from bench.usercode.html import probe_html, syncs_html, trace_html
from bench.usercode.notebook import _trace_options, cell_label, named_syncs, named_trace
from bench.usercode.syncs.result import Place, SyncsResult

IPython = pytest.importorskip("IPython", reason="IPython is not installed (the test extra brings it)")

HOSTILE = "x = y.item()  # </code><script>alert('a')</script>\x1b[31m\u202e"


@pytest.fixture
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    instance = InteractiveShell.instance()
    instance.run_line_magic("load_ext", "bench")
    yield instance
    InteractiveShell.clear_instance()


def test_each_magic_says_in_one_line_that_it_needs_a_gpu(shell, capsys, no_gpu, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ran = []
    shell.user_ns["ran"] = ran
    for source in ("%syncs ran.append(1)", "%probe ran.append(1)", "%%syncs\nran.append(1)\n",
                   "%%trace\nran.append(1)\n"):
        result = shell.run_cell(source)
        err = capsys.readouterr().err.strip().splitlines()
        assert result.result is None and len(err) == 1 and err[0].endswith(f"needs a GPU: {no_gpu}"), err
        assert "Traceback" not in err[0]
    assert ran == [] and list(tmp_path.iterdir()) == []  # the region never ran, nothing was written


def test_the_trace_magic_reads_its_options():
    from bench.platform.errors import UsageError

    assert _trace_options("", 7) == {"runs": 5, "perfetto": Path("trace-In7.json")}
    assert _trace_options("--runs 3 --perfetto 'my trace.json'", 2) == {"runs": 3, "perfetto": Path("my trace.json")}
    for bad in ("--runs", "--runs 0", "--runs x", "--plot a.png"):
        with pytest.raises(UsageError):
            _trace_options(bad, 1)


def _place(file, **fields):
    return Place(file, 3, "step", HOSTILE, "torch", 2, 40.0, 1.0, 20.0, ("cuStreamSynchronize",), (),
                 (f"{file}:9 in <module>", f"{file}:3 in step"), **fields)


def test_lines_are_named_as_the_notebook_shows_them():
    class Compiler:
        _filename_map = {"/tmp/ipykernel_1/123.py": 4}

    class Shell:
        compile = Compiler()

    name = lambda file: cell_label(Shell(), file)  # noqa: E731
    assert name("/tmp/ipykernel_1/123.py") == "In [4]" and name("/home/u/mine.py") == "/home/u/mine.py"
    found = named_syncs(SyncsResult([_place("/tmp/ipykernel_1/123.py")], allowed=[_place(
        "/tmp/ipykernel_1/123.py", allowed="log")]), name)
    assert found.places[0].where == "In [4]:3" and found.places[0].calls == ("In [4]:9 in <module>", "In [4]:3 in step")
    assert found.allowed[0].file == "In [4]"


def test_a_trace_is_named_too(tmp_path):
    from test_kineto import _trace

    from bench.usercode.trace.profiler import described_trace

    path = tmp_path / "t.json"
    path.write_text(json.dumps(_trace()))
    result, _ = described_trace(path, None, references=False)
    named = named_trace(result, lambda file: "In [2]" if file == "train.py" else file)
    assert [wait.line for wait in named.waits] == ["In [2]:12"]
    assert all(frame.file == "In [2]" for call in named.records.calls for frame in call.frames)
    assert [gap.wait.frames[-1].file for gap in named.gaps if gap.wait] == ["In [2]"]
    assert [group.line for group in named.pageable] == ["In [2]:12"]
    assert "at In [2]:12" in str(named)


def test_the_html_escapes_whatever_a_line_holds():
    found = SyncsResult([_place("train.py")], own_work=[_place("host.py")], allowed=[_place("log.py", allowed="<b>")])
    page = syncs_html(found)
    for shown in (page, trace_html(type("R", (), {"__str__": lambda self: HOSTILE + "\n" + HOSTILE})(), b"<svg/>"),
                  probe_html(type("P", (), {"__str__": lambda self: "returns: " + HOSTILE})())):
        assert "<script>" not in shown and "\x1b" not in shown and "\u202e" not in shown
        assert "&lt;script&gt;" in shown and "\\x1b" in shown
    assert "train.py:3" in page and "&lt;b&gt;" in page and "not a wait: host.py:3" in page
    assert "data:image/svg+xml;base64," in trace_html(type("R", (), {"__str__": lambda self: "a"})(), b"<svg/>")


EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "notebook.ipynb"


def test_the_example_notebook_runs_without_a_gpu_each_magic_saying_so_in_one_line(tmp_path, no_gpu):
    nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (the test extra brings it)")
    import nbformat

    from paths import with_path

    notebook = nbformat.read(EXAMPLE, as_version=4)
    env = {**os.environ, "PYTHONPATH": with_path(str(Path(__file__).resolve().parents[1] / "src"))}
    client = nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute(env=env)  # the kernel's environment: bench from this checkout
    magics = [cell for cell in notebook.cells if cell.cell_type == "code" and cell.source.startswith("%")
              and not cell.source.startswith("%load_ext")]
    assert len(magics) == 4
    for cell in magics:
        said = [line for output in cell.outputs for line in output.get("text", "").splitlines()]
        assert [output.get("name") for output in cell.outputs] == ["stderr"], cell.outputs
        assert len(said) == 1 and f"needs a GPU: {no_gpu}" in said[0], said
    assert list(tmp_path.iterdir()) == []  # no Perfetto file where nothing was traced


def test_a_cell_is_numbered_as_the_notebook_shows_it_and_its_lines_after_the_magics(shell, capsys):
    import traceback

    from bench.usercode.notebook import _region

    shell.run_cell("from bench.usercode.notebook import cell_number")
    result = shell.run_cell("seen = cell_number(get_ipython())")
    number = shell.user_ns["seen"]
    assert number == result.execution_count  # the cell that ran, not the next one
    region = _region(shell, "--runs 2", "x = 1\nraise ValueError('here')\n", "trace")
    with pytest.raises(ValueError) as raised:
        region()
    last = traceback.extract_tb(raised.value.__traceback__)[-1]
    assert last.filename.startswith("In [") and last.lineno == 3  # under the %%trace line, as the notebook shows
    assert last.line == "raise ValueError('here')"


def test_a_line_magics_expression_stands_at_its_line_of_the_cell(shell):
    import traceback

    from bench.usercode.notebook import _region

    shell.user_ns["_region"], shell.user_ns["shell"] = _region, shell
    shell.run_cell("x = 1\ny = 2\nregion = _region(shell, '1 / 0', None, 'syncs')\n")
    with pytest.raises(ZeroDivisionError) as raised:
        shell.user_ns["region"]()
    last = traceback.extract_tb(raised.value.__traceback__)[-1]
    assert last.filename.startswith("In [") and last.lineno == 3  # the cell's third line, where it was asked
