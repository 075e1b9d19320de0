"""The rule pages in ``docs/rules/`` are what the rules say, and ``autograd-lint rule`` prints them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from autograd_lint.lint.docs import HEADER, INDEX, REGENERATE, render_all, rule_page
from autograd_lint.rules import all_rules

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "rules"


def run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_committed_rule_docs_are_up_to_date() -> None:
    expected = render_all()
    committed = {path.name: path.read_text(encoding="utf-8") for path in DOCS.glob("*.md")}
    stale = sorted(name for name in expected.keys() | committed.keys() if expected.get(name) != committed.get(name))
    assert not stale, f"docs/rules is stale ({', '.join(stale)}): run `{REGENERATE}`"


def test_every_page_has_its_sections_and_examples() -> None:
    for rule in all_rules():
        page = rule_page(rule)
        assert page.startswith(f"# {rule.code}: {rule.title}\n")
        for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Fix safety"):
            assert section in page, (rule.code, section)
        assert rule.INVALID[0].source in page and rule.VALID[0].source in page
        assert rule.why in page
    index = render_all()[INDEX]
    assert all(f"| [{rule.code}]({rule.code}.md) |" in index for rule in all_rules())


def test_rule_command_prints_the_page_and_lists_every_rule() -> None:
    page = run("-m", "autograd_lint", "rule", "agl001")
    assert page.returncode == 0
    assert page.stdout == rule_page(next(r for r in all_rules() if r.code == "AGL001"))
    listing = run("-m", "autograd_lint", "rule", "--all")
    assert listing.returncode == 0
    assert [line.split()[0] for line in listing.stdout.splitlines()] == [rule.code for rule in all_rules()]
    unknown = run("-m", "autograd_lint", "rule", "AGL999")
    assert unknown.returncode == 2 and "unknown rule code 'AGL999'" in unknown.stderr


def test_generator_writes_every_file_and_removes_stale_pages(tmp_path: Path) -> None:
    out = tmp_path / "rules"
    out.mkdir()
    (out / "AGL999.md").write_text("a rule that is gone\n")
    (out / "notes.md").write_text("not generated\n")
    first = run("-m", "autograd_lint.lint.docs", str(out))
    assert first.returncode == 0, first.stderr
    assert {p.name: p.read_text(encoding="utf-8") for p in out.glob("*.md") if p.name != "notes.md"} == render_all()
    assert (out / "notes.md").exists()
    assert all(text.startswith(HEADER) for text in render_all().values())
    again = run("-m", "autograd_lint.lint.docs", str(out))
    assert again.stdout == "" and "0 files changed" in again.stderr
