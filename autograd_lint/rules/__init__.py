"""The rule catalogue: every rule class, in code order.

Each rule lives in its own module ``aglNNN_<topic>.py``, and nothing lists it:
:func:`all_rules` finds every :class:`Rule` subclass defined in such a module.
Adding a rule, step by step: ``docs/contributing.md``.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from autograd_lint.rules.base import Rule


@lru_cache(maxsize=None)
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule class, found by module name (``aglNNN_*``), sorted by code."""
    found: list[type[Rule]] = []
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("agl"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Rule) and value is not Rule:
                if value.__module__ == module.__name__ and hasattr(value, "code"):
                    found.append(value)
    return tuple(sorted(found, key=lambda rule: rule.code))


def rule_by_code(code: str) -> type[Rule] | None:
    return next((rule for rule in all_rules() if rule.code == code.upper()), None)
