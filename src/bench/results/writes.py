"""Writing files safely, for every writer of bench (:mod:`bench.results.store`'s results files, figures, reports,
exports): a reader sees the old file or the new one, never half of one (a full disk is a
:class:`bench.platform.errors.WriteError`); a write never goes through a symlink (:func:`write_target`), never replaces
a device, a pipe or a directory, and a new run's file never replaces another file. The standard library only."""

from __future__ import annotations

import errno
import os
import re
import stat
import struct
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import BinaryIO

from bench.platform.errors import UsageError, WriteError

MAKER = "cuda-sync-bench"
"""The mark bench leaves in every report, figure and timeline it writes (an HTML generator, a PNG's Software, an
SVG's creator, a Perfetto file's generator): a file that carries it is bench's to replace."""
OWN_DIRECTORIES = (Path("results"), Path("plots/local"))
"""Directories bench owns, under the directory it runs in: it makes them and what lies under them as needed, and
replaces its figures and reports there without looking for its mark (a file there is bench's)."""
RESULTS_HOME = OWN_DIRECTORIES[0]


class Replaces(Enum):
    """Whether a writer replaces a file that is already there."""

    OWN = "its own files only (--force: any regular file)"
    NEVER = "never (another name, or --resume)"


@dataclass(frozen=True)
class Writer:
    """A command-line option that writes: what it writes, the names it takes, and what it may replace."""

    command: str
    option: str
    writes: str
    suffixes: tuple[str, ...]  # the file names it takes ('/': a directory)
    replaces: Replaces
    among_results: bool = False  # what it writes may lie under results/ (results files; Perfetto timelines beside)


WRITERS = (
    Writer("sweep", "--out", "a new results file, in a directory or named", (".parquet", "/"), Replaces.NEVER, True),
    Writer("claims", "--out", "with --measure: a new results file, as sweep --out", (".parquet", "/"),
           Replaces.NEVER, True),
    Writer("syncs", "--save", "the table's rows as a results file", (".parquet",), Replaces.NEVER, True),
    Writer("trace", "--save", "the trace's rows as a results file", (".parquet",), Replaces.NEVER, True),
    Writer("plot", "--out", "figures (PNG and SVG) into a directory", ("/",), Replaces.OWN),
    Writer("report", "--out", "one HTML file", (".html", ".htm"), Replaces.OWN),
    Writer("trace", "--plot", "the timeline as a figure", (".png", ".svg"), Replaces.OWN),
    Writer("trace", "--perfetto", "the timeline for Perfetto", (".json",), Replaces.OWN, True),
    Writer("syncs", "--save-baseline", "the waiting places as a baseline", (".json",), Replaces.OWN),
)
"""Every option that writes a file: the policy docs/usage.md's table states (a test holds them together)."""


def writer(command: str, option: str) -> Writer:
    return next(item for item in WRITERS if (item.command, item.option) == (command, option))


def claim(path: Path, mine: Writer, force: bool = False, reads: Sequence[Path] = ()) -> Path:
    """``path`` checked before anything runs, for ``mine`` to write: a name it takes, no symlink and nothing but a
    regular file, an existing parent (bench's own directories aside), a figure or report never among results (those
    ``reads`` too), and a file there already replaced only where ``mine`` may (:class:`Replaces`). UsageError says
    what is wrong."""
    path, option = Path(path), mine.option
    if "/" not in mine.suffixes or path.suffix.lower() in mine.suffixes:
        if path.suffix.lower() not in mine.suffixes:
            raise UsageError(f"{option}: {path} is not a {' or '.join(mine.suffixes)} file")
        _parent_exists(path.parent, option)
        _beside_results(path.parent, mine, reads)
        replaceable(path, mine, force)
        writable_directory(path.parent, option)
        return path
    if path.exists() and not path.is_dir():
        files = [suffix for suffix in mine.suffixes if suffix != "/"]
        raise UsageError(f"{option}: {path} is {kind_of(path)}, not a directory"
                         + (f" nor a new {' or '.join(files)} file" if files else ""))
    _parent_exists(path.parent, option, path)
    _beside_results(path, mine, reads)
    writable_directory(path, option)
    return path


