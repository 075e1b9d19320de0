"""The lint face: what ``autograd-lint check``, the flake8 plugin, the pre-commit
hook and the language server share.

Stages, in the one direction data flows: :mod:`.engine` runs the selected rules
over the model of a file; :mod:`.fix` and :mod:`.add_noqa` edit files from the
findings; :mod:`.baseline` and :mod:`.output` filter and print them; :mod:`.docs`
renders rule pages.  The front ends are :mod:`.commands` (the CLI's ``check``,
``rule`` and ``server``), :mod:`.flake8_plugin` and :mod:`.server` (LSP).
Nothing below this package (``model``, ``rules``) imports from it.
"""
