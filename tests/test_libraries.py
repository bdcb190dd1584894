"""One record per GPU library (:mod:`bench.platform.libraries`), and everything that names a library derived from it: the
catalogs, the library experiment, the watcher's attribution, the environment's and the rows' version columns, the
distribution's extras. A library added in one place and not the others fails here. No GPU: the measuring code runs on
fakes."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import re
import sys
import tomllib
import types
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import synthetic
from bench import catalogs
from bench.platform import env, libraries
from bench.results import store, upgrade
from bench.platform.arguments import MEASURING_EXTRAS
from bench.experiments import library as experiment
from bench.platform.libraries import BY_NAME, CATALOGED, LIBRARIES, REQUIRED
from bench.results.schema import check_row, environment_columns

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = [library.version_column for library in LIBRARIES]


@pytest.fixture
def versions(monkeypatch):
    """Every distribution 'installed' as '<module> 9.9': versions are read, never guessed."""
    monkeypatch.setattr(libraries, "distribution_version", lambda *modules: ", ".join(f"{m} 9.9" for m in modules))


def test_the_records_are_distinct_and_well_formed():
    assert len(BY_NAME) == len(LIBRARIES) and len(set(VERSIONS)) == len(VERSIONS)
    assert len(libraries.BY_PREFIX) == sum(len(library.prefixes) for library in LIBRARIES)  # no prefix twice
    for library in LIBRARIES:
        assert library.versioned[0] in library.prefixes and "." not in "".join(library.versioned), library.name
        assert library.module.split(".")[0] in library.prefixes, library.name
        assert not library.part_of or library.part_of in BY_NAME, library.name
        assert library.extras or library.part_of, f"{library.name}: nothing says how it is installed"
        assert library.streams.current is None or library.streams.stream is not None, library.name


def test_every_catalog_has_a_record_and_every_record_its_catalog():
    on_disk = {f"bench.catalogs.{path.stem}" for path in (ROOT / "src" / "bench" / "catalogs").glob("*_calls.py")}
    assert on_disk == {library.catalog for library in CATALOGED}, "a catalog without a record, or the other way round"
    assert catalogs.LIBRARIES == tuple(library.name for library in CATALOGED)
    assert set(catalogs.MODULES) == {catalogs.RUNTIME, *catalogs.LIBRARIES}
    for library in CATALOGED:
        module = importlib.import_module(library.catalog)
        assert callable(module.Kit), library.name
        assert module.CALLS and {call.library for call in module.CALLS} == {library.name}
    column = next(item for item in experiment.COLUMNS if item.name == "library")
    assert column.values == catalogs.LIBRARIES and column.doc == "cupy, numba-cuda, torch or jax"


def test_every_record_has_a_version_column_in_the_schema_the_environment_and_the_tools_tables():
    from bench.syncs import columns as syncs_columns
    from bench.trace import columns as trace_columns

    names = [item.name for item in environment_columns()]
    fields = {field.name for field in env.Environment.fields()}
    suite = synthetic.suite().names
    readings = env.host_readings()
    for library in LIBRARIES:
        column = library.version_column
        assert column in names and column in suite and column in readings, column
        assert {column} <= {item.name for item in syncs_columns()} & {item.name for item in trace_columns()}
        # the measuring stack's on every row; an optional library's is the row's own, which a sweep's environment
        # (an Environment, as a dict) would replace if it were a field
        assert (column in fields) == (not library.optional), column
    assert env.MEASURING_LIBRARIES == {"cupy": "CuPy", "numba_cuda": "numba-cuda", "pynvml": "nvidia-ml-py"}


def _requirements() -> dict[str, set[str]]:
    """pyproject.toml's extras: extra -> the names of the packages it installs (normalized)."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return {extra: {re.match(r"[A-Za-z0-9._-]+", item).group().lower().replace("_", "-") for item in items}
            for extra, items in extras.items()}


def test_the_extras_install_what_the_records_say():
    extras = _requirements()
    for library in LIBRARIES:
        for extra in library.extras:
            assert extra in extras and set(library.packages) & extras[extra], f"{library.name}: [{extra}]"
        for package in library.packages:
            assert any(package in extras[extra] for extra in library.extras), f"{library.name}: {package}"
        for extra, packages in extras.items():  # no extra installs a library its record does not name it for
            assert not set(library.packages) & packages or extra in library.extras, f"[{extra}] has {library.name}"
        assert (set(library.extras) == set(MEASURING_EXTRAS)) == (library in REQUIRED), library.name
    optional = {library.name for library in CATALOGED if library.optional}
    assert optional <= set(extras), "an optional library's extra is its name (pip install cuda-sync-bench[torch])"