def _parent_exists(parent: Path, option: str, named: Path | None = None) -> None:
    """A missing directory is a mistake, except under bench's own (``named``: a directory the option names, which
    bench makes where its parent exists)."""
    existing = parent
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise UsageError(f"{option}: {existing} is {kind_of(existing)}, not a directory")
    if existing == parent or owned(parent) or (named is not None and owned(named)):
        return
    missing = parent
    while missing.parent != existing:
        missing = missing.parent
    owns = ", ".join(f"{own}/" for own in OWN_DIRECTORIES)
    raise UsageError(f"{option}: {missing}/ does not exist; bench makes no directory "
                     + (f"but {named}/ and its own ({owns})" if named is not None else f"but its own ({owns})"))


def owned(path: Path) -> bool:
    """Whether ``path`` is one of bench's own directories (:data:`OWN_DIRECTORIES`) or lies under one."""
    resolved = Path(path).resolve()
    return any(resolved == own.resolve() or own.resolve() in resolved.parents for own in OWN_DIRECTORIES)


def _beside_results(directory: Path, mine: Writer, reads: Sequence[Path]) -> None:
    """Figures and reports never go among results: under results/, or under a directory of results the command
    ``reads``."""
    if mine.among_results:
        return
    resolved = Path(directory).resolve()
    for home in [RESULTS_HOME, *(path for path in reads if Path(path).is_dir())]:
        home = Path(home).resolve()
        if resolved == home or home in resolved.parents:
            raise UsageError(f"{mine.option}: {directory}/ is a directory of results; bench writes "
                             f"{mine.writes} elsewhere (default plots/local/)")


def replaceable(path: Path, mine: Writer, force: bool) -> Path:
    """``path`` as :func:`write_target` checks it, and, where a file is there, one that ``mine`` may replace:
    bench's own (:func:`made_by_bench`, or in :data:`OWN_DIRECTORIES`) or, with ``force``, any; UsageError if not."""
    write_target(path, mine.option)
    if not path.exists():
        return path
    if mine.replaces is Replaces.NEVER:
        resume = f", or finish an interrupted sweep with --resume {path}" if mine.command == "sweep" else ""
        raise UsageError(f"{mine.option}: {path} already exists; bench never replaces a results file (choose "
                         f"another name{resume})")
    if not (force or owned(path.parent) or made_by_bench(path)):
        raise UsageError(f"{mine.option}: {path} exists and bench did not write it; bench replaces only its own "
                         "files (--force replaces it)")
    return path


def made_by_bench(path: Path) -> bool:
    """Whether the regular file ``path`` carries :data:`MAKER` where bench puts it: a report's generator, a PNG's
    Software, an SVG's creator, a Perfetto file's generator (its first key). Reads at most its first 64 KiB."""
    try:
        with open(path, "rb") as file:
            head = file.read(65536)
    except OSError:
        return False
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return _png_text(head).get(b"Software") == MAKER.encode()
    return any(mark.match(head) for mark in _MARKS)


_MARKS = tuple(re.compile(pattern.replace("MAKER", re.escape(MAKER)).encode(), re.DOTALL) for pattern in (
    r"<!doctype html><html[^>]*><head><meta charset='utf-8'><meta name='generator' content='MAKER'>",
    r"<\?xml [^>]*>.{0,400}?<svg .{0,2000}?<dc:creator>\s*<cc:Agent>\s*<dc:title>MAKER</dc:title>",
    r'\{"otherData": \{"generator": "MAKER"',
    r'\{\s*"format": "bench syncs baseline \d+"'))


def _png_text(head: bytes) -> dict[bytes, bytes]:
    """The tEXt chunks among the first chunks of a PNG's ``head`` (keyword -> text)."""
    texts, offset = {}, 8
    while offset + 8 <= len(head):
        length, kind = struct.unpack(">I4s", head[offset:offset + 8])
        if kind == b"tEXt":
            keyword, _, text = head[offset + 8:offset + 8 + length].partition(b"\0")
            texts[keyword] = text
        if kind == b"IDAT":
            break
        offset += 12 + length
    return texts


