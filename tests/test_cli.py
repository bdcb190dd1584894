"""``python -m bench sweep`` and ``env`` from the command line: a mistake is one line on stderr, exit 2, no traceback,
nothing written; plan mistakes are reported before the GPU is looked for. (plot, claims, compare and report:
tests/test_analysis_cli.py.)"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import disks
import synthetic
from bench import cli
from bench.results import store
from bench.cli import measuring
from bench.sweep import plan as planning
from bench.sweep import preflight
from fake_experiments import FINE
from fake_gpu import FakeGpu

SRC = str(Path(__file__).resolve().parents[1] / "src")


def bench(*args, cwd):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def assert_usage_error(status, stderr, fragment, cwd, before=()):
    assert status == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bench: error: "), stderr
    assert fragment in lines[0] and "Traceback" not in stderr, lines[0]
    assert sorted(path.name for path in Path(cwd).iterdir()) == sorted(before)  # nothing written


@pytest.fixture
def main(tmp_path, monkeypatch, capsys):
    """``bench`` in this process, in an empty directory: (exit status, stdout, stderr)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")  # rich wraps its lines at the terminal's width

    def call(*args):
        status = cli.main(list(args))
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    return call


@pytest.mark.parametrize("args, fragment", [
    (["sweep", "--experiments", "nope"], "unknown experiment 'nope'"),
    (["sweep", "--experiments", "bandwidth,bandwidth"], "experiment 'bandwidth' is named twice"),
    (["sweep", "--quick", "--full"], "argument --full: not allowed with argument --quick"),
    (["sweep", "--budget", "0"], "'0' is not a positive finite number"),
    (["sweep", "--budget", "nan"], "'nan' is not a positive finite number"),
    (["sweep", "--budget", "inf"], "'inf' is not a positive finite number"),
    (["sweep", "--budget=-1"], "'-1' is not a positive finite number"),
    (["sweep", "--budget", "soon"], "'soon' is not a number"),
    (["sweep", "--budget", "5"], "--budget 5: these"),
    (["sweep", "--sizes", "0"], "'0' is not a positive size"),
    (["sweep", "--sizes=-4K"], "'-4K' is not a positive size"),
    (["sweep", "--sizes", "-4K"], "'-4K' is not a positive size"),
    (["sweep", "--sizes", "lots"], "'lots' is not a size"),
    (["sweep", "--sizes", "1M:4K"], "the range's start is above its end"),
    (["sweep", "--device", "x"], "'x' is not a GPU ordinal"),
    (["sweep", "--axis", "streams"], "expected NAME=V1,V2"),
    (["sweep", "--axis", "streams="], "expected NAME=V1,V2"),
    (["sweep", "--axis", "=1"], "expected NAME=V1,V2"),
    (["sweep", "--axis", "colour=red"], "unknown axis 'colour'"),
    (["sweep", "--axis", "host_memory=floppy"], "'floppy' is not a value of host_memory"),
    (["sweep", "--axis", "streams=0"], "must be a positive finite number"),
    (["sweep", "--axis", "compute_ratio=nan"], "compute_ratio='nan' must be a positive finite number"),
    (["sweep", "--axis", "compute_ratio=-inf"], "must be a positive finite number"),
    (["sweep", "--axis", "streams=many"], "is not a number"),
    (["sweep", "--experiments", "launch", "--axis", "streams=1"], "unknown axis 'streams'; the selected "
                                                                  "experiments have path"),
    (["sweep", "--resume", "missing.parquet"], "cannot read results file missing.parquet"),
    (["sweep", "--frobnicate"], "unrecognized arguments"),
    (["sweep", "--devices", "first"], "'first' is not 'all' or GPU ordinals like 0,1"),
    (["sweep", "--devices=0,-1"], "GPU ordinals are 0 or more"),
    (["sweep", "--devices", "0,1", "--device", "1"], "--device and --devices: choose one"),
    (["sweep", "--experiments", "peer"], "peer needs 2 GPUs; this sweep has 1"),
    (["sweep", "--experiments", "launch", "--concurrent"], "--concurrent runs several GPUs at once"),
    (["teleport"], "invalid choice"),
])
def test_sweep_usage_errors(main, tmp_path, args, fragment):
    status, out, err = main(*args)
    assert_usage_error(status, err, fragment, tmp_path)
    assert "no CUDA GPU" not in err  # argument and plan errors come before the GPU is looked for


