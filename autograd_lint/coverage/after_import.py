"""Running code right after a module's import ends, without importing it early.

The coverage plugin patches torch once ``import torch`` has finished, and marks
its own code for Dynamo once ``torch._dynamo`` is imported; a test run that never
imports torch never pays for it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import Callable, Sequence


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs callbacks once a module has finished executing, without importing it early."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.callbacks: list[Callable[[], None]] = []

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module
        callbacks = self.callbacks

        def exec_then_call_back(module: ModuleType) -> None:
            exec_module(module)
            for callback in callbacks:
                callback()

        # The loader object belongs to this spec alone, so the instance
        # attribute changes this one import and nothing else.
        loader.exec_module = exec_then_call_back  # type: ignore[method-assign]
        return spec


def call_after_import(name: str, callback: Callable[[], None]) -> None:
    """Call ``callback`` now if module ``name`` is imported, else once its import ends."""
    if name in sys.modules:
        callback()
        return
    for finder in sys.meta_path:
        if isinstance(finder, _AfterImport) and finder.name == name:
            finder.callbacks.append(callback)
            return
    finder = _AfterImport(name)
    finder.callbacks.append(callback)
    sys.meta_path.insert(0, finder)
