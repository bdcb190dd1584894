"""The documentation stays honest: every relative link in README.md and docs/ points to a file that exists (and to a
heading that exists, where it names one), the generated columns reference matches the schema, the front page stays
short, every ``python -m bench`` command shown in a code block parses with bench's own parser (a sweep's plans, its
budget met), the command-line reference names every option the parser has, and what the pages and the help say of the
code is what the code declares or does (the commands needing a GPU, the results file's name, the folders report reads,
configuration counts, the extras a shown command needs, no machine's absolute paths). CPU only; reads files and
imports no CUDA."""

from __future__ import annotations

import argparse
import ast
import os
import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from paths import with_path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FRONT_PAGE = ROOT / "README.md"
FRONT_PAGE_MAX_LINES = 150
COLUMNS_PAGE = DOCS / "reference" / "columns.md"
COLUMNS_COMMAND = "python scripts/columns_doc.py > docs/reference/columns.md"
CLI_PAGE = DOCS / "reference" / "cli.md"


def pages() -> list[Path]:
    found = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    return [page for page in found if page.is_file()]


def name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


# --- Markdown, as far as these tests need it -----------------------------------------------------------------

FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})(.*)$")


def split_fences(text: str) -> tuple[list[tuple[int, str]], list[tuple[int, str, list[tuple[int, str]]]]]:
    """(prose lines, code blocks): each line with its 1-based number; each block with its info string."""
    prose: list[tuple[int, str]] = []
    blocks: list[tuple[int, str, list[tuple[int, str]]]] = []
    fence, block = None, None
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
            block = (number, match.group(2).strip(), [])
            continue
        if fence is not None:
            if line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
                blocks.append(block)
                fence, block = None, None
            else:
                block[2].append((number, line))
            continue
        prose.append((number, line))
    if block is not None:  # an unclosed fence runs to the end of the file
        blocks.append(block)
    return prose, blocks


INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]"  # [text] or ![alt], one level of brackets inside
                  r"\(\s*<?([^()\s<>]*(?:\([^()\s]*\)[^()\s<>]*)*)>?(?:\s+\"[^\"]*\")?\s*\)")  # (target "title")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def links(page: Path) -> list[tuple[int, str]]:
    """Every inline link and image target outside code, with its line number."""
    prose, _ = split_fences(page.read_text())
    found = []
    for number, line in prose:
        line = INLINE_CODE.sub(lambda match: "x" * len(match.group(0)), line)  # `[a](b)` in code is not a link
        found += [(number, match.group(1)) for match in LINK.finditer(line)]
    return found


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text as rendered, lower-cased, with everything but letters, digits, spaces,
    hyphens and underscores removed and spaces turned into hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's (or image's) text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("`", "").lower()
    text = "".join(char for char in text if char.isalnum() or char in " -_")
    return text.replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    """Every heading anchor of a Markdown page; repeated headings get -1, -2, ... as on GitHub."""
    prose, _ = split_fences(page.read_text())
    seen: dict[str, int] = {}
    found = set()
    for _, line in prose:
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


# --- (a) every relative link resolves --------------------------------------------------------------------------

def broken_links(page: Path) -> list[str]:
    problems = []
    base = page.parent
    for number, target in links(page):
        parts = urlsplit(target)
        if parts.scheme or target.startswith("//"):  # http(s), mailto: not checked here
            continue
        path, fragment = unquote(parts.path), unquote(parts.fragment)
        where = f"{name(page)}:{number}: {target}"
        destination = (base / path).resolve() if path else page
        if path and not destination.exists():
            problems.append(f"{where}: no such file or directory")
            continue
        if fragment and destination.suffix == ".md" and destination.is_file():
            if fragment not in anchors(destination):
                problems.append(f"{where}: no heading with anchor #{fragment} in {destination.relative_to(ROOT)}")
    return problems


