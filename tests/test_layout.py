"""The package's layout keeps its promises (issue 22): experiments are not libraries, and presentation stands apart
from measurement. Every module under src/bench is parsed (imports inside functions included) and:

- no experiment module imports another experiment module (shared code lives in :mod:`bench.measure`);
- outside the registry (``bench/experiments/__init__.py``) and the sweep (``bench/sweep/``), no module imports an
  experiment module (tests and scripts may);
- no module imports another module's private name (``from X import _name``);
- the measuring tools import neither experiments, the sweep, nor the catalogs or the user-code tools that stand on
  them; the user-code tools (``bench/usercode/``) import neither experiments, the sweep nor the catalogs;
- the analysis side (store, analysis, plots, report, compare, noise, claims and their documents, the views, and the
  tools' records, report sections, figures and trace comparison) never reaches up to the registry, the sweep or the
  measuring code: the experiments' descriptions are handed down to it; a view imports only what presentation needs;
- no modules import each other in a circle (the root package ``bench``, whose imports are its public names, aside);
- no module is over 450 lines and no function over 80 (issue 33), the call catalogs aside;
- no dataclass or NamedTuple has more than 15 fields (issue 54): a larger record is made of parts, named.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGE = SRC / "bench"
EXPERIMENTS = PACKAGE / "experiments"
EXPERIMENT_MODULES = {path.stem for path in EXPERIMENTS.glob("*.py") if path.stem != "__init__"}


def module_name(path: Path, src: Path = SRC) -> str:
    parts = path.relative_to(src).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


@functools.cache  # each file is parsed once for the module's tests
def imports(path: Path, src: Path = SRC) -> tuple[tuple[int, str, tuple[str, ...]], ...]:
    """(line, imported module, names taken from it) for every import statement of the file, wherever it is:
    ``import a.b`` is ("a.b", ()); ``from a import b, c`` is ("a", ("b", "c")), relative imports resolved."""
    package = package_of(module_name(path, src), path)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.lineno, imported_from(node, package), tuple(alias.name for alias in node.names)))
    return tuple(found)


def package_of(name: str, path: Path) -> str:
    """The package module ``name``'s relative imports start from: the module itself for an __init__.py."""
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def imported_from(node: ast.ImportFrom, package: str) -> str:
    """The module ``from X import ...`` takes its names from, a relative X resolved against ``package``."""
    base = node.module or ""
    if not node.level:
        return base
    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
    return ".".join(anchor + ([base] if base else []))


def experiment_modules_imported(path: Path, src: Path = SRC) -> list[str]:
    """The experiment modules (bench.experiments.<name>) one file imports, as 'line: bench.experiments.<name>'."""
    hits = []
    for line, module, names in imports(path, src):
        if module.startswith("bench.experiments.") and module.split(".")[2] in EXPERIMENT_MODULES:
            hits.append(f"{line}: {'.'.join(module.split('.')[:3])}")
        elif module == "bench.experiments":
            hits += [f"{line}: bench.experiments.{name}" for name in names if name in EXPERIMENT_MODULES]
    return hits  # ``from bench import experiments`` is the package (its registry), not an experiment module


def test_the_layout_sees_the_packages():
    assert {"bench.experiments", "bench.measure", "bench.experiments.bandwidth", "bench.measure.copies"} <= set(MODULES)
    assert {"bandwidth", "blocking", "latency", "overlap"} <= EXPERIMENT_MODULES


def test_the_check_finds_function_local_and_relative_imports(tmp_path):
    fake = tmp_path / "src" / "bench" / "experiments"
    fake.mkdir(parents=True)
    source = fake / "probe_only.py"
    source.write_text("from . import bandwidth\n\ndef f():\n    from bench.experiments.latency import STEPS\n"
                      "    import bench.experiments.overlap\n")
    assert experiment_modules_imported(source, tmp_path / "src") == [
        "1: bench.experiments.bandwidth", "4: bench.experiments.latency", "5: bench.experiments.overlap"]