def test_an_existing_out_file_is_refused_before_the_gpu(main, tmp_path):
    (tmp_path / "r.parquet").write_bytes(b"results")
    status, out, err = main("sweep", "--out", "r.parquet")
    assert_usage_error(status, err, "--out: r.parquet already exists; bench never replaces a results file", tmp_path,
                       ["r.parquet"])
    assert (tmp_path / "r.parquet").read_bytes() == b"results"


def test_an_unwritable_out_is_refused(main, tmp_path):
    (tmp_path / "file").write_text("")
    status, out, err = main("sweep", "--out", "file/results")
    assert_usage_error(status, err, "is a file, not a directory", tmp_path, ["file"])


def test_sweep_and_probe_without_a_gpu(main, tmp_path, no_gpu):
    for args in (["sweep"], ["sweep", "--quick", "--experiments", "launch"], ["sweep", "--budget", "100"],
                 ["probe", "os:getpid"], ["claims", "--measure"]):
        status, out, err = main(*args)
        assert_usage_error(status, err, f"{no_gpu}; report, plot, compare and claims read results without a GPU",
                           tmp_path)


def test_usage_errors_from_a_real_process(tmp_path, no_gpu):
    result = bench("sweep", "--axis", "compute_ratio=nan", cwd=tmp_path)
    assert_usage_error(result.returncode, result.stderr, "must be a positive finite number", tmp_path)
    result = bench("sweep", "--quick", cwd=tmp_path)
    assert_usage_error(result.returncode, result.stderr, no_gpu, tmp_path)


# --- a whole sweep through the command line, on a fake GPU -------------------------------------------------------


@pytest.fixture
def fake_suite(monkeypatch):
    """The command line's sweep with one fake experiment and a fake GPU."""
    monkeypatch.setattr(planning, "registry", lambda: {"fine": FINE})
    monkeypatch.setattr(preflight, "Gpu", FakeGpu)


def test_a_sweep_from_the_command_line(main, tmp_path, fake_suite):
    status, out, err = main("sweep", "--quick", "--axis", "n=1,3")
    assert status == 0, err
    (path,) = (tmp_path / "results").iterdir()
    assert path.name.endswith("-Fake-GPU.parquet")
    rows = store.read(path, synthetic.suite())
    assert list(rows["n"]) == [1, 3] and (rows["status"] == "ok").all() and list(rows["n_samples"]) == [3, 3]
    metadata = store.read_metadata(path)
    assert metadata["mode"] == "quick" and metadata["complete"] is True and metadata["command"].startswith(
        "python -m bench")
    assert metadata["stop_rules"]["fine"]["default"]["time_cap_s"] == planning.QUICK_CAPS["time_cap_s"]
    words = " ".join(out.split())
    assert "2 configurations written to" in words and "fine on Fake GPU" in words
    status, out, err = main("sweep", "--out", str(path))
    assert_usage_error(status, err, "already exists", tmp_path, ["results"])


def test_a_sweep_with_a_budget_and_an_out_file(main, tmp_path, fake_suite):
    status, out, err = main("sweep", "--budget", "100", "--out", "run.parquet")
    assert status == 0, err
    assert len(store.read(tmp_path / "run.parquet", synthetic.suite())) == len(FINE.axes["n"])
    assert store.read_metadata(tmp_path / "run.parquet")["budget_s"] == 100


