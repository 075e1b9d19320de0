"""gen-tests for custom ops: what to check for each op, and the text of its test module.

For every ``torch.library.custom_op`` the run finds at module level, the generated
module ``test_opcheck_<module>.py`` holds a class with

* ``test_opcheck``: ``torch.library.opcheck`` (schema, autograd registration, and
  with a fake kernel somewhere in the run, FakeTensor agreement and AOT dispatch);
* ``test_gradcheck``: finite differences through the op, when it has ``register_autograd``;
* ``test_compile_parity`` (with ``--compile-parity``): eager vs
  ``torch.compile(backend="aot_eager")`` outputs, mutated arguments and gradients,
  when it has a fake kernel (without one, compiling fails by design: AGL110).

Inputs are chosen as for Functions (:func:`.inputs.choose_inputs` on the Function
PyTorch builds for the op): the calls recorded by ``pytest --autograd-record``
(:meth:`.recording.Recording.cases_for_op`), else literal defaults, annotations,
and run-time search.
Tensors require grad when the op has ``register_autograd`` (at least one does, so
opcheck's autograd tests run) except the ones it mutates; an op without it is
checked without, because a backward through it raises by design.  An op with
defaulted scalars and an autograd formula gets a second case passing other
values, so that a backward that only works while trailing defaults are dropped
(AGL101) fails.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Sequence

from autograd_lint.gentests.inputs import (
    FunctionInputs,
    InputCase,
    Origin,
    TensorInput,
    ValueInput,
    choose_inputs,
    distinct,
)
from autograd_lint.gentests.literals import default_sources
from autograd_lint.gentests.render import _case_source, _quoted, case_ids, RECORD_HINT
from autograd_lint.model.custom_ops import CustomOpModule, CustomOpSpec, hidden_function
from autograd_lint.model.source import module_name

_ALTERNATIVES = {"True": "False", "False": "True"}


@dataclass(frozen=True)
class OpPlan:
    """What to generate for one op."""

    op: CustomOpSpec
    inputs: FunctionInputs
    has_fake: bool
    has_autograd: bool
    compile_parity: bool


def _alternative(source: str) -> str | None:
    """Another literal of the same type: ``True`` for ``False``, ``n + 1`` for an int, ``2 x`` for a float."""
    if source in _ALTERNATIVES:
        return _ALTERNATIVES[source]
    if re.fullmatch(r"-?\d+", source):
        return str(int(source) + 1)
    # A float literal: with a dot, an exponent or both (``0.5``, ``1.``, ``.5``, ``1e-3``, ``2E+4``).
    if re.fullmatch(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?", source):
        value = float(source)
        return repr(value * 2 if value else 0.5)
    return None


def _with_non_defaults(case: InputCase, op: CustomOpSpec) -> InputCase | None:
    """``case`` with every literal default replaced by another value, or None when none can be."""
    args = list(case.args)
    changed = False
    for index, (arg, param) in enumerate(zip(case.args, op.positional)):
        if isinstance(arg, ValueInput) and param.default is not None:
            other = _alternative(arg.source)
            if other is not None:
                args[index] = ValueInput(other)
                changed = True
    return InputCase(tuple(args)) if changed else None


def plan_op(op: CustomOpSpec, compile_parity: bool, recorded: Sequence[InputCase] = ()) -> OpPlan:
    """What to generate for ``op``; ``recorded`` are its calls recorded by ``pytest --autograd-record``."""
    spec = hidden_function(op)
    has_fake = bool(op.registered("fake")) or op.has_generated_fake
    has_autograd = bool(op.registered("autograd"))
    positional = len(op.positional)
    # A recorded call passes at most the op's positional parameters (keyword-only ones never).
    recorded = [case for case in recorded if len(case.args) <= positional]
    if spec is None and recorded:
        inputs = FunctionInputs(Origin.RECORDED, distinct(list(recorded)))
    elif spec is None:
        inputs = FunctionInputs(Origin.NONE, (), "the op's function is not in the analysed files")
    else:
        inputs = choose_inputs(spec, list(recorded), [], default_sources(spec))
    mutated = set(op.mutates_args) if isinstance(op.mutates_args, tuple) else {p.name for p in op.params}
    cases = []
    for case in inputs.cases:
        args = tuple(
            replace(arg, requires_grad=arg.requires_grad and has_autograd and param.name not in mutated)
            if isinstance(arg, TensorInput) else arg
            for arg, param in zip(case.args, op.positional)
        )
        cases.append(InputCase(args))
        if has_autograd:
            other = _with_non_defaults(InputCase(args), op)
            if other is not None:
                cases.append(other)
    inputs = FunctionInputs(inputs.origin, tuple(cases), inputs.reason)
    return OpPlan(op, inputs, has_fake, has_autograd, compile_parity and has_fake)


@dataclass
class OpTarget:
    """The ops of one source module, and the other modules that register on them."""

    module: str
    path: str
    ops: list[CustomOpSpec]
    registering: list[str]


def op_targets(modules: list[CustomOpModule]) -> list[OpTarget]:
    """Importable ops (bound at module level of a module with a name), grouped by module."""
    targets: dict[str, OpTarget] = {}
    for found in modules:
        for op in found.ops:
            if not op.top_level or op.module is None or op.body is None:
                continue
            target = targets.setdefault(op.module, OpTarget(op.module, op.path, [], []))
            target.ops.append(op)
            for registration in op.registrations:
                other = module_name(registration.path)
                if registration.path != op.path and other and other not in target.registering:
                    target.registering.append(other)
    return list(targets.values())


def output_name(module: str) -> str:
    return "test_opcheck_" + module.replace(".", "_") + ".py"


def _class_name(op: CustomOpSpec, taken: set[str]) -> str:
    base = "TestOp_" + re.sub(r"\W", "_", op.op_name or op.python_name)
    name, suffix = base, 2
    while name in taken:
        name, suffix = f"{base}{suffix}", suffix + 1
    return name


def _render_class(plan: OpPlan, name: str) -> list[str]:
    op = plan.op
    facts = ", ".join(
        [
            "fake kernel" if plan.has_fake else "no fake kernel (opcheck skips test_faketensor, test_aot_dispatch_dynamic)",
            "register_autograd" if plan.has_autograd else "no register_autograd (inputs do not require grad)",
        ]
    )
    lines = ["", "", f"class {name}:", f'    """{op.display} (line {op.position.line}): {facts}."""', "", "    CASES = ["]
    if not plan.inputs.cases:
        reason = f"no inputs known for {op.display}: {plan.inputs.reason}; {RECORD_HINT}"
        lines.append(f'        pytest.param(None, id="no-inputs", marks=pytest.mark.skip(reason={_quoted(reason)})),')
    for case, case_id in zip(plan.inputs.cases, case_ids(plan.inputs)):
        lines.append(f"        pytest.param({_case_source(case)}, id={_quoted(case_id)}),")
    lines.append("    ]")
    subject = f"subject.{op.python_name}"
    tests = [("opcheck", f"check_opcheck({subject}, case, has_fake={plan.has_fake})")]
    if plan.has_autograd:
        tests.append(("gradcheck", f"check_op_gradcheck({subject}, case)"))
    if plan.compile_parity:
        tests.append(("compile_parity", f"check_op_compile_parity({subject}, case)"))
    for test, call in tests:
        lines += ["", '    @pytest.mark.parametrize("case", CASES)', f"    def test_{test}(self, case: Case) -> None:",
                  f"        {call}"]
    return lines


def render_op_module(module: str, plans: list[OpPlan], root_from_test: str, registering: list[str]) -> str:
    """The body of ``test_opcheck_<module>.py``; ``registering`` lists the other modules of the
    run that register kernels on these ops, imported so that the registrations exist."""
    names = {"Case", "import_subject", "check_opcheck"}
    for plan in plans:
        for case in plan.inputs.cases:
            for arg in case.args:
                if isinstance(arg, TensorInput):
                    names.add("tensor" if arg.shape is not None else "any_tensor")
                elif not isinstance(arg, ValueInput):
                    names.add("any_scalar")
    harness = sorted(names - {"check_opcheck"})
    op_checks = sorted(
        {"check_opcheck"}
        | {"check_op_gradcheck" for p in plans if p.has_autograd}
        | {"check_op_compile_parity" for p in plans if p.compile_parity}
    )
    lines = [
        f'"""opcheck and gradcheck tests for the custom ops of ``{module}``."""',
        "",
        "import pytest",
        "",
        'torch = pytest.importorskip("torch")',
        "",
        "from autograd_lint.gentests.harness import (  # noqa: E402",
        *[f"    {name}," for name in harness],
        ")",
        "from autograd_lint.gentests.op_harness import (  # noqa: E402",
        *[f"    {name}," for name in op_checks],
        ")",
        "",
        f"subject = import_subject({_quoted(module)}, __file__, {_quoted(root_from_test)})",
    ]
    lines += [f"import_subject({_quoted(other)}, __file__, {_quoted(root_from_test)})" for other in registering]
    taken: set[str] = set()
    for plan in plans:
        name = _class_name(plan.op, taken)
        taken.add(name)
        lines += _render_class(plan, name)
    return "\n".join(lines) + "\n"
