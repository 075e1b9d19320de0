"""``autograd-lint rule CODE`` prints a rule's documentation; ``--all`` lists every rule."""

from __future__ import annotations

import argparse
import sys

from autograd_lint.lint.docs import rule_page
from autograd_lint.rules import all_rules, rule_by_code


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("code", nargs="?", help="a rule code, e.g. AGL001")
    parser.add_argument("--all", action="store_true", help="list every rule")


def run(args: argparse.Namespace) -> int:
    if args.all:
        for rule in all_rules():
            state = "" if rule.enabled_by_default else "  (off by default)"
            print(f"{rule.code}  {rule.severity.value:<7}  {rule.title}{state}")
        return 0
    if not args.code:
        print("autograd-lint rule: give a rule code (e.g. AGL001) or --all", file=sys.stderr)
        return 2
    rule = rule_by_code(args.code)
    if rule is None:
        print(f"autograd-lint rule: unknown rule code {args.code!r}", file=sys.stderr)
        return 2
    sys.stdout.write(rule_page(rule))
    return 0
