"""Truthful coverage for autograd code: the coverage.py plugin and its parts.

coverage.py traces one thread at a time and only the frames that really run.
PyTorch runs backward code on threads it creates in C++ and, under
``torch.compile``, traces Python code instead of running it, so coverage
reports code that ran as never run.  This package closes both gaps:

* :mod:`.bridge` installs coverage's tracer on autograd engine threads;
* :mod:`.compile_recorder` adds the lines Dynamo traced once the compiled
  graph really ran;
* :mod:`.report` counts, per Function, what ran where;
* :mod:`.pytest_plugin` wires all three into a pytest run;
* :mod:`.pragma` is the ``autograd-lint pragma`` command.

Nothing here imports torch or coverage at import time: the pytest plugin is
loaded in every pytest run of every project that installs autograd-lint.
"""

from __future__ import annotations

from typing import Any


def coverage_init(reg: Any, options: dict[str, str]) -> None:
    """The coverage.py plugin entry point (``[run] plugins = autograd_lint.coverage``).

    coverage.py imports plugins before it starts measuring, so the thread
    bridge is in place before any test or script code runs.  It registers no
    file tracer, configurer or context switcher: it only installs the bridge.
    """
    from autograd_lint.coverage import bridge

    bridge.install_when_torch_imported()