def test_sweep_out_is_never_a_pipe_or_a_device(main, tmp_path):
    os.mkfifo(tmp_path / "fifo")
    status, out, err = main("sweep", "--out", "fifo")
    assert_usage_error(status, err, "--out: fifo is a pipe, not a directory", tmp_path, ["fifo"])


def test_a_full_disk_is_one_line_and_the_file_stays_as_last_saved(main, tmp_path, fake_suite, monkeypatch):
    status, out, err = main("sweep", "--quick", "--axis", "n=1,2", "--out", "run.parquet")
    assert status == 0, err
    before = (tmp_path / "run.parquet").read_bytes()
    disks.fills_after(monkeypatch, 0)
    status, out, err = main("sweep", "--quick", "--axis", "n=1,2,3", "--resume", "run.parquet")
    assert_usage_error(status, err, "cannot write run.parquet: No space left on device; run.parquet keeps its last "
                       "save, 2 configurations (1 configurations measured in this run); --resume run.parquet "
                       "finishes it", tmp_path, ["run.parquet"])
    assert (tmp_path / "run.parquet").read_bytes() == before
    status, out, err = main("sweep", "--quick", "--out", "new.parquet")
    assert_usage_error(status, err, "cannot write new.parquet: No space left on device; nothing was written (5 "
                       "configurations measured in this run)", tmp_path, ["run.parquet"])


# --- what bench says about itself -------------------------------------------------------------------------------

def test_version_is_the_installed_distributions(main):
    import importlib.metadata

    import bench

    status, out, err = main("--version")
    try:
        expected = f"{bench.DISTRIBUTION} {importlib.metadata.version(bench.DISTRIBUTION)}"
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that pip never installed
        expected = f"bench {bench.__version__} (not installed"
    assert status == 0 and out.startswith(expected) and err == "", (out, err)


def test_bare_bench_is_a_mistake_that_names_the_commands_and_help_says_what_bench_does(tmp_path):
    bare = bench(cwd=tmp_path)
    assert bare.returncode == 2 and bare.stdout == "" and bare.stderr == (
        "bench: error: name a command: sweep,plot,claims,compare,report,probe,syncs,trace,env (python -m bench --help "
        "says what each does)\n")
    result = bench("--help", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    words = " ".join(result.stdout.split())
    assert words.startswith("usage: python -m bench")
    for said in ("which CUDA calls block the host and which serialize the GPU", "copy/compute overlap",
                 "does it wait for the GPU, and where?", "report, plot, compare and claims read results files anywhere",
                 "python -m bench sweep --list"):
        assert said in words, said
    assert not list(tmp_path.iterdir())


LOADED = ("def loaded():\n"
          "    return sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'pandas', 'matplotlib', 'cupy',\n"
          "                  'numba', 'torch', 'jax', 'cupti') or m.startswith(('bench.usercode.', 'bench.probe',\n"
          "                  'bench.syncs', 'bench.trace')) and m not in ('bench.usercode.tools',\n"
          "                  'bench.usercode.defaults'))\n")


def run_python(code: str) -> list[str]:
    result = subprocess.run([sys.executable, "-c", "import sys\n" + LOADED + code], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "PYTHONPATH": SRC})
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_starting_the_command_line_loads_no_tool_and_no_library():
    """What a command line start pays: ``import bench`` imports only its name and version, ``--help`` only the
    tools' records and defaults, no tool's code and no library."""
    loaded = run_python("import bench\nprint(sorted(m for m in sys.modules if m.startswith('bench.')))")
    assert loaded == ["['bench.platform', 'bench.platform.distribution', 'bench.platform.lazy']"]
    code = ("import contextlib, io, runpy\nsys.argv = ['bench', '--help']\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "    runpy.run_module('bench', run_name='__main__')\nprint(loaded())")
    assert run_python(code) == ["[]"]


@pytest.mark.parametrize("first", ["import bench", "import bench.trace", "from bench.trace import save",
                                   "import bench.usercode.trace.run", "from bench import TraceResult",
                                   "import bench.probe, bench.trace\ndel sys.modules['bench']"])  # faces loaded before
def test_the_public_names_are_the_tools_functions_whatever_was_imported_first(first):
    code = (f"import sys\n{first}\nimport bench\nfrom bench import probe, syncs, trace, tracing\n"
            "from bench.trace import trace as traced\nprint(bench.trace is trace is traced, callable(bench.syncs),\n"
            "      [bench.probe.__module__, bench.syncs.__module__, tracing.__module__], bench.nothing)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": SRC})
    assert result.returncode == 1 and "module 'bench' has no attribute 'nothing'" in result.stderr, result.stderr
    code = code.replace(", bench.nothing)", ")")
    expected = "True True ['bench.usercode.probe', 'bench.usercode.syncs.run', 'bench.usercode.trace.run']"
    assert run_python(code) == [expected]


