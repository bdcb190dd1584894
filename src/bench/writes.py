"""Writing files safely, for every writer of bench (:mod:`bench.store`'s results files, figures, reports, exports):
a reader sees the old file or the new one, never half of one (a full disk is a :class:`bench.errors.WriteError`); a
write never goes through a symlink (:func:`write_target`), never replaces a device, a pipe or a directory, and a new
run's file never replaces another file. The standard library only."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from bench.errors import UsageError, WriteError

MAKER = "cuda-sync-bench"
"""The mark bench leaves in every report, figure and timeline it writes (an HTML generator, a PNG's Software, an
SVG's creator, a Perfetto file's generator): a file that carries it is bench's to replace."""


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
    in one step (``new``: only a free name, see :func:`write_table`): a reader sees the old file or the new
    one, and a write that fails (a full disk) leaves nothing behind. WriteError says what failed."""
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
