"""``autograd-lint server``: a language server over stdio (see :mod:`autograd_lint.lint.server`).

Needs pygls (``pip install 'autograd-lint[lsp]'``); without it, one line on
stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stdio", action="store_true", help="talk LSP over stdin and stdout (the default and only way)")


def run(args: argparse.Namespace) -> int:
    try:
        from autograd_lint.lint.server import serve
    except ImportError as error:
        print(f"error: autograd-lint server needs pygls ({error}); pip install 'autograd-lint[lsp]'", file=sys.stderr)
        return 2
    serve()
    return 0