@pytest.mark.parametrize("name", sorted(f"bench.experiments.{stem}" for stem in EXPERIMENT_MODULES))
def test_no_experiment_imports_another(name):
    others = [hit for hit in experiment_modules_imported(MODULES[name]) if not hit.endswith(f" {name}")]
    assert not others, f"{name} imports other experiments (move what they share to bench.measure): {others}"


def _may_import_experiments(name: str) -> bool:
    return name == "bench.experiments" or name.startswith("bench.experiments.") or name == "bench.sweep" \
        or name.startswith("bench.sweep.")


def test_only_the_registry_and_the_sweep_import_experiment_modules():
    found = {name: experiment_modules_imported(path) for name, path in MODULES.items()
             if not _may_import_experiments(name)}
    found = {name: hits for name, hits in found.items() if hits}
    assert not found, f"modules outside the registry and the sweep import experiment modules: {found}"


def test_no_private_name_crosses_a_module():
    crossing = []
    for name, path in MODULES.items():
        for line, module, names in imports(path):
            for imported in names:
                if imported.startswith("_") and not imported.startswith("__") and module != name:
                    crossing.append(f"{path.relative_to(ROOT)}:{line}: from {module} import {imported}")
            if module.rpartition(".")[2].startswith("_") and not module.rpartition(".")[2].startswith("__"):
                crossing.append(f"{path.relative_to(ROOT)}:{line}: import of private module {module}")
    assert not crossing, "private names imported across modules:\n" + "\n".join(crossing)


def test_measure_imports_neither_experiments_nor_the_sweep_nor_usercode():
    wrong = []
    for name, path in MODULES.items():
        if name != "bench.measure" and not name.startswith("bench.measure."):
            continue
        for line, module, names in imports(path):
            targets = [module] + [f"{module}.{item}" for item in names] if module == "bench" else [module]
            for target in targets:
                if target.startswith(("bench.experiments", "bench.sweep", "bench.catalogs", "bench.usercode")):
                    wrong.append(f"{path.relative_to(ROOT)}:{line}: {target}")
    assert not wrong, f"bench.measure must not import experiments, the sweep, the catalogs or bench.usercode: {wrong}"


ANALYSIS = ("bench.results.store", "bench.results.writes", "bench.results.version1", "bench.analysis.selection", "bench.analysis.plots", "bench.report",
            "bench.analysis.compare", "bench.analysis.noise", "bench.analysis.claims", "bench.analysis.documents", "bench.analysis.escape", "bench.views",
            "bench.usercode.tools",
            "bench.usercode.syncs.section", "bench.usercode.trace.section", "bench.usercode.trace.timeline",
            "bench.usercode.trace.collectives", "bench.usercode.trace.compare", "bench.usercode.trace.compare_text",
            "bench.usercode.trace.regressions")
MEASURING = ("bench.experiments", "bench.sweep", "bench.measure", "bench.platform.cuda", "bench.timing.gpu", "bench.timing.spin",
             "bench.platform.driver", "bench.usercode", "bench.probe", "bench.syncs", "bench.trace", "bench.pytest_plugin")
# the user-code tools are measuring code but for their analysis side (ANALYSIS names it)
VIEWS_MAY_IMPORT = ("bench.views", "bench.analysis.plots", "bench.analysis.selection", "bench.platform.units", "bench.platform.vocabulary", "bench.results.schema",
                    "bench.platform.errors", "bench.platform.env", "bench.platform.libraries")


def _targets(module: str, names: tuple[str, ...]) -> list[str]:
    """What one import statement reaches: ``from bench import plots`` reaches bench.analysis.plots."""
    return [f"{module}.{name}" for name in names] if module == "bench" else [module]


def _analysis(name: str) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in ANALYSIS)


def test_the_analysis_side_never_reaches_up():
    wrong = []
    for name, path in MODULES.items():
        if not _analysis(name):
            continue
        for line, module, names in imports(path):
            for target in _targets(module, names):
                if _measuring(target) and not _analysis(target):
                    wrong.append(f"{path.relative_to(ROOT)}:{line}: {target}")
    assert not wrong, f"the analysis side imports the registry, the sweep or measuring code: {wrong}"


def _measuring(name: str) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in MEASURING)


