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

import os
from typing import Any

# Code torch writes and runs itself: inductor's generated wrappers, under
# $TORCHINDUCTOR_CACHE_DIR or <tmp>/torchinductor_<user>.
GENERATED_CODE = "*/torchinductor_*/*"


def omitted_patterns() -> list[str]:
    """coverage ``omit`` patterns for code that is not the user's: torch's generated code, autograd-lint."""
    patterns = [GENERATED_CODE]
    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if cache:
        patterns.append(os.path.join(os.path.abspath(cache), "*"))
    # The whole package, not only this plugin: the plugin's report and the recorder import the
    # analyser (model/*, files.py, gentests/*), which an editable install leaves outside site-packages.
    patterns.append(os.path.join(PACKAGE_DIRECTORY, "*"))
    return patterns


# autograd-lint's own package directory: its modules are not the user's code.
PACKAGE_DIRECTORY = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


class _Omitter:
    """coverage.py configurer: adds :func:`omitted_patterns` to ``[run] omit``.

    Only when the configuration names no ``source`` or ``include``: those
    already say exactly what to measure (autograd-lint's own suite measures
    this package on purpose).
    """

    def configure(self, config: Any) -> None:
        if config.get_option("run:source") or config.get_option("run:include"):
            return
        omit = list(config.get_option("run:omit") or [])
        config.set_option("run:omit", omit + [p for p in omitted_patterns() if p not in omit])


def coverage_init(reg: Any, options: dict[str, str]) -> None:
    """The coverage.py plugin entry point (``[run] plugins = autograd_lint.coverage``).

    coverage.py imports plugins before it starts measuring, so the thread
    bridge is in place before any test or script code runs.  It also omits
    torch's generated code and this plugin's own modules from measurement
    (:class:`_Omitter`).  It registers no file tracer or context switcher.
    """
    from autograd_lint.coverage import bridge

    reg.add_configurer(_Omitter())
    bridge.install_when_torch_imported()
