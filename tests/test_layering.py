"""What importing each module of src/bench loads at run time, not only what it imports itself (issue 54): the
imports a module runs when it is imported (at its top, in ``if`` and ``try`` blocks and class bodies; not in
functions, nor under ``if TYPE_CHECKING``), followed from module to module with each module's packages, checked
against the layers; a run of every module's import in a process of its own checks that this reading misses nothing.
And no module is loaded by a string but through :mod:`bench.platform.lazy`, whose names are written out whole."""

from __future__ import annotations

import ast
import functools
import json
import os
import subprocess
import sys

import pytest

from test_layout import ANALYSIS, MEASURING, MODULES, ROOT, SRC, imported_from, module_name, package_of

LAZY = "bench.platform.lazy"
# the places a module is loaded by a name computed at run time: the mechanism itself, the two registries (an
# experiment or a view per module of their package), and the user's own module that a command names (not bench's)
LOADS_BY_NAME = {LAZY, "bench.experiments", "bench.views", "bench.cli.usercode"}
# where the name handed to bench.platform.lazy is a record's field, each field written out whole in a record: the
# catalogs' modules (bench.platform.libraries' Library.catalog) and a GPU library's own module (Library.module)
NAMES_FROM_RECORDS = {"bench.catalogs", "bench.platform.libraries"}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _run_on_import(body: list[ast.stmt]):
    """The import statements a module's body runs when it is imported: functions' bodies and TYPE_CHECKING left."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        elif isinstance(node, ast.If):
            if not _type_checking(node):
                yield from _run_on_import(node.body)
            yield from _run_on_import(node.orelse)
        elif isinstance(node, ast.ClassDef):
            yield from _run_on_import(node.body)
        elif isinstance(node, (ast.Try, ast.With)):
            for part in ("body", "orelse", "finalbody"):
                yield from _run_on_import(getattr(node, part, []))
            for handler in getattr(node, "handlers", []):
                yield from _run_on_import(handler.body)


@functools.cache
def _defined(name: str) -> frozenset[str]:
    """The names a module binds at its top by assignment or definition (a lazy stand-in ``kernels = lazy.module(...)``
    is one: ``from package import kernels`` then takes it, not the submodule)."""
    found = set()
    for node in ast.parse(MODULES[name].read_text()).body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        found |= {target.id for target in targets if isinstance(target, ast.Name)}
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
    return frozenset(found)


@functools.cache
def _tables(name: str) -> dict[str, ast.Dict]:
    """The dicts a module's top assigns as literals, by name (a package's ``lazy.names`` table is one)."""
    return {target.id: node.value for node in ast.parse(MODULES[name].read_text()).body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
            for target in node.targets if isinstance(target, ast.Name)}


@functools.cache
def _served(name: str) -> dict[str, str]:
    """The names a package serves from its modules on first use (its ``lazy.names`` table): name -> module."""
    tables = _tables(name)
    served = {}
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.Call) and _called(node) == "lazy.names" and len(node.args) > 1 \
                and isinstance(node.args[1], ast.Name) and node.args[1].id in tables:
            table = tables[node.args[1].id]
            served |= {given.value: key.value for key, value in zip(table.keys, table.values)
                       for given in getattr(value, "elts", []) if isinstance(given, ast.Constant)}
    return served


def _packages(name: str) -> set[str]:
    """``name`` and the packages above it that are modules of bench: importing a.b.c runs a and a.b first."""
    parts = name.split(".")
    return {".".join(parts[:end]) for end in range(1, len(parts) + 1)} & set(MODULES)


@functools.cache
def imported_on_import(name: str) -> frozenset[str]:
    """The modules of bench that importing ``name`` runs the import of, itself (directly)."""
    path = MODULES[name]
    package = package_of(name, path)
    found = set()
    for node in _run_on_import(ast.parse(path.read_text()).body):
        if isinstance(node, ast.Import):
            found |= {module for alias in node.names for module in _packages(alias.name)}
            continue
        base = imported_from(node, package)
        found |= _packages(base)
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            if submodule in MODULES and not (base in MODULES and alias.name in _defined(base)):
                found |= _packages(submodule)
            elif base in MODULES and alias.name in _served(base):  # taken from the package: it loads the module
                found |= _packages(_served(base)[alias.name])
    return frozenset(found - {name})


@functools.cache
def loaded_on_import(name: str) -> frozenset[str]:
    """Every module of bench that importing ``name`` loads, through whatever it imports (its packages included)."""
    seen, todo = set(), [*_packages(name)]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += imported_on_import(module)
    return frozenset(seen - {name})


def _under(name: str, prefixes) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def _bare_package(name: str) -> bool:
    """A package whose __init__ imports nothing: loading it loads nothing of its layer."""
    return MODULES[name].name == "__init__.py" and not imported_on_import(name) and not _served(name)


ALL = sorted(MODULES)


def _in(*prefixes: str):
    return lambda name: _under(name, prefixes)


LAYERS = {  # rule -> (whether a module is of the layer, whether a module is one it must never load)
    "the platform loads nothing of bench above it": (
        _in("bench.platform"), lambda name: not _in("bench.platform")(name)),
    "results on disk load only the platform": (
        _in("bench.results"), lambda name: not _in("bench.platform", "bench.results")(name)),
    "the analysis side loads no measuring code": (
        _in(*ANALYSIS), lambda name: _under(name, MEASURING) and not _under(name, ANALYSIS)),
    "the measuring tools load no experiment, sweep, catalog, user-code tool or command": (
        _in("bench.measure"), _in("bench.experiments", "bench.sweep", "bench.catalogs", "bench.usercode", "bench.cli")),
    "the user-code tools load no experiment, sweep, catalog or command": (
        _in("bench.usercode"), _in("bench.experiments", "bench.sweep", "bench.catalogs", "bench.cli")),
    "experiments load no view, report, analysis or command": (
        _in("bench.experiments"), _in("bench.views", "bench.report", "bench.analysis", "bench.cli")),
}


@pytest.fixture(scope="module")
def loaded(observed) -> dict[str, set[str]]:
    """Each module -> what importing it loads: what the reading follows, and what a real import loaded besides
    (a call at a module's top that imports in its function, a catalog loaded by its record's name)."""
    return {name: set(loaded_on_import(name)) | (set(observed.get(name, ())) - {name}) for name in ALL}


@pytest.mark.parametrize("rule", sorted(LAYERS))
def test_what_importing_a_module_loads_keeps_to_its_layer(rule, loaded):
    of_layer, forbidden = LAYERS[rule]
    modules = [name for name in ALL if of_layer(name)]
    assert modules, rule
    wrong = {name: sorted(module for module in loaded[name]
                          if module != "bench" and forbidden(module) and not _bare_package(module))
             for name in modules}
    wrong = {name: modules for name, modules in wrong.items() if modules}
    assert not wrong, f"{rule}; these modules load, when imported: {wrong}"


def test_the_reading_follows_imports_through_modules_and_packages(tmp_path, monkeypatch):
    package = tmp_path / "src" / "bench"
    (package / "low").mkdir(parents=True)
    (package / "high").mkdir()
    (package / "__init__.py").write_text("")
    (package / "low" / "__init__.py").write_text("from bench.platform import lazy\nheavy = lazy.module('x')\n")
    (package / "low" / "heavy.py").write_text("")
    (package / "low" / "light.py").write_text("from bench.low import heavy\n")  # the stand-in, not the module
    (package / "high" / "__init__.py").write_text("")
    (package / "high" / "top.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import bench.high.typed\n"
        "def f():\n    import bench.high.later\nclass C:\n    from bench.high import middle\n")
    (package / "high" / "middle.py").write_text("try:\n    import bench.low.light\nexcept ImportError:\n    pass\n")
    for leaf in ("typed", "later"):
        (package / "high" / f"{leaf}.py").write_text("")
    modules = {module_name(path, tmp_path / "src"): path for path in sorted(package.rglob("*.py"))}
    monkeypatch.setattr(sys.modules[__name__], "MODULES", modules)
    for cached in (_defined, _tables, _served, imported_on_import, loaded_on_import):
        cached.cache_clear()
    try:
        assert loaded_on_import("bench.high.top") == {"bench", "bench.high", "bench.high.middle", "bench.low",
                                                      "bench.low.light"}
    finally:
        for cached in (_defined, _tables, _served, imported_on_import, loaded_on_import):
            cached.cache_clear()


def test_the_claims_load_no_measuring_code():
    """Importing bench.analysis.claims once loaded bench.measure.memory, through the runtime's catalog."""
    assert not [name for name in loaded_on_import("bench.analysis.claims") if _under(name, MEASURING)]
    assert "bench.measure.memory" in loaded_on_import("bench.catalogs.runtime")  # which the reading sees


