"""Rule selection: ruff's reading of ``select`` / ``extend-select`` / ``ignore`` and ``ALL``."""

from __future__ import annotations

from autograd_lint.lint.engine import is_selected
from autograd_lint.rules import all_rules
from autograd_lint.settings import Settings

RULES = {rule.code: rule for rule in all_rules()}
OFF_BY_DEFAULT = {code for code, rule in RULES.items() if not rule.enabled_by_default}


def selected(**options: tuple[str, ...]) -> set[str]:
    settings = Settings(**options)  # type: ignore[arg-type]
    return {code for code, rule in RULES.items() if is_selected(rule, settings)}


def test_all_selects_every_rule_off_by_default_ones_included() -> None:
    assert OFF_BY_DEFAULT  # AGL028, AGL030, AGL032, AGL100, the compile family...
    assert selected(select=("ALL",)) == set(RULES)
    assert selected(select=("all",)) == set(RULES)
    assert selected(extend_select=("ALL",)) == set(RULES)


def test_the_default_selection_is_unchanged() -> None:
    assert selected() == set(RULES) - OFF_BY_DEFAULT
    assert selected(select=("AGL",)) == set(RULES) - OFF_BY_DEFAULT
    # A family prefix still means the default rules of that family.
    assert "AGL030" not in selected(select=("AGL0",))
    assert "AGL030" in selected(select=("AGL0",), extend_select=("AGL030",))


def test_all_is_the_least_specific_selector() -> None:
    every_but_ops_and_compile = {code for code in RULES if not code.startswith("AGL1")}
    assert selected(select=("ALL",), ignore=("AGL1",)) == every_but_ops_and_compile
    # ignore ALL loses to a more specific select (ruff: specificity, not order).
    assert selected(select=("AGL",), ignore=("ALL",)) == set(RULES) - OFF_BY_DEFAULT
    assert selected(select=("ALL",), ignore=("ALL",)) == set()
    assert selected(select=("ALL",), per_file_ignores=(("*.py", ("AGL0",)),)) == set(RULES)  # no path given
    with_path = {
        code for code, rule in RULES.items()
        if is_selected(rule, Settings(select=("ALL",), per_file_ignores=(("*.py", ("AGL0",)),)), "ops.py")
    }
    assert with_path == {code for code in RULES if not code.startswith("AGL0")}
