"""The lint face's sub-commands of the ``autograd-lint`` command line (see :mod:`autograd_lint.cli`)."""
