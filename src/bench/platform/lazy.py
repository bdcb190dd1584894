"""Importing on first use, the one way bench does it: a module (:func:`module`), one name of a module
(:class:`Name`), or a package's names served from its modules (:func:`names`), each loaded the first time it is read.
Every module is named by its whole dotted name, written out where it is declared, so that a reader, grep and
``tests/test_layout.py`` can follow it; no other module of bench loads a module by a string (the registries of
experiments and views aside). Imports nothing of bench."""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass


class LazyModule(types.ModuleType):
    """A module imported the first time one of its attributes is read; the module's own attributes from then on."""

    def __init__(self, target: str) -> None:
        super().__init__(target)
        self._target = target

    def __getattr__(self, attribute: str):
        loaded = importlib.import_module(self.__dict__["_target"])
        for name, value in vars(loaded).items():  # later lookups find them here: a stand-in costs nothing once loaded
            if not name.startswith("__"):
                self.__dict__.setdefault(name, value)
        return getattr(loaded, attribute)

    def __repr__(self) -> str:
        return f"<lazy module {self.__dict__['_target']!r}>"


def now(name: str) -> types.ModuleType:
    """The module ``name`` imported now, for a name a record holds (a GPU library's, a catalog's)."""
    return importlib.import_module(name)


def module(name: str) -> LazyModule:
    """The module ``name`` (a whole dotted name), imported when one of its attributes is first read."""
    return LazyModule(name)


@dataclass(frozen=True)
class Name:
    """A function or class of a module, ``module:name``, imported when it is used."""

    module: str
    name: str

    def load(self):
        return getattr(importlib.import_module(self.module), self.name)

    def __call__(self, *args, **kwargs):
        return self.load()(*args, **kwargs)


def bind(space: dict, where: Mapping[str, Sequence[str]], loaded: types.ModuleType) -> None:
    """The names ``where`` says ``loaded`` gives, bound in ``space`` (a package's globals)."""
    for name in where[loaded.__name__]:
        space[name] = getattr(loaded, name)


def names(space: dict, where: Mapping[str, Sequence[str]]) -> tuple[Callable, Callable]:
    """A package's ``__getattr__`` and ``__dir__`` for the names of its modules (``where``: each module's whole dotted
    name -> the names it gives), each module imported when one of its names is first read, and all its names then
    bound in ``space`` (the package's globals)."""
    module_of = {name: source for source, given in where.items() for name in given}

    def __getattr__(name: str):
        source = module_of.get(name)
        if source is None:
            raise AttributeError(f"module {space['__name__']!r} has no attribute {name!r}")
        bind(space, where, importlib.import_module(source))
        return space[name]

    def __dir__() -> list[str]:
        return sorted({*space, *module_of})

    return __getattr__, __dir__
