"""What bench keeps from one command to the next on this machine: bytes under a key that names everything they depend
on, so that a key can never answer for other inputs, other code or another GPU.

Entries live in ``$BENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/cuda-sync-bench``, else ``~/.cache/cuda-sync-bench``:
never in the working tree (the commands leave git clean). ``BENCH_CACHE_DIR=off`` turns the cache off. Deleting the
directory is always safe: a missing entry is made again. A key is the SHA-256 of its parts, and every key includes
:func:`code_key` (bench's own source and the version of each library named), so a changed line of bench or an
upgraded library misses. Entries are written atomically, each with the SHA-256 of its bytes (a damaged one reads as
missing); the oldest go once they hold more than :data:`LIMIT_BYTES`.
The standard library only.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

LIMIT_BYTES = 512 << 20
DRAWING = ("pandas", "pyarrow", "numpy", "matplotlib", "pillow")  # what a report's or a figure's bytes depend on
OFF = "off"
_FORMAT = b"bench cache 1"


def directory() -> Path | None:
    """Where entries live; None where the cache is off."""
    given = os.environ.get("BENCH_CACHE_DIR")
    if given == OFF:
        return None
    if given:
        return Path(given)
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(home) / "cuda-sync-bench"


@functools.cache
def _source_digest() -> str:
    """The SHA-256 of every Python file of the bench package (names and bytes)."""
    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


@functools.cache
def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def code_key(distributions: Iterable[str] = ()) -> list[str]:
    """What every entry depends on: bench's source and the versions of ``distributions`` (pip names)."""
    return [_source_digest(), *(f"{name} {_version(name)}" for name in distributions)]


def key(kind: str, parts: Iterable[str | bytes], distributions: Iterable[str] = ()) -> str:
    """The key of an entry of ``kind`` (a word: "report", "figure") that depends on ``parts`` and on
    :func:`code_key`."""
    digest = hashlib.sha256(_FORMAT)
    for part in (kind, *code_key(distributions), *parts):
        data = part if isinstance(part, bytes) else str(part).encode("utf-8", "surrogateescape")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return f"{kind}-{digest.hexdigest()}"


def file_digest(path: Path) -> str:
    """The SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def kept_json(entry: str, make: Callable[[], object]) -> object:
    """The JSON value kept under ``entry``; where there is none (or it is damaged), ``make()``'s, kept."""
    found = get(entry)
    if found is not None:
        try:
            return json.loads(found)
        except ValueError:
            pass
    made = make()
    put(entry, json.dumps(made).encode())
    return made


def packed(fields: Iterable[bytes]) -> bytes:
    """Byte strings as one (each with its length): what :func:`unpacked` reads back."""
    return b"".join(len(field).to_bytes(8, "little") + field for field in fields)


def unpacked(data: bytes) -> list[bytes] | None:
    """The byte strings :func:`packed` made; None where ``data`` is not such a thing (a damaged entry)."""
    fields, at = [], 0
    while at < len(data):
        size = int.from_bytes(data[at:at + 8], "little")
        if at + 8 + size > len(data) or at + 8 > len(data):
            return None
        fields.append(data[at + 8:at + 8 + size])
        at += 8 + size
    return fields


def get(entry: str) -> bytes | None:
    """The bytes kept under ``entry`` (a :func:`key`), or None."""
    where = directory()
    if where is None:
        return None
    try:
        found = (where / entry).read_bytes()
    except OSError:
        return None
    digest, data = found[:32], found[32:]
    if len(found) < 32 or hashlib.sha256(data).digest() != digest:
        return None
    try:
        os.utime(where / entry)  # used: the last to go
    except OSError:
        pass
    return data


def put(entry: str, data: bytes) -> None:
    """Keep ``data`` under ``entry``; a cache that cannot be written is passed over (it only saves time)."""
    where = directory()
    if where is None:
        return
    try:
        where.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=where, prefix=".part-")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(hashlib.sha256(data).digest())
                file.write(data)
            os.replace(temporary, where / entry)
        except BaseException:
            os.unlink(temporary)
            raise
        _prune(where)
    except OSError:
        pass


def _prune(where: Path) -> None:
    """The oldest entries removed until the rest hold at most :data:`LIMIT_BYTES`."""
    entries = []
    for path in where.iterdir():
        try:
            status = path.stat()
        except OSError:
            continue
        if path.is_file() and not path.name.startswith("."):
            entries.append((status.st_mtime_ns, status.st_size, path))
    held = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if held <= LIMIT_BYTES:
            break
        try:
            path.unlink()
            held -= size
        except OSError:
            pass
