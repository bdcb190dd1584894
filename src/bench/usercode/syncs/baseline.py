"""A syncs baseline: the places a region waited at, kept as plain JSON (``bench syncs --save-baseline``), and what a
later run changed against it (``bench syncs --baseline``): new places, more waits, places gone.

A place is named by its file relative to the project, its function's qualified name, its code (the line's Python
tokens: its spacing and comment left out), its occurrence among the lines of that function with the same code and
its thread's role, never by its line number: code added above it, blank lines, comments and reformatting leave it
matched. ``slack`` in the file lets a count that depends on data grow by that much. The specification:
docs/syncs.md, "Baselines".
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from enum import Enum
from pathlib import Path

from bench.platform.errors import UsageError
from bench.analysis.escape import json_text
from bench.usercode.syncs.result import Place

FORMAT = "bench syncs baseline 1"
PROJECT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")


class Change(str, Enum):
    """What a place did against the baseline."""

    NEW = "new"  # waits where the baseline has no wait: worse
    MORE = "more"  # waits more often than the baseline allows (its count and slack): worse
    FEWER = "fewer"  # waits less often: better
    GONE = "gone"  # no longer waits: better
    SAME = "same"

    @property
    def worse(self) -> bool:
        return self in (Change.NEW, Change.MORE)


@dataclass(frozen=True)
class Key:
    """What matches a place across edits: not its line."""

    file: str  # relative to the project, with forward slashes
    function: str
    code: str  # the line's tokens (:func:`code`)
    occurrence: int  # 1 for the first line of the function with this code, 2 for the second, ...
    thread: str  # its role (:func:`thread_role`); "": the region's own


@dataclass(frozen=True)
class BaselinePlace:
    """One waiting place as a baseline keeps it."""

    file: str
    function: str
    source: str
    occurrence: int
    thread: str
    count: int
    library: str = ""
    cuda_calls: tuple[str, ...] = ()
    slack: int = 0  # waits above count that still pass (a count that depends on data)
    line: int = 0  # where it was when saved: shown, never matched

    @property
    def key(self) -> Key:
        return Key(self.file, self.function, code(self.source), self.occurrence, thread_role(self.thread))

    def __str__(self) -> str:
        """'train.py in step (occurrence 2) [thread metrics]: loss.item()'"""
        where = f"{self.file} in {self.function}"
        if self.occurrence > 1:
            where += f" (occurrence {self.occurrence})"
        return f"{where}{f' [thread {self.thread}]' if self.thread else ''}: {self.source}"


@dataclass(frozen=True)
class Compared:
    """One place's change: the baseline's and this run's (None where it has none)."""

    change: Change
    key: Key
    before: BaselinePlace | None
    now: BaselinePlace | None
    absolute_file: str = ""  # the file as this run found it ("" for a place gone)

    @property
    def place(self) -> BaselinePlace:
        """This run's place, or the baseline's where it is gone."""
        return self.now or self.before

    @property
    def line(self) -> int:
        return self.place.line


@dataclass
class Comparison:
    """A run against a baseline."""

    changes: list[Compared]
    baseline: str  # the baseline file, as named

    @property
    def worse(self) -> list[Compared]:
        return [change for change in self.changes if change.change.worse]

    @property
    def better(self) -> list[Compared]:
        return [change for change in self.changes if change.change in (Change.FEWER, Change.GONE)]

    @property
    def failed(self) -> bool:
        return bool(self.worse)


def normalized(source: str) -> str:
    """A line's text with its whitespace collapsed: what a baseline shows."""
    return " ".join(source.split())


def code(source: str) -> str:
    """A line's Python tokens, one space apart, without its comment: what a baseline matches (``f( x )  # why``
    and ``f(x)`` alike). A line that is not whole Python (a bracket it leaves open) keeps the tokens before that."""
    tokens = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source.strip()).readline):
            if token.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                                  tokenize.DEDENT, tokenize.ENDMARKER):
                tokens.append(token.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return " ".join(tokens) or normalized(source)


def project_root(path: Path) -> Path:
    """The project a file belongs to: the nearest directory above it that is a git work tree (where the pull request
    names files from), else the nearest with a packaging marker, else the current directory."""
    path = path.resolve()
    for markers in (PROJECT_MARKERS[:1], PROJECT_MARKERS[1:]):
        for directory in path.parents:
            if any((directory / marker).exists() for marker in markers):
                return directory
    return Path.cwd().resolve()


def relative(file: str) -> str:
    """``file`` relative to its project, forward slashes (as it was where it is outside every project)."""
    path = Path(file)
    try:
        return path.resolve().relative_to(project_root(path)).as_posix()
    except (ValueError, OSError):
        return path.as_posix()


THREAD_COUNTERS = re.compile(r"[-_ ]?\d+")


def thread_role(name: str) -> str:
    """What matches a thread across runs: its name without the counters Python and libraries number threads with
    ('Thread-3 (worker)' and 'Thread-7 (worker)' alike: 'Thread (worker)'; 'ThreadPoolExecutor-0_1':
    'ThreadPoolExecutor'; 'thread 140213': 'thread')."""
    return THREAD_COUNTERS.sub("", name)


@dataclass(frozen=True)
class Scope:
    """Where a line stands in its file: the qualified name of its innermost function or class ('Model.forward',
    'decorate.wrapper'; '<module>' outside all), and the lines of that scope that are its own (not a nested one's),
    each with its text."""

    name: str
    lines: tuple[tuple[int, str], ...]


def scope_of(file: str, line: int) -> Scope | None:
    """The :class:`Scope` of ``line`` in ``file``; None where the file cannot be read as Python."""
    try:
        text = Path(file).read_text(encoding="utf-8-sig", errors="replace")
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError):
        return None
    rows = text.split("\n")  # as Python numbers lines: not at \u2028 or \x0c inside them
    chain: list[ast.AST] = []
    node: ast.AST = tree
    while True:  # down through the defs and classes that hold the line
        inner = next((child for child in ast.iter_child_nodes(node) if _scope(child)
                      and child.lineno <= line <= (child.end_lineno or child.lineno)), None)
        if inner is None:
            inner = next((found for child in ast.iter_child_nodes(node) if not _scope(child)
                          for found in ast.walk(child) if _scope(found)
                          and found.lineno <= line <= (found.end_lineno or found.lineno)), None)
        if inner is None:
            break
        chain.append(inner)
        node = inner
    start, end = (chain[-1].lineno, chain[-1].end_lineno or chain[-1].lineno) if chain else (1, len(rows))
    nested = [(child.lineno, child.end_lineno or child.lineno) for child in ast.walk(chain[-1] if chain else tree)
              if _scope(child) and child is not (chain[-1] if chain else None)]
    own = tuple((number, rows[number - 1]) for number in range(start, min(end, len(rows)) + 1)
                if not any(first <= number <= last for first, last in nested))
    return Scope(".".join(node.name for node in chain) or "<module>", own)