def write_bytes(path: Path, content: bytes) -> None:
    """Write ``content`` to ``path`` atomically (temporary file, then rename), readable by everyone."""
    write_file(path, lambda sink: sink.write(content), 0o644)


def write_target(path: Path, option: str = "") -> Path:
    """``path``, checked before bench writes it: WriteError, naming ``option``, if it is a symlink (bench never writes
    through one, dangling or not) or something other than a regular file (bench never replaces a device, a pipe or a
    directory)."""
    path = Path(path)
    prefix = f"{option}: " if option else ""
    if path.is_symlink():
        raise WriteError(f"{prefix}{path} is a symlink (to {os.readlink(path)}); bench never writes through a "
                         "symlink: name the file itself")
    if path.exists() and not path.is_file():
        raise WriteError(f"{prefix}{path} is {kind_of(path)}, not a regular file; bench writes only regular files")
    return path


def writable_directory(directory: Path, option: str) -> Path:
    """``directory`` (or its nearest existing parent) must take a new file; UsageError naming ``option`` if not."""
    existing = Path(directory)
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{option}: {existing} is {kind_of(existing)}, not a directory")
    try:
        with tempfile.TemporaryFile(dir=existing):  # a real probe: permission bits do not tell root's story
            pass
    except OSError as error:
        raise UsageError(f"{option}: cannot write to {directory}/ ({existing}: {error.strerror})") from None
    return Path(directory)


def kind_of(path: Path) -> str:
    """What is at ``path``, in words: 'a file', 'a directory', 'a character device', ..."""
    mode = Path(path).stat().st_mode
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISFIFO, "a pipe"), (stat.S_ISSOCK, "a socket"))
    return next((word for test, word in kinds if test(mode)), "a file")


def write_file(path: Path, fill: Callable[[BinaryIO], object], mode: int, new: bool = False) -> Path:
    """``fill`` a temporary file beside ``path`` (checked by :func:`write_target`), sync it, then give it that name
    in one step (``new``: only a free name, see :func:`bench.results.store.write_table`): a reader sees the old file or
    the new one, and a write that fails (a full disk) leaves nothing behind. WriteError says what failed."""
    target = write_target(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as error:
        raise WriteError(_cannot_write(path, error)) from None
    try:
        with os.fdopen(descriptor, "wb") as sink:
            fill(sink)
            sink.flush()
            os.fsync(sink.fileno())
        os.chmod(temporary, mode)
        if new:
            return _publish_new(temporary, target)
        os.replace(temporary, target)
        return target
    except OSError as error:
        raise WriteError(_cannot_write(path, error)) from None
    finally:
        Path(temporary).unlink(missing_ok=True)  # renamed away already, or a second name of the published file


def _cannot_write(path: Path, error: OSError) -> str:
    text = str(error).strip()
    return f"cannot write {path}: {error.strerror or (text.splitlines()[0] if text else type(error).__name__)}"


def _publish_new(temporary: str, path: Path) -> Path:
    """Give the finished ``temporary`` a name that nothing has: ``path``, else ``<stem>_2``, ``<stem>_3``, ...
    Returns that name."""
    number, candidate = 1, path
    while True:
        try:
            _link(temporary, candidate)
            return candidate
        except FileExistsError:
            number += 1
            candidate = path.with_name(f"{path.stem}_{number}{path.suffix}")


def _link(temporary: str, path: Path) -> None:
    """``path`` as a name of ``temporary``, FileExistsError if it is taken: a hard link or, on a file system without
    them, an exclusively created empty file that ``temporary`` then replaces."""
    try:
        os.link(temporary, path)
    except FileExistsError:
        raise
    except OSError as error:
        if error.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP):
            raise
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.replace(temporary, path)


def umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
