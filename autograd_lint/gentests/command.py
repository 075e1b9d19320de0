"""The ``autograd-lint gen-tests`` sub-command."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", default=["."], metavar="PATH")
    parser.add_argument("--out", default="tests/autograd_generated", metavar="DIR")


def run(args: argparse.Namespace) -> int:
    return 0