def test_the_check_tells_the_tools_analysis_side_from_their_measuring_code():
    assert _analysis("bench.usercode.trace.compare") and _analysis("bench.usercode.tools")
    assert _measuring("bench.usercode.trace.result") and not _analysis("bench.usercode.trace.result")
    assert _measuring("bench.usercode.hold") and _measuring("bench.trace") and not _analysis("bench.trace")


def test_the_tools_sections_and_figures_are_the_analysis_side():
    """The report draws a tool's section and figure: their modules are checked as the analysis side is."""
    from bench.usercode.tools import TOOLS

    shown = {f"{tool.name}.{part}": getattr(tool, part).module for tool in TOOLS for part in ("section", "figure")
             if getattr(tool, part) is not None}
    assert shown and all(module in MODULES for module in shown.values())
    wrong = {part: module for part, module in shown.items() if not _analysis(module)}
    assert not wrong, f"add these to ANALYSIS, and keep them from measuring code: {wrong}"


def test_the_user_code_tools_import_neither_experiments_nor_the_sweep():
    wrong = [f"{path.relative_to(ROOT)}:{line}: {target}" for name, path in MODULES.items()
             if name.startswith("bench.usercode.") for line, module, names in imports(path)
             for target in _targets(module, names)
             if target.startswith(("bench.experiments", "bench.sweep", "bench.catalogs"))]
    assert not wrong, f"bench.usercode must not import experiments, the sweep or the catalogs: {wrong}"


def test_experiments_never_show_their_rows():
    """An experiment measures; its view (bench.views) shows: no experiment imports a view or the analysis side."""
    wrong = []
    for name, path in MODULES.items():
        if not (name == "bench.experiments" or name.startswith("bench.experiments.")):
            continue
        for line, module, names in imports(path):
            for target in _targets(module, names):
                if _analysis(target):
                    wrong.append(f"{path.relative_to(ROOT)}:{line}: {target}")
    assert not wrong, f"experiments import presentation or the analysis side: {wrong}"


def test_views_import_only_what_presentation_needs():
    views = [name for name in MODULES if name == "bench.views" or name.startswith("bench.views.")]
    assert len(views) > 1
    wrong = []
    for name in views:
        for line, module, names in imports(MODULES[name]):
            for target in _targets(module, names):
                if target.startswith("bench") and not any(target == allowed or target.startswith(allowed + ".")
                                                          for allowed in VIEWS_MAY_IMPORT):
                    wrong.append(f"{MODULES[name].relative_to(ROOT)}:{line}: {target}")
    assert not wrong, f"views import more than presentation needs: {wrong}"


def import_graph(modules: dict[str, Path], src: Path = SRC) -> dict[str, set[str]]:
    """Module -> the modules of ``modules`` it imports (at its top, in a function or for annotations alike): ``from a
    import b`` reaches the module a.b where there is one, else a. The root package ``bench`` is left out: its imports
    are its public names."""
    graph = {}
    for name, path in modules.items():
        reached = set()
        for _, module, names in imports(path, src):
            submodules = {f"{module}.{item}" for item in names} & set(modules)
            reached |= submodules or ({module} & set(modules))
        graph[name] = reached - {name, "bench"}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The modules that import each other in a loop, each loop's modules sorted (Tarjan's strongly connected
    components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        for reached in sorted(graph[name]):
            if reached not in index:
                visit(reached)
                low[name] = min(low[name], low[reached])
            elif reached in stack:
                low[name] = min(low[name], index[reached])
        if low[name] == index[name]:
            component = []
            while not component or component[-1] != name:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return found


def test_the_circle_check_finds_a_loop_through_a_function(tmp_path):
    package = tmp_path / "src" / "bench" / "loop"
    package.mkdir(parents=True)
    (package / "a.py").write_text("from bench.loop import b\n")
    (package / "b.py").write_text("def f():\n    from bench.loop.c import g\n")
    (package / "c.py").write_text("import bench.loop.a\n")
    (package / "d.py").write_text("from bench.loop.a import x\n")
    modules = {module_name(path, tmp_path / "src"): path for path in sorted(package.glob("*.py"))}
    assert circles(import_graph(modules, tmp_path / "src")) == [["bench.loop.a", "bench.loop.b", "bench.loop.c"]]