@pytest.mark.parametrize("page", pages(), ids=name)
def test_every_relative_link_resolves(page):
    problems = broken_links(page)
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_anchors_follow_github_rules():
    assert slug("Sweeps: quick, default, full") == "sweeps-quick-default-full"
    assert slug("Does *my* code block? CuPy and PyTorch") == "does-my-code-block-cupy-and-pytorch"
    assert slug("Each experiment's own columns") == "each-experiments-own-columns"
    assert slug("bench — which CUDA calls block") == "bench--which-cuda-calls-block"
    assert slug("`assert_async` and [probe](x.md)") == "assert_async-and-probe"


def test_the_link_checker_finds_broken_links(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("# Here\n")
    page.write_text("# Top\n[ok](there.md#here) [gone](missing.md) [bad](there.md#nowhere) [self](#top)\n"
                    "`[code](missing.md)`\n```\n[fenced](missing.md)\n```\n[web](https://example.com/x)\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    problems = broken_links(page)
    assert len(problems) == 2 and "missing.md" in problems[0] and "#nowhere" in problems[1]


# --- (b) the columns reference is generated from the schema ----------------------------------------------------

def test_columns_reference_matches_the_schema():
    environment = {**os.environ, "PYTHONPATH": with_path(str(ROOT / "src"))}
    generated = subprocess.run([sys.executable, str(ROOT / "scripts" / "columns_doc.py")], cwd=ROOT, env=environment,
                               capture_output=True, text=True, timeout=120)
    assert generated.returncode == 0, generated.stderr[-3000:]
    assert COLUMNS_PAGE.is_file(), f"{name(COLUMNS_PAGE)} is missing: run `{COLUMNS_COMMAND}`"
    assert COLUMNS_PAGE.read_text() == generated.stdout, (
        f"{name(COLUMNS_PAGE)} differs from the schema's columns: run `{COLUMNS_COMMAND}` and commit the result")


# --- (c) the front page is a front page ------------------------------------------------------------------------

def test_front_page_is_short():
    lines = len(FRONT_PAGE.read_text().splitlines())
    assert lines <= FRONT_PAGE_MAX_LINES, (
        f"{name(FRONT_PAGE)} has {lines} lines; a front page has at most {FRONT_PAGE_MAX_LINES}: "
        "move the rest to docs/")


# --- (d) every command shown parses ----------------------------------------------------------------------------

PLACEHOLDERS = {  # what a placeholder in a shown command stands for, as something the parser accepts
    "FILE": "results/run.parquet", "RESULTS": "results", "OLD": "results/old.parquet", "NEW": "results/new.parquet",
    "DIR": "results", "N": "0", "SECONDS": "60", "PCT": "10", "PERCENT": "10", "G": "GPU-0", "S": "60",
}
OPERATORS = {"&&", "||", ";", "|", "&"}
COMMAND_STARTS = (["python", "-m", "bench"], ["python3", "-m", "bench"])


def _substitute(line: str) -> str:
    line = re.sub(r"\$\([^)]*\)|\$\{[^}]*\}|\$\w+", "node-a", line)  # shell substitutions: a sample value
    return re.sub(r"<([A-Za-z_-]+)>", lambda match: PLACEHOLDERS.get(match.group(1).upper(), "x"), line)


def shown_commands() -> list[tuple[str, list[str]]]:
    """Every ``python -m bench ...`` command in a code block of README.md or docs/ (also after && or ;), as
    (where, its arguments after ``bench``)."""
    found = []
    for page in pages():
        _, blocks = split_fences(page.read_text())
        for _, info, lines in blocks:
            if info.split()[:1] and info.split()[0].lower() in ("python", "py", "pycon", "toml", "json", "yaml"):
                continue
            found += commands_in(name(page), lines)
    return found


def commands_in(where: str, lines: list[tuple[int, str]]) -> list[tuple[str, list[str]]]:
    """The ``python -m bench ...`` commands of shell ``lines`` (number, text), as (where, its arguments)."""
    found = []
    joined: list[tuple[int, str]] = []
    for number, line in lines:  # backslash continuations make one line
        if joined and joined[-1][1].endswith("\\"):
            joined[-1] = (joined[-1][0], joined[-1][1][:-1] + " " + line.strip())
        else:
            joined.append((number, line.strip().removeprefix("$ ")))
    for number, line in joined:
        if "-m bench" not in line:
            continue
        try:
            words = shlex.split(_substitute(line), comments=True)
        except ValueError as error:
            found.append((f"{where}:{number}: {line}", [f"<unparsable shell: {error}>"]))
            continue
        segment: list[str] = []
        for word in [*words, ";"]:
            if word not in OPERATORS:
                segment.append(word)
                continue
            while segment and re.fullmatch(r"[A-Za-z_]\w*=.*", segment[0]):  # VAR=value command
                segment.pop(0)
            if segment[:3] in COMMAND_STARTS:
                arguments = list(segment[3:])
                for index, argument in enumerate(arguments):  # up to a redirection
                    if re.match(r"^\d*[<>]", argument):
                        arguments = arguments[:index]
                        break
                found.append((f"{where}:{number}: {line}", arguments))
            segment = []
    return found


def _check_sweep(args: argparse.Namespace) -> None:
    """What the parser leaves to the sweep, checked as the sweep plans it, which needs no GPU: experiment names,
    axes, sizes, and that a ``--budget`` shown can be met by the configurations it would run."""
    from bench.sweep.plan import Request, make
    from bench.platform.units import parse_sizes

    devices = (0, 1) if args.devices == "all" else tuple(args.devices or ()) or (args.device or 0,)
    axes = {item.partition("=")[0].strip(): item.partition("=")[2].split(",") for item in args.axis}
    names = [item.strip() for item in args.experiments.split(",")] if args.experiments else None
    make(names, mode=args.mode, sizes=parse_sizes(args.sizes) if args.sizes else None, axes=axes,
         budget_s=args.budget, devices=devices,
         at_once=Request(concurrent=args.concurrent, one_at_a_time=getattr(args, "one_at_a_time", False)).at_once)


COMMANDS = shown_commands()


def test_the_docs_show_commands():
    assert len(COMMANDS) >= 10, COMMANDS
    assert any(name(FRONT_PAGE) in where for where, _ in COMMANDS)


@pytest.mark.parametrize("arguments", [arguments for _, arguments in COMMANDS],
                         ids=[where for where, _ in COMMANDS])
def test_shown_command_parses(arguments):
    from bench.cli import _parser
    from bench.platform.errors import UsageError

    if {"-h", "--help"} & set(arguments):
        return  # argparse prints the help and exits: nothing to check
    try:
        args = _parser().parse_args(arguments)
    except (UsageError, SystemExit) as error:
        pytest.fail(f"python -m bench {shlex.join(arguments)}: {error}")
    if getattr(args, "command", None) == "sweep":
        try:
            _check_sweep(args)
        except ValueError as error:
            pytest.fail(f"python -m bench {shlex.join(arguments)}: {error}")


WORKFLOW = DOCS / "examples" / "gpu-gate.yml"


def workflow_runs(path: Path) -> list[tuple[int, str]]:
    """The shell lines of a GitHub Actions workflow's ``run:`` steps, numbered: a block's lines, or a one-line run
    (as far as this workflow needs: no anchors, no flow style)."""
    found: list[tuple[int, str]] = []
    block: int | None = None  # the indentation a run block's lines must exceed
    for number, line in enumerate(path.read_text().splitlines(), 1):
        indent = len(line) - len(line.lstrip())
        if block is not None:
            if not line.strip() or indent > block:
                found.append((number, line.strip()))
                continue
            block = None
        match = re.match(r"^(\s*)(- )?run:\s*(.*)$", line)
        if match:
            if match.group(3) in ("|", "|-", ">", ">-"):
                block = len(match.group(1)) + (2 if match.group(2) else 0)
            elif match.group(3):
                found.append((number, match.group(3)))
    return found


def test_the_ci_workflow_runs_only_commands_and_options_bench_has():
    from bench.cli import _parser

    commands = commands_in(name(WORKFLOW), workflow_runs(WORKFLOW))
    assert sorted(arguments[0] for _, arguments in commands) == ["syncs", "trace"], commands
    for where, arguments in commands:
        try:
            _parser().parse_args(arguments)
        except SystemExit:
            pytest.fail(f"{where}: python -m bench {shlex.join(arguments)} is not a command bench has")
    gate = next(arguments for _, arguments in commands if "--baseline" in arguments)
    assert gate[gate.index("--format") + 1] == "github" and "--summary" in gate
    text = WORKFLOW.read_text()
    assert "runs-on: [self-hosted" in text and "actions/upload-artifact@" in text and "$GITHUB_STEP_SUMMARY" in text
    assert "(examples/gpu-gate.yml)" in (DOCS / "ci.md").read_text()


def test_the_workflow_reader_finds_run_blocks_and_one_line_runs(tmp_path):
    workflow = tmp_path / "w.yml"
    workflow.write_text("jobs:\n  a:\n    steps:\n      - run: python -m bench env\n      - name: b\n        run: |\n"
                        "          echo one\n\n          python -m bench syncs m:f\n      - name: c\n")
    assert workflow_runs(workflow) == [(4, "python -m bench env"), (7, "echo one"), (8, ""),
                                       (9, "python -m bench syncs m:f")]


# --- the command-line reference names every option ---------------------------------------------------------------

def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _sections(text: str) -> dict[str, str]:
    """The text under each ``## heading`` of a page, by the heading's first word."""
    sections: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        match = re.match(r"^##\s+(\S+)", line)
        if match:
            current = match.group(1)
        sections.setdefault(current, []).append(line)
    return {key: "\n".join(lines) for key, lines in sections.items()}


def test_cli_reference_names_every_command_and_option():
    from bench.cli import _parser

    parser = _parser()
    sections = _sections(CLI_PAGE.read_text())
    missing = [option for action in parser._actions for option in action.option_strings
               if option not in ("-h", "--help") and option not in CLI_PAGE.read_text()]
    for command, subparser in _subcommands(parser).items():
        section = sections.get(command)
        if section is None:
            missing.append(f"a '## {command}' section")
            continue
        missing += [f"{command} {option}" for action in subparser._actions for option in action.option_strings
                    if option not in ("-h", "--help") and f"`{option}" not in section]
    assert not missing, (f"{name(CLI_PAGE)} does not describe: {', '.join(missing)} "
                         "(see `python -m bench COMMAND --help`)")


def _layout_block() -> str:
    text = (DOCS / "contributing.md").read_text()
    return text.split("## Layout", 1)[1].split("```", 2)[1]


def test_the_contributing_layout_is_the_layout_on_disk():
    """Every module and package of src/bench is in the contributing page's layout, and every .py or package it names
    under src/bench exists."""
    block = _layout_block()
    package = ROOT / "src" / "bench"
    on_disk = {path.name for path in package.iterdir()
               if (path.suffix == ".py" or (path / "__init__.py").is_file()) and not path.name.startswith(".")}
    missing = sorted(name for name in on_disk
                     if not re.search(rf"(?<![\w/.]){re.escape(name.removesuffix('.py'))}(\.py|/)", block))
    assert not missing, f"docs/contributing.md's layout lacks {missing}"
    named = set(re.findall(r"(?<![\w/.{])([a-z_]+(?:\.py|/))", block.split("tests/", 1)[0])) - {"src/"}
    named = {name for name in named if not name.startswith("test_")}  # tests named beside a module
    packages = {path.name for path in package.rglob("*") if path.is_dir()}
    files = {path.name for path in package.rglob("*.py")}
    absent = sorted(name for name in named if name.removesuffix("/") not in packages and name not in files)
    assert not absent, f"docs/contributing.md's layout names what is not under src/bench: {absent}"


def test_every_package_says_what_it_holds_and_may_import():
    for init in sorted((ROOT / "src" / "bench").rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        if init.parent.name == "bench":
            continue
        assert doc and "import" in doc, f"{init.relative_to(ROOT)}: its opening docstring says what it may import"


MODULE_DOCSTRING_MAX_LINES = 12


def test_every_module_docstring_is_short():
    """A module's docstring says what it holds in at most 12 lines; rules, formulas and examples are the docs'."""
    long = []
    for module in sorted((ROOT / "src" / "bench").rglob("*.py")):
        where = module.relative_to(ROOT).as_posix()
        doc = ast.get_docstring(ast.parse(module.read_text())) or ""
        if len(doc.splitlines()) > MODULE_DOCSTRING_MAX_LINES:
            long.append(f"{where}: {len(doc.splitlines())} lines")
    assert not long, (f"module docstrings over {MODULE_DOCSTRING_MAX_LINES} lines (move the specification to docs/):\n"
                      + "\n".join(long))


# --- what the pages and the help say of the code is what the code declares or does --------------------------------

def _help_texts() -> str:
    """Every help text of the parser: the description, the examples, each command's and each option's help."""
    from bench.cli import _parser

    parser = _parser()
    texts = [parser.description or "", parser.epilog or ""]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            texts += [choice.help or "" for choice in action._choices_actions]
    for subparser in _subcommands(parser).values():
        texts += [action.help or "" for action in subparser._actions]
    return "\n".join(texts)


def _texts() -> list[tuple[str, str]]:
    """(where, text): every page and the help."""
    return [(name(page), page.read_text()) for page in pages()] + [("python -m bench --help", _help_texts())]


COMMAND = r"(?:sweep|plot|claims --measure|claims|compare|report|probe|syncs|trace|env)"


def test_the_commands_said_to_need_a_gpu_are_those_declared():
    from bench.platform.arguments import GPU_COMMANDS

    said = {where: re.findall(rf"Measuring \(([^)]*)\)\s+needs", " ".join(text.split())) for where, text in _texts()}
    assert said["python -m bench --help"] and said[name(CLI_PAGE)], said
    wrong = [f"{where}: {clause}" for where, clauses in said.items() for clause in clauses
             if sorted(set(re.findall(COMMAND, clause)) - {"claims --measure"}) != sorted(GPU_COMMANDS)]
    assert not wrong, f"these list other commands than bench.platform.arguments.GPU_COMMANDS {GPU_COMMANDS}: {wrong}"


def test_the_commands_declared_to_need_a_gpu_refuse_without_one_and_env_runs(no_gpu, tmp_path, monkeypatch, capsys):
    from bench import cli
    from bench.platform.arguments import GPU_COMMANDS

    monkeypatch.chdir(tmp_path)
    targets = {"probe": ["os:getcwd"], "syncs": ["os:getcwd"], "trace": ["os:getcwd"]}
    for command in GPU_COMMANDS:
        assert cli.main([command, *targets.get(command, [])]) == 2, command
        assert no_gpu in capsys.readouterr().err, command
    assert cli.main(["env"]) == 0 and not list(tmp_path.iterdir())


def test_the_results_file_is_named_as_the_sweep_names_it():
    from bench.platform.arguments import RESULTS_NAME

    named = [(where, found) for where, text in _texts()
             for found in re.findall(r"<[\w-]+>-<gpu>\.parquet", text) if found != RESULTS_NAME]
    assert not named, f"a sweep writes results/{RESULTS_NAME} (bench.platform.arguments.RESULTS_NAME): {named}"


def _folders_report_reads() -> set[str]:
    """The ``_<name>/`` folders that ``bench report`` reads besides results files: the tables of the tools that save
    one (``tests/test_tools.py`` holds ``report_command`` to them)."""
    from bench.usercode.tools import saved

    return {f"_{tool.table}/" for tool in saved()}


def test_what_report_says_it_reads_is_what_it_reads():
    from bench.cli import _parser

    folders = _folders_report_reads()
    assert folders, "bench report reads no _<name>/ folder: no tool saves a table"
    report = _subcommands(_parser())["report"]
    helps = {"report --help": " ".join(action.help or "" for action in report._actions),
             f"{name(CLI_PAGE)} ## report": _sections(CLI_PAGE.read_text())["report"]}
    missing = [f"{where} lacks {folder}" for where, text in helps.items() for folder in sorted(folders)
               if folder not in text]
    assert not missing, f"report reads {sorted(folders)} though it leaves out other _ folders: {missing}"


def test_configuration_counts_stated_are_the_plans():
    from bench.cli import _parser
    from bench.sweep.plan import make

    current = [page for page in pages() if "findings" not in page.parts]  # a findings page: the plans of its day
    stated = [(name(page), command, int(count)) for page in current for command, count in
              re.findall(r"^\| `python -m bench (sweep[^`]*)` \| (\d+) \|", page.read_text(), re.MULTILINE)]
    assert stated, "no page states a sweep's configuration count: drop this test or the table it read"
    wrong = []
    for where, command, count in stated:
        args = _parser().parse_args(shlex.split(command))
        planned = sum(len(item.configs) for item in make(mode=args.mode))
        if planned != count:
            wrong.append(f"{where}: `python -m bench {command}` has {planned} configurations, not {count}")
    assert not wrong, wrong


def test_budgets_shown_are_checked():
    """A shown ``--budget`` that no sweep of its configurations meets fails test_shown_command_parses."""
    import argparse as arguments

    with pytest.raises(ValueError, match="--budget 5: these"):
        _check_sweep(arguments.Namespace(devices=None, device=None, axis=[], experiments=None, mode="default",
                                         sizes=None, budget=5.0, concurrent=False))


def _install_extras(line: str) -> set[str]:
    found = re.search(r"pip install -e \"?\.\[([^\]]*)\]", line)
    return set(found.group(1).split(",")) if found else set()


def test_the_readme_installs_what_its_commands_need():
    """Some install line of the README installs what each command it shows needs, and every install line can be
    installed (an extra that needs another has it beside it: ``.[cu12,cupti]`` cannot be resolved)."""
    from bench.platform.arguments import BESIDE, EXTRAS, GPU_COMMANDS, MEASURING_EXTRAS

    text = FRONT_PAGE.read_text()
    lines = [extras for extras in map(_install_extras, text.splitlines()) if extras]
    first = _install_extras(text.split("```sh", 1)[1].split("\n")[1])
    for extras in lines:
        for extra, beside in BESIDE.items():
            assert extra not in extras or beside in extras, f"README installs {sorted(extras)}: {extra} needs {beside}"
    shown = {arguments[0] for where, arguments in COMMANDS if where.startswith(name(FRONT_PAGE)) and arguments}
    for command in shown:
        needed = set(EXTRAS.get(command, ()))
        assert any(needed <= extras for extras in lines), f"no README install line has {sorted(needed)} for {command}"
    if shown & set(GPU_COMMANDS):
        assert first & set(MEASURING_EXTRAS), "README's first install line installs no measuring libraries"


ABSOLUTE = re.compile(r"(?<![\w.~/-])/(?:work|home|root|tmp|Users|private)/[\w.+-]+")


def test_no_page_shows_a_machines_absolute_paths():
    found = [f"{name(page)}:{number}: {match.group(0)}" for page in pages()
             for number, line in enumerate(page.read_text().splitlines(), 1) for match in ABSOLUTE.finditer(line)]
    assert not found, f"paths of the machine that ran them (print them relative, as syncs and trace do): {found}"


def test_the_usage_page_names_the_experiments_that_run_beside_other_gpus():
    """Which experiments a sweep of several GPUs runs beside other GPUs' work is measured (docs/findings): the page
    that says so names exactly the experiments that declare it."""
    from bench.experiments import registry

    text = (DOCS / "usage.md").read_text()
    named = re.search(r"\(`Experiment\.processes\.own_gpu`:\s*(.*?)\)", text, re.S)
    assert named, "docs/usage.md no longer lists the experiments with own_gpu"
    assert set(re.findall(r"`(\w+)`", named.group(1))) == {
        name for name, experiment in registry().items() if experiment.processes.own_gpu}