def test_sweep_list_shows_every_experiment_and_its_axes_without_a_gpu(main, tmp_path):
    from bench.experiments import registry

    status, out, err = main("sweep", "--list")
    assert status == 0 and err == "", err
    words = " ".join(out.split())
    assert words.startswith("experiments of a default sweep")
    for name, experiment in registry().items():
        assert f" {name} " in words and experiment.description.split(":")[0] in words, name
    assert "bytes: 4 KiB – 1 GiB (10 sizes)" in words and "call: (nothing), cudaMalloc, cudaFree, … (" in words
    assert "needs 2+ GPUs" in words and not list(tmp_path.iterdir())
    status, out, err = main("sweep", "--list", "--quick")
    assert status == 0 and "experiments of a quick sweep" in out
    assert "call: (nothing), cudaFree, cudaMemcpyAsync H2D pageable 64 MiB, kernel launch" in " ".join(out.split())


def test_env_without_a_gpu_prints_the_host(main, tmp_path, no_gpu):
    status, out, err = main("env")
    assert status == 0 and err == "", err
    words = " ".join(out.split())
    for said in (no_gpu.split(" (")[0], "report, plot, compare and claims read results without a GPU", "hostname",
                 "python_version", "bench_version", "driver_version", "pandas_version", "pyarrow_version"):
        assert said in words, said
    assert not list(tmp_path.iterdir())


def test_without_a_driver_every_gpu_command_says_so(main, tmp_path, monkeypatch):
    from bench.platform import env

    monkeypatch.setattr(env, "MEASURING_LIBRARIES", {})  # as if installed: the driver is what is missing
    monkeypatch.setattr(env, "DRIVER_LIBRARY", "libbench-no-such-driver.so.1")
    said = ("no NVIDIA driver found (libbench-no-such-driver.so.1 cannot be loaded); report, plot, compare and claims "
            "read results without a GPU")
    for args in (["sweep", "--quick"], ["probe", "os:getpid"], ["claims", "--measure"]):
        status, out, err = main(*args)
        assert_usage_error(status, err, said, tmp_path)
    status, out, err = main("env")
    words = " ".join(out.split())
    assert status == 0 and f"GPU │ none: {said}" in words and "driver_version │ not found" in words


# --- options checked before anything runs (issue 31) ------------------------------------------------------------

@pytest.mark.parametrize("args, fragment", [
    (["--experiments", "nosuch"], "unknown experiment 'nosuch'"),
    (["--sizes", "nan"], "'nan' is not a size"),
    (["--sizes", "-1K"], "'-1K' is not a positive size"),
    (["--axis", "nosuch=1"], "unknown axis 'nosuch'"),
    (["--axis", "host_memory=floppy"], "'floppy' is not a value of host_memory"),
    (["--budget", "5"], "--budget 5: these"),
    (["--experiments", "peer"], "peer needs 2 GPUs; this sweep has 1"),
    (["--device", "-1"], "'-1' is not a GPU ordinal"),
    (["--concurrent"], "--concurrent runs several GPUs at once"),
    (["--resume", "missing.parquet"], "cannot read results file missing.parquet"),
])
def test_sweep_list_checks_the_options_as_a_sweep_does(main, tmp_path, args, fragment):
    status, out, err = main("sweep", "--list", *args)
    assert_usage_error(status, err, fragment, tmp_path)
    assert out == ""