_IMPORT_EACH = """
import importlib, json, os, sys
import numpy, pandas, pyarrow, pyarrow.parquet, matplotlib  # the libraries every child would import again
out = {}
for name in json.loads(sys.argv[1]):
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        try:
            importlib.import_module(name)
            found = sorted(module for module in sys.modules if module == "bench" or module.startswith("bench."))
        except BaseException as error:
            found = {"error": repr(error)[:200]}
        os.write(write, json.dumps(found).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        out[name] = json.loads(pipe.read() or '{"error": "no answer"}')
    os.waitpid(child, 0)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def observed() -> dict[str, list[str]]:
    """Each module imported in a fresh process of its own (forked): the modules of bench it loaded."""
    if not hasattr(os, "fork"):
        pytest.skip("needs os.fork to import each module in a fresh process")
    done = subprocess.run([sys.executable, "-c", _IMPORT_EACH, json.dumps(ALL)], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(SRC)})
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.splitlines()[-1])
    imported = {name: loaded for name, loaded in found.items() if isinstance(loaded, list)}
    assert len(imported) >= len(ALL) * 3 // 4, {name: why for name, why in found.items() if name not in imported}
    return imported


def test_a_real_import_sees_what_a_call_at_a_modules_top_loads(observed):
    """The reading follows import statements; a real import also sees the catalogs the library experiment's
    description loads by their records' names when it is imported, which the layers are checked with too."""
    assert "bench.catalogs.cupy_calls" in observed["bench.experiments.library"]
    assert "bench.catalogs.cupy_calls" not in loaded_on_import("bench.experiments.library")
    assert set(observed["bench.analysis.selection"]) <= loaded_on_import("bench.analysis.selection") | {
        "bench.analysis.selection"}