def _scope(node: ast.AST) -> bool:
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))


def occurrence(line: int, source: str, scope: Scope | None) -> int:
    """Which occurrence of ``source``'s code (:func:`code`) among the lines of its scope that are the scope's own
    ``line`` is: 1 where the file cannot be read (a place named by its text alone)."""
    if scope is None:
        return 1
    wanted = code(source)
    return 1 + sum(code(text) == wanted for number, text in scope.lines if number < line)


def kept(place: Place) -> BaselinePlace:
    """A place of a run as a baseline keeps it: its function by qualified name where the file says it."""
    scope = scope_of(place.file, place.line)
    return BaselinePlace(relative(place.file), scope.name if scope else place.function, normalized(place.source),
                         occurrence(place.line, place.source, scope), place.thread, place.count,
                         place.library, tuple(place.cuda_calls), 0, place.line)


def to_json(places: Iterable[BaselinePlace], target: str) -> str:
    """The baseline file's text: plain JSON, one place an object, sorted by file and function."""
    ordered = sorted(places, key=lambda place: (place.file, place.function, place.line))
    return json_text({"format": FORMAT, "target": target,
                      "places": [{**asdict(place), "cuda_calls": list(place.cuda_calls)} for place in ordered]},
                     indent=2) + "\n"


def read(path: Path) -> list[BaselinePlace]:
    """The places of a baseline file; UsageError (one line) for a file that is not one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise UsageError(f"--baseline: cannot read {path}: {error.strerror or error}") from None
    except (ValueError, RecursionError) as error:
        raise UsageError(f"--baseline: {path} is not JSON: {error}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("places"), list):
        raise UsageError(f"--baseline: {path} is not a bench syncs baseline (format {FORMAT!r})")
    places = [_place(item, path, number) for number, item in enumerate(data["places"], 1)]
    seen: dict[Key, int] = {}
    for number, place in enumerate(places, 1):
        if place.key in seen:
            raise UsageError(f"--baseline: {path}: places {seen[place.key]} and {number} are one place "
                             "(the same file, function, code, occurrence and thread)")
        seen[place.key] = number
    return places


_TYPES = {"file": str, "function": str, "source": str, "occurrence": int, "thread": str, "count": int,
          "library": str, "cuda_calls": list, "slack": int, "line": int}


def _place(item: object, path: Path, number: int) -> BaselinePlace:
    names = {field.name for field in fields(BaselinePlace)}
    required = {"file", "function", "source", "occurrence", "thread", "count"}
    if not isinstance(item, dict) or not required <= set(item) or not set(item) <= names:
        raise UsageError(f"--baseline: {path}: place {number} needs {', '.join(sorted(required))} "
                         f"and knows only {', '.join(sorted(names))}")
    for name, value in item.items():
        kind = _TYPES[name]
        least = 1 if name == "occurrence" else 0
        if kind is int and (not isinstance(value, int) or isinstance(value, bool) or value < least):
            raise UsageError(f"--baseline: {path}: place {number}: {name} must be a whole number of at least {least}")
        if kind is str and not isinstance(value, str):
            raise UsageError(f"--baseline: {path}: place {number}: {name} must be text")
        if kind is list and not (isinstance(value, list) and all(isinstance(call, str) for call in value)):
            raise UsageError(f"--baseline: {path}: place {number}: {name} must be a list of names")
    return BaselinePlace(**{**item, "cuda_calls": tuple(item.get("cuda_calls", ()))})


def compare(baseline: Sequence[BaselinePlace], places: Sequence[Place], named: str) -> Comparison:
    """This run's places against the baseline's, matched by :class:`Key`."""
    before = {place.key: place for place in baseline}
    now: dict[Key, tuple[BaselinePlace, str]] = {}
    for place in places:
        made = kept(place)
        if made.key in now:  # two threads of one role, or a line the file no longer shows: one place, both counts
            first = now[made.key][0]
            made = BaselinePlace(**{**asdict(first), "count": first.count + made.count})
        now[made.key] = (made, place.file)
    changes = []
    for key, (place, file) in now.items():
        old = before.get(key)
        if old is None:
            change = Change.NEW
        elif place.count > old.count + old.slack:
            change = Change.MORE
        elif place.count < old.count:
            change = Change.FEWER
        else:
            change = Change.SAME
        changes.append(Compared(change, key, old, place, file))
    changes += [Compared(Change.GONE, key, old, None) for key, old in before.items() if key not in now]
    order = list(Change)
    changes.sort(key=lambda change: (order.index(change.change), change.key.file, change.line))
    return Comparison(changes, named)