def test_sweep_list_previews_the_plan(main, tmp_path):
    status, out, err = main("sweep", "--list", "--experiments", "bandwidth", "--sizes", "4K,8K", "--axis",
                            "host_memory=pinned")
    assert status == 0 and err == "", err
    words = " ".join(out.split())
    configurations = len(planning.make(["bandwidth"], sizes=[4096, 8192], axes={"host_memory": ["pinned"]})[0].configs)
    assert words.startswith(f"experiments of a default sweep: {configurations} configurations")
    assert "host_memory: pinned;" in words and "bytes: 4 KiB, 8 KiB" in words and " launch " not in words


@pytest.mark.parametrize("command", ["env", "sweep", "probe", "syncs", "trace", "claims"])
def test_a_negative_device_is_a_mistake_everywhere(main, tmp_path, command):
    target = ["os:getcwd"] if command in ("probe", "syncs", "trace") else []
    status, out, err = main(command, "--device", "-1", *target)
    assert_usage_error(status, err, "argument --device: '-1' is not a GPU ordinal: ordinals are 0 or more", tmp_path)


@pytest.mark.parametrize("command", ["syncs", "trace"])
@pytest.mark.parametrize("options", [[], ["--json"]])
def test_a_missing_target_names_the_target(main, tmp_path, command, options):
    status, out, err = main(command, *options)
    assert_usage_error(status, err, f"{command}: name the code to run, TARGET: MODULE:FUNCTION, FILE.py:FUNCTION or "
                       "SCRIPT.py [ARGS]", tmp_path)
    assert "ARGS is required" not in err and "arguments are required" not in err


def test_a_value_that_starts_with_a_dash_is_the_options_value():
    from bench.platform import arguments

    assert arguments.values_kept(["sweep", "--sizes", "-1K", "--quick"], ["--sizes"]) == [
        "sweep", "--sizes=-1K", "--quick"]
    assert arguments.values_kept(["sweep", "--sizes", "--quick"], ["--sizes"]) == ["sweep", "--sizes", "--quick"]


def test_the_summary_says_which_rows_are_below_their_floor():
    """Rows under their experiment's accuracy floor are counted and named unclear; a sweep at its floor says
    nothing of it."""
    from rich.console import Console

    from bench.sweep.loop import Outcome
    from fake_experiments import sample_columns

    plans = [planning.Plan(FINE, [{"n": 0}, {"n": 1}], {"default": planning.StopRule()})]
    base = {"experiment": "fine", **sample_columns(), "status": "ok", "error": "", "gpu_name": "fake",
            "stop_scale": 1.0}
    said = {}
    for met in (True, False):
        console = Console(record=True, width=200)
        outcome = Outcome(None, [{**base, "n": n, "floor_met": met} for n in (0, 1)], 2, False, mode="quick")
        measuring._print_summary(plans, outcome, console)
        said[met] = console.export_text()
    assert "accuracy floor" not in said[True]
    assert "2 configurations are below their experiment's accuracy floor (--quick: a smoke test)" in said[False]


@pytest.mark.parametrize("budget_s, warned", [(1.0, True), (1000.0, False), (None, False)])
def test_a_plan_that_cannot_keep_its_floors_in_its_budget_says_so_before_it_starts(budget_s, warned):
    from rich.console import Console

    plans = [planning.Plan(FINE, [{"n": n} for n in range(3)], {"default": planning.StopRule()})]
    console = Console(record=True, width=200)
    progress = measuring._Progress(console, budget_s)
    progress.planned(plans, planning.estimate_s(plans), planning.least_s(plans))
    progress.bar.stop()
    assert ("the sweep keeps every floor and will take longer" in console.export_text()) is warned