# --- no module is loaded by a string outside bench.platform.lazy and the two registries --------------------------

def _calls(name: str):
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.Call):
            yield node


def _called(node: ast.Call) -> str:
    function = node.func
    if isinstance(function, ast.Attribute):
        inner = function.value
        prefix = inner.id if isinstance(inner, ast.Name) else inner.attr if isinstance(inner, ast.Attribute) else ""
        return f"{prefix}.{function.attr}"
    return function.id if isinstance(function, ast.Name) else ""


LOADERS = {"importlib.import_module", "import_module", "__import__", "util.module_from_spec",
           "importlib.util.module_from_spec", "importlib.__import__"}


def test_no_module_is_loaded_by_a_string_outside_lazy_and_the_registries():
    found = [f"{name}:{node.lineno}: {_called(node)}" for name in ALL if name not in LOADS_BY_NAME
             for node in _calls(name) if _called(node) in LOADERS]
    assert not found, f"load modules through bench.platform.lazy, by their whole names: {found}"


def _lazy_uses(name: str):
    """(line, function, first argument) of each call of bench.platform.lazy's module, now, Name or names."""
    for node in _calls(name):
        called = _called(node)
        if called in {"lazy.module", "lazy.now", "lazy.Name", "lazy.names", "Name"} and node.args:
            argument = node.args[1] if called == "lazy.names" else node.args[0]
            yield node.lineno, called, argument


def test_every_module_handed_to_lazy_is_written_out_whole_and_exists():
    wrong, seen = [], 0
    for name in ALL:
        if name == LAZY:
            continue
        for line, called, argument in _lazy_uses(name):
            seen += 1
            if called == "lazy.names":
                written = [key.value for key in getattr(argument, "keys", []) if isinstance(key, ast.Constant)] \
                    if isinstance(argument, ast.Dict) else _table(name, argument)
            elif isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                written = [argument.value]
            elif name in NAMES_FROM_RECORDS:
                continue
            else:
                wrong.append(f"{name}:{line}: {called} of a computed name")
                continue
            wrong += [f"{name}:{line}: {module} is no module of bench" for module in written
                      if module.split(".")[0] == "bench" and module not in MODULES]
    assert seen >= 10 and not wrong, wrong


def _table(name: str, argument: ast.expr) -> list[str]:
    """The keys of the module-level dict ``argument`` names (a package's table of its modules' names)."""
    table = _tables(name).get(getattr(argument, "id", ""))
    assert table is not None, f"{name}: lazy.names of a table that is not a literal dict at its top"
    return [key.value for key in table.keys]


def test_the_libraries_records_name_whole_modules():
    from bench.platform.libraries import LIBRARIES

    catalogs = [library.catalog for library in LIBRARIES if library.catalog]
    assert catalogs and all(module in MODULES for module in catalogs), catalogs


def test_the_command_line_dispatches_to_functions_it_names():
    from bench.cli.parser import parser

    handlers = {name: action.get_default("handler")
                for action in parser()._actions if hasattr(action, "choices") and isinstance(action.choices, dict)
                for name, action in action.choices.items()}
    assert handlers and all(handler.function.module in MODULES for handler in handlers.values()), handlers
    for name, handler in handlers.items():
        source = MODULES[handler.function.module].read_text()
        assert f"def {handler.function.name}(" in source, f"{name}: {handler.function} is no function"
