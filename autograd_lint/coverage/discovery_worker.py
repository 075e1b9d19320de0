"""The report's static half, run beside the tests: ``python -m autograd_lint.coverage.discovery_worker ROOT...``.

The per-Function report joins run-time counts with the Functions the analyser
finds, so that a Function that never ran still shows.  Importing the analyser
(libcst) and running it costs a fixed ~0.2 s, which in the test process would
add to the suite's wall time and be traced by coverage.  The pytest plugin
runs it here instead, in a child process started when the session starts, so
it overlaps the tests; it falls back to :func:`discover` in-process if the
child fails.

Prints one JSON list: ``[path, qualname, line, has_backward, backward_owner, backward]`` per
Function (``backward``: the :class:`OpCode` fields of the backward method it uses, or null), and an object (:meth:`DiscoveredOp.to_json`) per custom op with
``register_autograd``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import astuple, dataclass
from typing import TYPE_CHECKING, Iterable, Sequence

if TYPE_CHECKING:
    from autograd_lint.model.custom_ops import CustomOpModule, OpFunction


@dataclass(frozen=True)
class OpCode:
    """A function whose lines the report reads (a Function's backward, a custom op's backward or
    setup_context): where its ``def`` is, and its last line."""

    path: str
    name: str
    line: int  # the ``def`` line
    last_line: int


@dataclass(frozen=True)
class Discovered:
    """What the report needs of one analyser :class:`~autograd_lint.model.spec.FunctionSpec`."""

    path: str
    qualname: str
    line: int | None
    has_backward: bool
    # (path, qualname) of the Function whose backward (or vjp) this one uses; None if it has none.
    backward_owner: tuple[str, str] | None
    # Where that backward (or vjp) method is: its lines tell whether it ran in a process the
    # counters do not see (a multiprocessing child), from coverage's data.
    backward: OpCode | None = None


@dataclass(frozen=True)
class DiscoveredOp:
    """One ``register_autograd`` on a custom op, as the model links it: the op and the functions handed over."""

    op: str  # "ns::name" (or the op's Python name)
    path: str  # where the op is defined
    line: int
    backward: OpCode
    setup_context: OpCode | None

    def to_json(self) -> dict[str, object]:
        return {
            "op": self.op,
            "path": self.path,
            "line": self.line,
            "backward": list(astuple(self.backward)),
            "setup_context": None if self.setup_context is None else list(astuple(self.setup_context)),
        }

    @staticmethod
    def from_json(data: dict[str, object]) -> DiscoveredOp:
        setup = data["setup_context"]
        return DiscoveredOp(
            str(data["op"]),
            str(data["path"]),
            int(data["line"]),  # type: ignore[call-overload]
            OpCode(*data["backward"]),  # type: ignore[misc]
            None if setup is None else OpCode(*setup),  # type: ignore[misc]
        )


def discover(roots: Sequence[str]) -> list[Discovered | DiscoveredOp]:
    """The analyser's Functions and custom-op backwards under ``roots``; empty until the analyser is installed."""
    try:
        from autograd_lint.config import ConfigError, project_settings
        from autograd_lint.model.discovery import run
        from autograd_lint.settings import Settings
    except ImportError:
        return []
    try:
        # The project's [tool.autograd-lint] (extra-function-bases...), as `check` reads it.
        settings = project_settings(roots)
    except ConfigError:  # `autograd-lint check` names the problem; the report goes on with the defaults
        settings = Settings()
    found: list[Discovered | DiscoveredOp] = []
    result = run(roots, settings, _no_job)
    for spec in result.functions:
        backward = spec.backward_method
        owner = code = None
        if backward is not None:
            owner = (os.path.abspath(backward.path), backward.defined_in)
            code = OpCode(
                owner[0], f"{backward.defined_in}.{backward.name}", backward.position.line, backward.last_line
            )
        found.append(
            Discovered(os.path.abspath(spec.path), spec.qualname, spec.position.line, backward is not None, owner, code)
        )
    found.extend(custom_op_backwards(r.custom_ops for r in result.results if r.custom_ops is not None))
    return found


def _no_job(analysis: object, settings: object) -> None:
    return None


def custom_op_backwards(modules: Iterable[CustomOpModule]) -> list[DiscoveredOp]:
    """Every ``register_autograd`` of the run whose backward is a ``def`` the model links to its op."""
    found = []
    for module in modules:
        for op in module.ops:
            for registration in op.registered("autograd"):
                backward = _code(registration.function)
                if backward is None:
                    continue
                found.append(
                    DiscoveredOp(
                        op.display, os.path.abspath(op.path), op.position.line, backward,
                        _code(registration.setup_context),
                    )
                )
    return found


def _code(function: OpFunction | None) -> OpCode | None:
    if function is None or function.method is None:
        return None
    method = function.method
    return OpCode(os.path.abspath(method.path), function.name, method.position.line, method.last_line)


# Variables that would make the child measure itself (coverage's subprocess
# support, pytest-cov's): the analyser is not the code under test.
_MEASURING_ENV = ("COVERAGE_PROCESS_START", "COVERAGE_PROCESS_CONFIG", "COV_CORE_")


class Background:
    """:func:`discover` in a child process, started now, collected by :meth:`result`."""

    def __init__(self, roots: Sequence[str]) -> None:
        self.roots = list(roots)
        env = {k: v for k, v in os.environ.items() if not k.startswith(_MEASURING_ENV)}
        try:
            self.process: subprocess.Popen[str] | None = subprocess.Popen(
                [sys.executable, "-m", __name__, *self.roots],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                text=True,
            )
        except OSError:
            self.process = None

    def result(self) -> list[Discovered | DiscoveredOp]:
        """The child's answer, or :func:`discover` run here if it has none."""
        process, self.process = self.process, None
        if process is not None:
            try:
                out, _ = process.communicate(timeout=600)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()
            else:
                if process.returncode == 0:
                    try:
                        return [_from_json(entry) for entry in json.loads(out)]
                    except (ValueError, TypeError):
                        pass
        return discover(self.roots)

    def cancel(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.communicate()
        self.process = None


def _from_json(entry: list[object] | dict[str, object]) -> Discovered | DiscoveredOp:
    if isinstance(entry, dict):
        return DiscoveredOp.from_json(entry)
    p, q, line, b, o, code = entry
    return Discovered(
        p, q, line, bool(b),  # type: ignore[arg-type]
        None if o is None else (o[0], o[1]),  # type: ignore[index]
        None if code is None else OpCode(*code),  # type: ignore[misc]
    )


def main(argv: Sequence[str]) -> int:
    found = discover(argv)
    json.dump(
        [
            d.to_json()
            if isinstance(d, DiscoveredOp)
            else [d.path, d.qualname, d.line, d.has_backward, d.backward_owner,
                  None if d.backward is None else list(astuple(d.backward))]
            for d in found
        ],
        sys.stdout,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
