"""``autograd-lint gen-tests``: gradcheck harnesses generated for every Function.

The command (:mod:`.command`) reads Functions statically and never imports torch
or the analysed code; only the tests it writes do.  Inputs for those tests come
from a recording made by the pytest plugin (:mod:`.record_plugin`), from the
source (annotations, defaults and literal ``apply`` call sites), or from a
run-time search over small candidate shapes.
"""
