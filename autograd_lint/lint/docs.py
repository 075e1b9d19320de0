"""The rule documentation, built from the rules themselves: one page per rule and an index.

``autograd-lint rule CODE`` prints :func:`rule_page`, SARIF output embeds it as
each rule's help, and ``python -m autograd_lint.lint.docs docs/rules`` writes every
page and the index (``README.md``) into ``docs/rules/``, so that the committed
pages can never say something the rules do not.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Sequence

from autograd_lint.rules import all_rules
from autograd_lint.rules.base import FixSafety, Rule

REGENERATE = "python -m autograd_lint.lint.docs docs/rules"
INDEX = "README.md"
# Written at the top of every generated file (not printed by ``autograd-lint rule``).
HEADER = f"<!-- Generated from the rule classes by `{REGENERATE}`; do not edit. -->\n\n"
# Pages this generator owns: a stale one (a rule renamed or removed) is deleted.
_PAGE_NAME = re.compile(r"^AGL[0-9]{3}\.md$")

FIX_SAFETY = {
    FixSafety.NONE: "There is no automatic fix: the right change depends on what the code is meant to compute.",
    FixSafety.SAFE: "The fix is safe: `autograd-lint check --fix` applies it, and it does not change what the code "
    "computes.",
    FixSafety.UNSAFE: "The fix is unsafe: it can change behaviour, so it is applied only with `--fix --unsafe-fixes`. "
    "Review the change.",
}


def default_state(rule: type[Rule]) -> str:
    return "on" if rule.enabled_by_default else "off"


def rule_page(rule: type[Rule]) -> str:
    """The rule's documentation as Markdown."""
    off = (
        ""
        if rule.enabled_by_default
        else f"\n\nOff by default: enable it with `--extend-select {rule.code}`, or with "
        f'`extend-select = ["{rule.code}"]` in `[tool.autograd-lint]`'
        + (", or for a project that compiles with `uses-compile = true` there." if rule.on_when_compiling else ".")
    )
    return (
        f"# {rule.code}: {rule.title}\n\n"
        f"Severity: {rule.severity.value}. Fix: {rule.fix.value}. Default: {default_state(rule)}.{off}\n\n"
        f"## What it does\n\n{rule.what_it_does()}\n\n"
        f"## Why is this bad?\n\n{rule.why}\n\n"
        f"## Example\n\n```python\n{rule.INVALID[0].source}```\n\n"
        f"## Use instead\n\n```python\n{rule.VALID[0].source}```\n\n"
        f"## Fix safety\n\n{FIX_SAFETY[rule.fix]}\n"
    )


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def index_page(rules: Sequence[type[Rule]]) -> str:
    """The table of every rule, linking to its page."""
    rows = "".join(
        f"| [{r.code}]({r.code}.md) | {_cell(r.title)} | {r.severity.value} | {r.fix.value} | {default_state(r)} |\n"
        for r in rules
    )
    return (
        "# Rules\n\n"
        "Every rule autograd-lint has. Fix: whether `--fix` can repair a finding (`safe`, `unsafe` or `none`); "
        "Default: whether the rule runs without being selected by its own code.\n\n"
        + SEVERITY_POLICY
        + "| Code | Title | Severity | Fix | Default |\n| --- | --- | --- | --- | --- |\n" + rows
    )


# How a rule's severity is chosen; each rule page states the consequence, checked on torch 2.13.
SEVERITY_POLICY = (
    "## Severity policy\n\n"
    "A severity says what follows at runtime (checked on torch 2.13), not how sure the rule is: "
    "every rule reports only what it can tell for certain, and stays silent otherwise.\n\n"
    "- **error**: raises on a reachable path (when forward, backward, jvp or vmap runs, or when the "
    "class is defined).\n"
    "- **warning**: nothing raises, but a result is silently wrong or missing (a gradient, an "
    "untracked output), memory leaks, or a hazard waits for later use (an in-place change of an "
    "output, a checkpointed backward).\n"
    "- **info**: style, deprecation, compatibility (`torch.compile`, a future PyTorch) and performance.\n\n"
    "A rule whose parts differ says so per finding (AGL002: an instance call is an error, a "
    "`@classmethod` is info; AGL013: an index out of range is an error, a gradient gated on the wrong "
    "flag a warning; AGL023: deprecated `torch.cuda.amp` decorators are info; AGL001: a wrong count "
    "is info where forward marks every output non-differentiable, so backward never runs; AGL153: a "
    "classmethod `setup_context` is an error, since torch.compile raises on it).\n\n"
)


def render_all() -> dict[str, str]:
    """Every generated file of ``docs/rules/``: file name -> text."""
    rules = all_rules()
    files = {f"{rule.code}.md": HEADER + rule_page(rule) for rule in rules}
    files[INDEX] = HEADER + index_page(rules)
    return files


def write_docs(directory: Path) -> list[Path]:
    """Write the generated files into ``directory``; return those that changed or were removed."""
    directory.mkdir(parents=True, exist_ok=True)
    files = render_all()
    changed = []
    for stale in sorted(directory.iterdir()):
        if _PAGE_NAME.match(stale.name) and stale.name not in files:
            stale.unlink()
            changed.append(stale)
    for name, text in files.items():
        path = directory / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(path)
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m autograd_lint.lint.docs", description="Write the rule pages and their index."
    )
    parser.add_argument("directory", type=Path, help="where to write them (docs/rules)")
    args = parser.parse_args(argv)
    changed = write_docs(args.directory)
    for path in changed:
        print(path)
    print(f"{len(changed)} file{'s' if len(changed) != 1 else ''} changed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
