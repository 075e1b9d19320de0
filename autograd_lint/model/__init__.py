"""The analysis model: what a ``torch.autograd.Function`` *is*.

Built from source text alone, without importing torch or the code read.  The
rules (:mod:`autograd_lint.rules`) ask questions of this model; the front ends
(CLI, flake8, pre-commit, pytest, coverage) only run it.
"""
