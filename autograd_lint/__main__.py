"""``python -m autograd_lint`` runs the command line."""

from autograd_lint.cli import console

console()
