"""Waits a region allows: ``with bench.allow_waits("log every 10 steps"):`` inside a region that ``syncs``,
``assert_async`` or a syncs baseline checks. A wait made inside it is reported as allowed, with the reason, and
never fails a gate. Under ``probe``, the GPU is not held while the probed call's thread stands in a scope
(:func:`listening`): only its waits outside scopes decide the verdict.

A scope belongs to the thread that entered it and, where it was entered in an asyncio task, to that task alone: a
wait of another thread, or of another task running on the same thread while the first is suspended, is not allowed
by it. Scopes nest; the innermost reason is the one reported. The watcher asks :func:`allowed` from its own
thread while the waiting thread stands still in its wait.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, eq=False)
class _Scope:
    reason: str
    loop: asyncio.AbstractEventLoop | None  # the loop of the task that entered it (None: outside a task)
    task: asyncio.Task | None


_SCOPES: dict[int, list[_Scope]] = {}  # thread ident -> the scopes entered on it, innermost last
_LOCK = threading.RLock()  # re-entrant: a scope left by the collector while its thread holds it


class Listener(Protocol):
    """Told of each scope a thread enters (with its reason) and leaves, while it listens to that thread."""

    def entered(self, reason: str) -> None: ...

    def left(self) -> None: ...


_LISTENERS: dict[int, tuple[Listener, object]] = {}  # thread ident -> who is told of its scopes, and a token of
# that listening (one listener may listen again: a scope entered in one listening is left only to it)


@contextmanager
def allow_waits(reason: str) -> Iterator[None]:
    """Allow the waits of this block, in this thread (and this asyncio task), for ``reason`` (words a reader of
    the report understands: "log every 10 steps")."""
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError("allow_waits needs a reason: the words that say why these waits are fine")
    loop, task = _running()
    scope = _Scope(" ".join(reason.split()), loop, task)
    thread = threading.get_ident()
    with _LOCK:
        _SCOPES.setdefault(thread, []).append(scope)
        listening_then = _LISTENERS.get(thread)
    listener = listening_then[0] if listening_then is not None else None
    try:
        if listener is not None:  # outside the lock: a listener may wait for the GPU
            listener.entered(scope.reason)
        yield
    finally:
        with _LOCK:
            scopes = _SCOPES[thread]
            scopes.remove(scope)  # by identity: tasks on one thread may leave their scopes in any order
            if not scopes:
                del _SCOPES[thread]
        if listener is not None:
            with _LOCK:  # told only in the same listening: a scope left after it ended (or in a later one) tells nobody
                listening_still = _LISTENERS.get(thread) is listening_then
            if listening_still:
                listener.left()


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Tell ``listener`` of the scopes this thread enters and leaves while the block runs."""
    thread = threading.get_ident()
    with _LOCK:
        if thread in _LISTENERS:
            raise RuntimeError("scopes of this thread are already listened to")
        _LISTENERS[thread] = (listener, object())
    try:
        yield
    finally:
        with _LOCK:
            del _LISTENERS[thread]


def _running() -> tuple[asyncio.AbstractEventLoop | None, asyncio.Task | None]:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None, None
    return loop, asyncio.current_task(loop)


def allowed(thread: int) -> str:
    """The reason of the innermost scope that allows a wait of thread ``thread`` now, '' for none: a scope it
    entered outside any task, or one the task running on it now entered."""
    with _LOCK:
        scopes = list(_SCOPES.get(thread, ()))
    for scope in reversed(scopes):
        if scope.task is None or asyncio.current_task(scope.loop) is scope.task:
            return scope.reason
    return ""
