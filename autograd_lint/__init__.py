"""autograd-lint: make custom ``torch.autograd.Function`` code trustworthy.

The static analyser never imports torch or the code it reads; see
:mod:`autograd_lint.model.spec` for the model and :mod:`autograd_lint.rules` for the checks.
"""

__version__ = "0.1.0"