def test_no_modules_import_each_other_in_a_circle():
    found = circles(import_graph(MODULES))
    assert not found, f"modules that import each other in a circle: {found}"


MAX_FILE_LINES, MAX_FUNCTION_LINES = 450, 80  # small modules and functions (issue 33); the call catalogs aside
CATALOGS = PACKAGE / "catalogs"


def oversized(paths) -> list[str]:
    """'file: N lines' for each file over :data:`MAX_FILE_LINES`, 'file:line name(): N lines' for each function
    (its decorators included) over :data:`MAX_FUNCTION_LINES`."""
    found = []
    for path in paths:
        text = path.read_text()
        if len(text.splitlines()) > MAX_FILE_LINES:
            found.append(f"{path.name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
                if node.end_lineno - first + 1 > MAX_FUNCTION_LINES:
                    found.append(f"{path.name}:{node.lineno} {node.name}(): {node.end_lineno - first + 1} lines")
    return found


def test_the_size_check_finds_a_long_file_and_a_long_function(tmp_path):
    (tmp_path / "long.py").write_text("x = 1\n" * (MAX_FILE_LINES + 1))
    (tmp_path / "function.py").write_text("@staticmethod\ndef f():\n" + "    pass\n" * (MAX_FUNCTION_LINES - 1))
    (tmp_path / "fits.py").write_text("x = 1\n" * (MAX_FILE_LINES - 2) + "def g():\n    pass\n")
    assert oversized(sorted(tmp_path.glob("*.py"))) == [f"function.py:2 f(): {MAX_FUNCTION_LINES + 1} lines",
                                                        f"long.py: {MAX_FILE_LINES + 1} lines"]


def test_no_source_file_over_450_lines_and_no_function_over_80():
    assert oversized(path for path in MODULES.values() if CATALOGS not in path.parents) == []


MAX_RECORD_FIELDS = 15  # a record of more is made of parts: name them (issue 54, goal 4)
RECORD_BASES = ("NamedTuple",)


def _name(node: ast.expr) -> str:
    """The last name of ``dataclass``, ``dataclasses.dataclass(frozen=True)``, ``typing.NamedTuple``..."""
    node = node.func if isinstance(node, ast.Call) else node
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def record_fields(tree: ast.Module) -> dict[str, list[str]]:
    """Each dataclass and NamedTuple class of a module, by name: its fields (annotated class attributes, ClassVar
    aside), its bases' not counted."""
    found = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        if not (any(_name(decorator) == "dataclass" for decorator in node.decorator_list)
                or any(_name(base) in RECORD_BASES for base in node.bases)):
            continue
        found[node.name] = [statement.target.id for statement in node.body
                            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
                            and "ClassVar" not in ast.unparse(statement.annotation)]
    return found


def test_the_field_count_finds_dataclasses_and_named_tuples():
    tree = ast.parse("from dataclasses import dataclass\nimport dataclasses, typing\nfrom typing import ClassVar\n"
                     "@dataclass\nclass A:\n    x: int\n    y: int = 0\n    z: ClassVar[int] = 1\n    w = 2\n"
                     "@dataclasses.dataclass(frozen=True)\nclass B:\n    x: int\n"
                     "class C(typing.NamedTuple):\n    x: int\n    def f(self) -> int:\n        q: int = 1\n"
                     "        return q\n"
                     "class D:\n    x: int\n")
    assert record_fields(tree) == {"A": ["x", "y"], "B": ["x"], "C": ["x"]}


def test_no_record_has_more_than_15_fields():
    """A dataclass or NamedTuple of more than 15 fields is several records in one: split it into named parts."""
    large = [f"{path.relative_to(ROOT)}: {name} has {len(fields)} fields" for path in MODULES.values()
             for name, fields in record_fields(ast.parse(path.read_text(), str(path))).items()
             if len(fields) > MAX_RECORD_FIELDS]
    assert not large, "records of more than 15 fields (split each into its parts):\n" + "\n".join(large)
