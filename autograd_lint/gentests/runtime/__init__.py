"""The run-time half of gen-tests: what the generated test modules run, the only part that imports torch.

One concept a module, lower ones first (a module imports only those above it in this list):
:mod:`.tensors` (questions about tensors), :mod:`.cases` (the input cases a test
names), :mod:`.environment` (the subject imported, devices, process groups),
:mod:`.arguments` (values and candidate shapes), :mod:`.budget` (the per-check time
limit), :mod:`.search` (arguments forward and backward accept, skip reasons),
:mod:`.calls` (a Function as a function of its differentiable inputs), :mod:`.report`
(failure text), then the checks: :mod:`.gradchecks`, :mod:`.contract`,
:mod:`.surrogate`, :mod:`.low_precision`, :mod:`.parity`.  Generated files import
the public names through the stable facade :mod:`autograd_lint.gentests.harness`.
"""