def test_the_watcher_names_each_records_code(tmp_path, monkeypatch):
    from bench.usercode.stacks import library_of

    site = tmp_path / "site-packages"
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    for library in LIBRARIES:
        for prefix in library.prefixes:
            source = site / prefix / "core.py"
            source.parent.mkdir(parents=True, exist_ok=True)
            source.write_text("")
            assert library_of(str(source)) == library.name, prefix


def test_the_library_view_names_every_cataloged_library_and_the_versions_recorded():
    from bench.views.library import versions

    rows = synthetic.frame(synthetic.library_records())
    assert versions(rows) == [synthetic.ENV["cupy_version"], synthetic.ENV["numba_cuda_version"]]
    rows.loc[rows["library"] == "torch", "torch_version"] = "torch 2.5.1"
    assert versions(rows)[-1] == "torch 2.5.1"
    assert versions(rows.drop(columns=VERSIONS)) == []  # a file of before a column: none of it, no error


# --- the rows of the library experiment, measured on fakes ---------------------------------------------------------

def _measured(monkeypatch, call: str) -> dict:
    """The library experiment's row for ``call`` (placement other), its measuring replaced by fakes."""
    monkeypatch.setattr(experiment, "runtime", types.SimpleNamespace(getDevice=lambda: 0,
                                                                     deviceSynchronize=lambda: None))
    monkeypatch.setattr(experiment, "kept_device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(experiment, "SpinWatch", object)
    monkeypatch.setattr(catalogs, "kit", lambda library: object())
    monkeypatch.setattr(experiment, "_measure", lambda config, call, kit, watch, first: {
        **config, "library": call.library, "status": "ok", "error": ""})
    [row] = experiment.measure([{"call": call, "placement": "other"}], None)
    check_row({"experiment": "library", **row}, synthetic.suite())
    return row


def _installed(monkeypatch, name: str) -> None:
    """Library ``name`` as if installed with CUDA: its missing() imports a module that exists."""
    library = BY_NAME[name]
    loading = dataclasses.replace(library.loading, cuda_missing=None)
    monkeypatch.setitem(BY_NAME, name, dataclasses.replace(library, module="math", loading=loading))


def test_a_row_of_a_torch_call_records_the_torch_and_triton_versions(monkeypatch, versions):
    _installed(monkeypatch, "torch")
    row = _measured(monkeypatch, "torch t.item()")
    assert row["status"] == "ok" and row["torch_version"] == "torch 9.9" and row["triton_version"] == "triton 9.9"
    assert "jax_version" not in row and "cupy_version" not in row
    run = {**row, **synthetic.environment().as_dict()}  # as the sweep adds its environment: the row's stay
    assert run["torch_version"] == "torch 9.9"


def test_a_row_of_a_jax_call_records_the_jax_version(monkeypatch, versions):
    _installed(monkeypatch, "jax")
    row = _measured(monkeypatch, next(name for name, call in catalogs.catalog().items() if call.library == "jax"))
    assert row["jax_version"] == "jax 9.9, jaxlib 9.9" and "torch_version" not in row


def test_a_row_of_a_library_not_installed_is_skipped_saying_how_to_install_it(monkeypatch, versions):
    monkeypatch.setitem(BY_NAME, "torch", dataclasses.replace(BY_NAME["torch"], module="bench_no_such_module"))
    row = _measured(monkeypatch, "torch t.item()")
    assert row["status"] == "skipped" and row["torch_version"] == "torch 9.9"
    assert row["error"].startswith('PyTorch is not installed (pip install "cuda-sync-bench[torch]"): ')


def test_a_library_installed_without_cuda_says_so(monkeypatch):
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: False))
    monkeypatch.setitem(sys.modules, "bench_fake_torch", fake)
    torch = dataclasses.replace(BY_NAME["torch"], module="bench_fake_torch")
    assert torch.missing() == "PyTorch is installed without CUDA support"


# --- syncs and trace rows: the libraries loaded as the region ran ---------------------------------------------------

def test_loaded_libraries_are_those_in_the_process(monkeypatch, versions):
    for library in LIBRARIES:
        monkeypatch.delitem(sys.modules, library.versioned[0], raising=False)
    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))
    assert libraries.loaded_versions() == {"torch_version": "torch 9.9"}


