"""``docs/cli.md`` documents every option of ``check``, every configuration key and every output format."""

from __future__ import annotations

import argparse
from pathlib import Path

from autograd_lint.lint.commands import check
from autograd_lint.config import KEYS
from autograd_lint.lint.output import FORMATS

CLI_DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_cli_doc_covers_options_keys_and_formats() -> None:
    text = CLI_DOC.read_text(encoding="utf-8")
    parser = argparse.ArgumentParser()
    check.add_arguments(parser)
    options = [o for action in parser._actions for o in action.option_strings if o.startswith("--") and o != "--help"]
    missing = [o for o in options if f"`{o}" not in text]
    missing += [key for key in KEYS if f"`{key}`" not in text]
    missing += [name for name in FORMATS if f"`{name}`" not in text]
    assert not missing, f"docs/cli.md does not mention {missing}"
