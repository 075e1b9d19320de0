"""The text of one generated test module: a test class per Function, a method per check.

Rendering is a pure function of its arguments, so that regenerating from
unchanged sources gives byte-identical files.  Test node ids name the Function
(the class) and the input case (the parameter id), e.g.
``test_gradcheck_pkg_ops.py::TestSquare::test_gradcheck[recorded-3x4-2]``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from autograd_lint.gentests.checks import Check, marks_inputs_dirty
from autograd_lint.gentests.inputs import (
    FunctionInputs,
    Input,
    InputCase,
    ObjectInput,
    Origin,
    ProcessGroupInput,
    ScalarInput,
    TensorInput,
)
from autograd_lint.gentests.low_precision import LowPrecision
from autograd_lint.gentests.surrogate import Surrogate
from autograd_lint.gentests.tolerance import Tolerance
from autograd_lint.model.spec import FunctionSpec

RECORD_HINT = (
    "record real inputs: run your tests with `pytest --autograd-record`, "
    "then re-run `autograd-lint gen-tests`"
)
_ORIGIN_DESCRIPTIONS = {
    Origin.RECORDED: "inputs recorded by `pytest --autograd-record`",
    Origin.STATIC: "inputs from literal call sites or annotations in the source",
    Origin.SEARCH: "tensor shapes searched for at run time",
    Origin.NONE: "no inputs known",
}
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_.+]+")


def _quoted(text: str) -> str:
    """A double-quoted Python string literal (JSON's escapes are valid Python ones)."""
    return json.dumps(text)


@dataclass(frozen=True)
class FunctionPlan:
    """What to generate for one Function: its inputs and its checks."""

    spec: FunctionSpec
    inputs: FunctionInputs
    checks: tuple[Check, ...]
    surrogate: Surrogate | None = None
    tolerance: Tolerance | None = None
    low_precision: LowPrecision | None = None
    # Value domains forward's source asks for (see .domains), tried first by the search.
    domains: tuple[str, ...] = ()

    def check_arguments(self, check: Check) -> str:
        """What the harness call of ``check`` takes after ``(function, case``."""
        if check is Check.LOW_PRECISION and self.low_precision is not None:
            reference = self.low_precision.reference
            source = f"load_reference({_quoted(reference)})" if self.low_precision.reference_is_import else reference
            return self.low_precision.arguments(source)
        tolerance = self.tolerance.arguments() if self.tolerance is not None and check.runs_gradcheck else ""
        surrogate = self.surrogate
        if surrogate is None:
            return tolerance
        if check is Check.VMAP:
            return ", surrogate=True"
        if check is Check.SURROGATE_GRADIENTS and surrogate.sampled:
            return ", sampled=True"
        if check is Check.SURROGATE_REFERENCE and surrogate.reference is not None:
            if surrogate.reference_is_import:
                return f", reference=load_reference({_quoted(surrogate.reference)})"
            return f", reference={surrogate.reference}"
        return tolerance


def _tuple_source(items: tuple[float | int | bool | str, ...]) -> str:
    texts = [_quoted(item) if isinstance(item, str) else repr(item) for item in items]
    return "(" + ", ".join(texts) + ("," if len(texts) == 1 else "") + ")"


def _input_source(arg: Input) -> str:
    if isinstance(arg, TensorInput):
        options = ""
        if arg.dtype != "float64":
            options += f", dtype={_quoted(arg.dtype)}"
        if arg.device != "cpu":
            options += f", device={_quoted(arg.device)}"
        if not arg.requires_grad:
            options += ", requires_grad=False"
        if not arg.contiguous:
            options += ", contiguous=False"
        if arg.values is not None:
            options += f", values={_tuple_source(arg.values)}"
        if arg.stats is not None:
            options += ", stats={" + ", ".join(f"{_quoted(name)}: {value!r}" for name, value in arg.stats) + "}"
        if arg.shape is None:
            if arg.rank is not None:
                options += f", rank={arg.rank}"
            if arg.sizes:
                options += f", sizes={arg.sizes!r}"
            return f"any_tensor({options.lstrip(', ')})"
        shape = "(" + ", ".join(map(str, arg.shape)) + ("," if len(arg.shape) == 1 else "") + ")"
        return f"tensor({shape}{options})"
    if isinstance(arg, ScalarInput):
        return "any_scalar()"
    if isinstance(arg, ObjectInput):
        raise ValueError("an object argument is only replayed from a pickled case")
    return arg.source


_PICKLE_LINE = 96


def _process_group_source(group: ProcessGroupInput) -> str:
    options = f", rank={group.rank}" if group.rank else ""
    if group.mesh_device is not None:
        options += f", mesh_device={_quoted(group.mesh_device)}"
    if group.mesh_shape is not None:
        options += f", mesh_shape={_tuple_source(group.mesh_shape)}"
    return f"RecordedProcessGroup({_quoted(group.backend)}, world_size={group.world_size}{options})"


def _case_source(case: InputCase, domains: tuple[str, ...] = ()) -> str:
    group = f", process_group={_process_group_source(case.process_group)}" if case.process_group else ""
    if case.pickled is not None:
        # The labels are in the case id; the arguments are the pickle's.
        chunks = [case.pickled[i:i + _PICKLE_LINE] for i in range(0, len(case.pickled), _PICKLE_LINE)]
        body = "\n".join(f"            {_quoted(chunk)}" for chunk in chunks)
        function = ", function=True" if case.with_function else ""
        no_grad = f", no_grad={_tuple_source(case.no_grad)}" if case.no_grad else ""
        return f"recorded(\n{body}\n        {function}{no_grad}{group})"
    items = [_input_source(arg) for arg in case.args]
    drawn = any(isinstance(arg, TensorInput) and arg.values is None for arg in case.args)
    preferred = f", domains={_tuple_source(domains)}" if domains and drawn else ""
    return "Case((" + ", ".join(items) + ("," if len(items) == 1 else "") + ")" + preferred + group + ")"


def _input_label(arg: Input) -> str:
    if isinstance(arg, TensorInput):
        label = "?" if arg.shape is None else "x".join("j" if n < 0 else str(n) for n in arg.shape) or "scalar"
        if arg.subclass is not None:  # a recorded tensor subclass: its class, then its (ragged: j) shape
            label = f"{arg.subclass.rsplit('.', 1)[-1]}-{label}"
        if arg.dtype != "float64":
            label += f".{arg.dtype}"
        if arg.device != "cpu":
            label += f"@{arg.device}"
        return label
    if isinstance(arg, ScalarInput):
        return "number"
    if isinstance(arg, ObjectInput):
        return _ID_UNSAFE.sub("_", arg.type_name.rsplit(".", 1)[-1]).strip("_")[:24] or "object"
    return _ID_UNSAFE.sub("_", arg.source.replace("torch.", "")).strip("_")[:24] or "value"


def case_ids(inputs: FunctionInputs) -> list[str]:
    """Unique, deterministic parameter ids: origin then one label per argument."""
    ids: list[str] = []
    for case in inputs.cases:
        base = "-".join([inputs.origin.value] + [_input_label(arg) for arg in case.args])
        candidate, suffix = base, 2
        while candidate in ids:
            candidate, suffix = f"{base}#{suffix}", suffix + 1
        ids.append(candidate)
    return ids


def class_name_for(spec: FunctionSpec, taken: set[str]) -> str:
    base = "Test" + spec.qualname.replace(".<locals>.", "_").replace(".", "_")
    name, suffix = base, 2
    while name in taken:
        name, suffix = f"{base}{suffix}", suffix + 1
    return name


def _required_device_marks(case: InputCase) -> str:
    marks = [f"requires_device({_quoted(device)})" for device in case.devices]
    if not marks:
        return ""
    return ", marks=" + (marks[0] if len(marks) == 1 else "[" + ", ".join(marks) + "]")


def _render_class(plan: FunctionPlan, class_name: str) -> list[str]:
    spec, inputs = plan.spec, plan.inputs
    description = _ORIGIN_DESCRIPTIONS[inputs.origin]
    if plan.surrogate is not None and plan.surrogate.inferred is not None:
        description += "; backward plainly is not the derivative of forward (undeclared surrogate gradient)"
    elif plan.surrogate is not None:
        description += "; a declared surrogate gradient (backward is not the derivative of forward)"
    if plan.low_precision is not None:
        description += (f"; a declared low-precision kernel ({plan.low_precision.dtype} on "
                        f"{plan.low_precision.device}), compared with its reference")
    lines = [
        "",
        "",
        f"class {class_name}:",
        f'    """{spec.qualname} (line {spec.position.line}): {description}."""',
        "",
        "    CASES = [",
    ]
    if inputs.origin is Origin.NONE:
        reason = f"no inputs known for {spec.qualname}: {inputs.reason}; {RECORD_HINT}"
        lines.append(f"        pytest.param(None, id=\"no-inputs\", marks=pytest.mark.skip(reason={_quoted(reason)})),")
    for case, case_id in zip(inputs.cases, case_ids(inputs)):
        marks = _required_device_marks(case)
        lines.append(f"        pytest.param({_case_source(case, plan.domains)}, id={_quoted(case_id)}{marks}),")
    lines.append("    ]")
    # A class defined inside a function is unpickled from each recorded case.
    subject = "recorded_function(case)" if "<locals>" in spec.qualname else f"subject.{spec.qualname}"
    if marks_inputs_dirty(spec):
        subject = f"in_place({subject})"
    # Cases recorded under a process group run under one (a no-op for the others).
    in_group = _has_process_group(plan)
    indent = " " * (12 if in_group else 8)
    for check in plan.checks:
        lines.append("")
        if check is Check.GRADCHECK and plan.surrogate is not None and plan.surrogate.inferred is not None:
            reason = (f"backward plainly is not the derivative of forward: {plan.surrogate.inferred}; if that is "
                      "deliberate, declare it (# autograd-lint: surrogate-gradient), else fix backward")
            lines.append(f"    @pytest.mark.xfail(reason={_quoted(reason)}, strict=False)")
        lines += [
            '    @pytest.mark.parametrize("case", CASES)',
            f"    def test_{check.value}(self, case: Case) -> None:",
            *(["        with recorded_process_group(case):"] if in_group else []),
            f"{indent}{check.harness_function}({subject}, case{plan.check_arguments(check)})",
        ]
    return lines


def _has_process_group(plan: FunctionPlan) -> bool:
    return any(case.process_group is not None for case in plan.inputs.cases)


def harness_names(plans: list[FunctionPlan]) -> list[str]:
    """The names the module imports from the harness, sorted."""
    names = {"Case", "import_subject"}
    for plan in plans:
        names.update(check.harness_function for check in plan.checks)
        if plan.surrogate is not None and plan.surrogate.reference_is_import:
            names.add("load_reference")
        if plan.low_precision is not None and plan.low_precision.reference_is_import and plan.checks:
            names.add("load_reference")
        if plan.checks and marks_inputs_dirty(plan.spec):
            names.add("in_place")
        if _has_process_group(plan):
            names.add("RecordedProcessGroup")
            if plan.checks:
                names.add("recorded_process_group")
        for case in plan.inputs.cases:
            # A pickled case on a device is marked like any other (a CUDA call whose arguments are pickled).
            if case.devices:
                names.add("requires_device")
            if case.pickled is not None:
                names.add("recorded")
                if case.with_function:
                    names.add("recorded_function")
                continue
            for arg in case.args:
                if isinstance(arg, TensorInput):
                    names.add("tensor" if arg.shape is not None else "any_tensor")
                elif isinstance(arg, ScalarInput):
                    names.add("any_scalar")
    return sorted(names)


def header_comment(source_display: str, module: str) -> str:
    return (
        f"# Generated by `autograd-lint gen-tests` from {source_display} (module {module}).\n"
        "# Re-run the command rather than editing: it replaces an edited file only with --force."
    )


def render_module(module: str, plans: list[FunctionPlan], root_from_test: str) -> str:
    """The body (everything below the hash header) of the test module for ``module``.

    ``root_from_test`` is the directory ``module`` is importable from, relative to
    the generated file, in POSIX form.
    """
    lines = [
        f'"""gradcheck tests for the autograd.Functions of ``{module}``."""',
        "",
        "import pytest",
        "",
        'torch = pytest.importorskip("torch")',
        "",
        "from autograd_lint.gentests.harness import (  # noqa: E402",
    ]
    lines += [f"    {name}," for name in harness_names(plans)]
    lines += [
        ")",
        "",
        f"subject = import_subject({_quoted(module)}, __file__, {_quoted(root_from_test)})",
    ]
    taken: set[str] = set()
    for plan in plans:
        class_name = class_name_for(plan.spec, taken)
        taken.add(class_name)
        lines += _render_class(plan, class_name)
    return "\n".join(lines) + "\n"