def test_syncs_and_trace_rows_record_the_libraries_loaded(tmp_path):
    from bench.syncs import SyncsResult
    from bench.syncs import save as save_syncs
    from bench.trace import result_of
    from bench.trace import save as save_trace
    from bench.usercode.activity import Activity, Op, Recording
    from bench.usercode.stacks import Frame
    from bench.usercode.syncs.result import places
    from bench.usercode.waits import Wait

    loaded = {"cupy_version": "cupy-cuda12x 14", "torch_version": "torch 2.5.1"}
    frames = (Frame("/u/train.py", 3, "step", ""), Frame("/site/torch/x.py", 9, "sync", "torch"))
    waited, own = places([Wait(frames, "torch", "cuStreamSynchronize", 0.0, 0.1, 0.15, True)], {}, settle_ms=100)
    save_syncs([("train.py:step", SyncsResult(waited, own, region_ms=1.0, libraries=loaded))], synthetic.environment(),
               tmp_path / "_syncs" / "run.parquet")
    found = result_of([Recording([Activity(Op.KERNEL, 7, 0, 100_000, name="k")], [])], copy_bound=None,
                      pinned=lambda op, nbytes: (0.0, "measured"))
    found.provenance = dataclasses.replace(found.provenance, libraries=loaded)
    save_trace([("x.py:step", found)], synthetic.environment(), tmp_path / "_trace" / "run.parquet")
    for table in ("syncs", "trace"):
        rows = store.named_tables(tmp_path, table)
        assert set(rows["torch_version"]) == {"torch 2.5.1"} and rows["jax_version"].isna().all(), table
        assert set(rows["cupy_version"]) == {"cupy-cuda12x 14"}, table


# --- files written before the version columns ----------------------------------------------------------------------

def test_a_file_without_the_version_columns_reads_and_upgrades(tmp_path):
    path = synthetic.write(tmp_path / "r.parquet", synthetic.library_records()[:4])
    older = [name for name in pq.read_schema(path).names if name not in VERSIONS[len(REQUIRED):]]
    table = pq.read_table(path).select(older)
    pq.write_table(table.replace_schema_metadata({**table.schema.metadata, b"pandas": store.pandas_metadata(
        table.schema)}), path)
    rows = store.read(path, synthetic.suite())
    assert len(rows) == 4 and "torch_version" not in rows
    assert upgrade.to_suite_schema(path, synthetic.suite()) is True
    assert pq.read_table(path)["torch_version"].null_count == 4


def test_compare_says_a_library_version_changed_only_where_both_runs_recorded_one():
    import pandas as pd

    from bench.analysis.compare import ENVIRONMENT_COLUMNS, _environment_changes

    assert set(VERSIONS) <= set(ENVIRONMENT_COLUMNS)
    before = pd.DataFrame({"torch_version": [None, None]})  # a run of before the column, or without PyTorch rows
    after = pd.DataFrame({"torch_version": ["torch 2.5.1", None]})
    assert _environment_changes(before, after) == []
    older = pd.DataFrame({"torch_version": ["torch 2.4.0", None]})
    assert _environment_changes(older, after) == ["torch_version differs: torch 2.4.0 → torch 2.5.1"]


@pytest.mark.parametrize("shards", [1, 3, 4, 5, 8])
def test_the_warm_up_makes_every_call_but_the_fresh_once_each_library_in_processes_of_its_own(shards):
    names = [name for name in catalogs.catalog() for _ in range(3)]  # a call per placement
    made = [experiment.warm_calls(names, shard, shards) for shard in range(shards)]
    warmed = [call.name for calls in made for call in calls]
    assert sorted(warmed) == sorted(call.name for call in catalogs.catalog().values() if not call.fresh)
    per_shard = [{call.library for call in calls} for calls in made]
    assert all(per_shard)  # no process without calls
    if shards >= len(CATALOGED):  # a process imports one library
        assert all(len(libraries_of) == 1 for libraries_of in per_shard)


def test_the_warm_up_makes_only_the_calls_of_the_plan():
    plan = list(experiment.EXPERIMENT.sweeps.quick["call"])
    made = [experiment.warm_calls(plan, shard, 3) for shard in range(3)]
    assert sorted(call.name for calls in made for call in calls) == sorted(plan)
    assert experiment.warm_calls([], 0, 1) == []


def test_the_sweeps_processes_keep_what_jax_compiles_in_a_cache_of_the_machine(tmp_path, monkeypatch):
    from bench.sweep import processes

    for key, _ in BY_NAME["jax"].loading.disk_cache:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(processes.os, "environ", dict(processes.os.environ))  # what the fork server inherits
    processes._processes()
    assert processes.os.environ["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path / "bench" / "jax")
    assert processes.os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "0"
    processes.os.environ["JAX_COMPILATION_CACHE_DIR"] = "/the/users/own"
    processes._processes()
    assert processes.os.environ["JAX_COMPILATION_CACHE_DIR"] == "/the/users/own"  # a user's setting wins
    # they keep theirs anyway
    assert not any(BY_NAME[name].loading.disk_cache for name in ("cupy", "numba-cuda", "torch"))
