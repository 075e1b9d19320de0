"""AGL001: backward returns the wrong number of gradients."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from autograd_lint.model.apply_sites import RunApply
from autograd_lint.model.spec import FunctionSpec, Kind, MethodSpec
from autograd_lint.model.usage import apply_calls
from autograd_lint.rules._common import argument_range, plural
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid


def _widest_apply(ctx: FunctionContext) -> tuple[int, int] | None:
    """The most arguments a ``Fn.apply(...)`` call of this module passes (and its line),
    when the class name means one Function only in this module."""
    function = ctx.function
    if sum(1 for f in ctx.analysis.functions if f.name == function.name) != 1:
        return None
    calls = apply_calls(ctx.analysis.source.text).get(function.name, ())
    widest = max(calls, key=lambda call: call.arguments, default=None)
    return None if widest is None else (widest.arguments, widest.line)


def _run_apply(ctx: FunctionContext) -> RunApply | None:
    """The count every ``apply`` call of the run passes (all in other files), once every
    file is read; None when the run is not known, the module applies the Function itself
    (its own calls decide), or the class name means more than one Function here."""
    function = ctx.function
    run = ctx.analysis.run_applies
    if run is None or f"{function.name}.apply" in ctx.analysis.source.text:
        return None
    if sum(1 for f in ctx.analysis.functions if f.name == function.name) != 1:
        return None
    return run.get(function.full_name)


def _raises(expected: int | None, count: int) -> str:
    """The error torch 2.13 raises for ``count`` gradients where ``expected`` are due (None: unknown)."""
    numbers = f" (expected {expected}, got {count})" if expected is not None else ""
    return f"backward raises `returned an incorrect number of gradients{numbers}`"


def _passed_count(function: FunctionSpec, ctx: FunctionContext, returned: int) -> tuple[int | None, str] | None:
    """How many inputs ``apply`` passes, with the wording that says why, when a backward
    returning ``returned`` gradients certainly fails; None when it may be right.

    ``apply`` passes what the caller wrote, and combined style leaves defaulted
    trailing parameters out of the inputs when the caller does: a count between the
    required and the declared inputs is right for some calls.  It is wrong only for a
    call seen in this module that passes more, or, where this module has none, when every
    call of the run (all in other files) passes one count that is more.
    """
    span = argument_range(function)
    n_inputs = function.n_inputs
    if span is None or n_inputs is None:
        return None
    fewest, most = span
    if fewest <= returned < most:
        widest = _widest_apply(ctx)
        if widest is None:
            site = _run_apply(ctx)
            if site is None or not returned < site.arguments <= most:
                return None
            return site.arguments, f"{function.name}.apply in {site.path}:{site.line} passes {plural(site.arguments, 'input')}"
        if widest[0] <= returned:
            return None
        return widest[0], f"{function.name}.apply on line {widest[1]} passes {plural(widest[0], 'input')}"
    if fewest != most:
        return None, f"forward takes at least {plural(fewest, 'input')}"
    return n_inputs, f"forward takes {plural(n_inputs, 'input')}"


def _backward_never_runs(function: FunctionSpec) -> bool:
    """Whether forward (combined style) marks every output it returns non-differentiable:
    then no output requires grad and backward never runs (torch 2.13: the output has
    ``requires_grad=False``; ``out.sum().backward()`` raises ``element 0 of tensors does
    not require grad``).  Only certain when every returned value is a name that a
    ``mark_non_differentiable`` call marked, and only that name reaches the return."""
    forward = function.method("forward")
    if forward is None or function.is_split_style is not False or forward.semantic is None:
        return False
    model = forward.semantic
    ctx_name = forward.ctx_name
    marked: set = set()
    for call in model.calls_of(f"{ctx_name}.mark_non_differentiable"):
        for arg in call.args:
            if arg.star:
                return False
            marked |= model.origins(arg.value)
    if not marked or not model.returns:
        return False
    for ret in model.returns:
        values = ret.elements if ret.elements is not None else (ret.value,)
        for value in values:
            if not isinstance(value, cst.Name):
                return False
            reaching = model.reaching(value)
            if not reaching or not reaching <= marked:
                return False
    return True


class GradientCount(Rule):
    """Checks that every ``return`` of ``backward`` (or ``vjp``) gives one gradient per
    forward input.  Only returns whose length syntax can tell are checked: a tuple
    literal, a local name bound once to one, tuples joined by ``+``/``*`` (names bound to
    one included), a single tensor expression, or the tuple of a same-module helper
    (``return _grads(g, x, w)``, ``(None,) + _grads(...)``: every return of the helper a
    tuple of one length, its body ending in a return), for which only too few is reported.
    Extra trailing ``None`` values are allowed, as PyTorch allows them.

    A combined-style forward's defaulted inputs count only where ``apply`` passes them:
    a call in the Function's own module, or, where that module has none, the count
    every call of the run agrees on (other files' calls, known to ``autograd-lint check``
    once every file is read; silent under flake8, and wherever a call passes ``*args``
    or keywords, calls disagree, or ``apply`` is taken as a value)."""

    code = "AGL001"
    title = "backward returns the wrong number of gradients"
    severity = Severity.ERROR
    why = (
        "Too few gradients fail when backward runs: `RuntimeError: function FBackward returned "
        "an incorrect number of gradients (expected 3, got 2)`. An extra value that is not "
        "`None` fails the same way (`expected 1, got 2`). Extra trailing `None`s are accepted. "
        "Where forward marks every output it returns non-differentiable, backward never runs "
        "(torch 2.13: the output has `requires_grad=False`, and `out.sum().backward()` raises "
        "`RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn` "
        "before any backward is called): a count that can never be checked has no consequence, so "
        "the rule is silent there (issue 23: both such findings on real code were judged not worth acting on)."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        n_inputs = function.n_inputs
        never_runs = _backward_never_runs(function)
        for name in ("backward", "vjp"):
            method = function.methods.get(name)
            if method is None or n_inputs is None or (never_runs and name == "backward"):
                continue  # backward never runs: the count has no consequence
            for ret in method.returns:
                if ret.elements is not None:
                    count = len(ret.elements)
                    extra = ret.elements[n_inputs:]
                    if count >= n_inputs and all(e.kind is Kind.NONE for e in extra):
                        continue
                elif ret.value is not None and ret.shape in ("other", "name") and ret.value.kind.is_tensor:
                    count = 1
                    if n_inputs == 1:
                        continue
                else:
                    continue
                if count < n_inputs:
                    passed = _passed_count(function, ctx, count)
                    if passed is None:
                        continue
                    expected, why = passed
                else:
                    expected, why = n_inputs, f"forward takes {plural(n_inputs, 'input')}"
                head = (
                    f"{function.name}.{name} returns {plural(count, 'gradient')}, but {why}"
                    + (" (extra gradients must be None)" if count > n_inputs else "")
                )
                yield Report(ret.position, f"{head}: {_raises(expected, count)}")
            yield from self._through_helpers(ctx, method, n_inputs)

    @staticmethod
    def _through_helpers(ctx: FunctionContext, method: MethodSpec, n_inputs: int) -> Iterator[Report]:
        """Returns whose values a same-module helper's tuple makes up (``return _grads(...)``,
        ``(None,) + _grads(...)``): only too few is reported (extra values may be None)."""
        function = ctx.function
        model = method.semantic
        if model is None:
            return
        for ret in model.returns:
            if ret.elements is not None or ret.value is None:
                continue
            found = ctx.analysis.returned_count(method, ret.value)
            if found is None or found[0] >= n_inputs:
                continue
            count, helper = found
            passed = _passed_count(function, ctx, count)
            if passed is None:
                continue
            expected, why = passed
            yield Report(
                ctx.position(method, ret.node),
                f"{function.name}.{method.name} returns {plural(count, 'gradient')} (through `{helper}`), but {why}: "
                f"{_raises(expected, count)}",
            )

    VALID = [
        # A name declared `global` stands for no one tuple: the helper grows it first.
        Valid(
            """
            import torch

            grads = ()

            def widen():
                global grads
                grads = grads + (grads[0],)

            class Glob(torch.autograd.Function):
                @staticmethod
                def forward(ctx, names, x, y):
                    return x * y

                @staticmethod
                def backward(ctx, g):
                    global grads
                    grads = (g,)
                    widen()
                    return (None,) + grads
            """
        ),
        # `(None,) * 2 + (g,)`: three gradients for three inputs.
        Valid(
            """
            import torch

            class Last(torch.autograd.Function):
                @staticmethod
                def forward(ctx, names, op, x):
                    return op(x)

                @staticmethod
                def backward(ctx, g):
                    return (None,) * 2 + (g,)
            """
        ),
        # Every output marked non-differentiable: backward never runs, so the count has no consequence.
        Valid(
            """
            import torch

            class Argmax(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, dim):
                    out = x.argmax(dim).float()
                    ctx.mark_non_differentiable(out)
                    return out

                @staticmethod
                def backward(ctx, grad):
                    return grad
            """
        ),
        # A class decorator may change the contract: PyTorch's own `supports_tensorlist`
        # flattens a list argument into several inputs, one gradient each.
        Valid(
            """
            import torch
            from torch.testing._internal.autograd_function_db import supports_tensorlist

            @supports_tensorlist
            class Stack(torch.autograd.Function):
                @staticmethod
                def forward(ctx, xs):
                    return torch.stack(xs)

                @staticmethod
                def backward(ctx, grad):
                    return grad[0], grad[1]
            """
        ),
        # Combined style: `apply(x)` passes one input, so one gradient is right; the
        # defaulted trailing parameters are inputs only when a caller passes them.
        Valid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, factor=2.0, inplace=False):
                    ctx.factor = factor
                    return x * factor

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.factor

            def scale(x):
                return Scale.apply(x)
            """
        ),
        # No call of `apply` in this file: whether `factor` is passed is decided only by the
        # calls in the run's other files (tests/rules/test_cross_file_apply.py); alone, silent.
        Valid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, factor=2.0):
                    ctx.factor = factor
                    return x * factor

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.factor
            """
        ),
        # classmethod forward/backward: `cls` is not an input, ctx is the second parameter.
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @classmethod
                def forward(cls, ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @classmethod
                def backward(cls, ctx, grad):
                    a, b = ctx.saved_tensors
                    return grad * b, grad * a
            """
        ),
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    return grad * b, grad * a
            """
        ),
        # Trap 1: trailing Nones beyond the inputs are accepted by PyTorch.
        Valid(
            """
            from torch.autograd import Function

            class Scale(Function):
                @staticmethod
                def forward(ctx, x, factor):
                    ctx.factor = factor
                    return x * factor

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.factor, None, None, None
            """
        ),
        # Trap 2: returned variables and tuple arithmetic have unknown length.
        Valid(
            """
            import torch

            class Checkpoint(torch.autograd.Function):
                @staticmethod
                def forward(ctx, run_function, preserve, x, y):
                    return run_function(x, y)

                @staticmethod
                def backward(ctx, *grads):
                    inner = tuple(g for g in grads)
                    return (None, None) + inner
            """
        ),
        # Trap 3: *args in forward makes the input count unknown.
        Valid(
            """
            import torch

            class Many(torch.autograd.Function):
                @staticmethod
                def forward(ctx, *tensors):
                    return sum(tensors)

                @staticmethod
                def backward(ctx, grad):
                    return grad, grad
            """
        ),
        # Trap 4: returns of different lengths are each checked on their own.
        Valid(
            """
            import torch

            class Maybe(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, bias):
                    ctx.has_bias = bias is not None
                    return x if bias is None else x + bias

                @staticmethod
                def backward(ctx, grad):
                    if ctx.has_bias:
                        return grad, grad.sum(0)
                    return grad, None
            """
        ),
        # Trap 5: split style counts every forward parameter; forward lives in a base.
        Valid(
            """
            import torch

            class Base(torch.autograd.Function):
                @staticmethod
                def forward(x, y):
                    return x + y

                @staticmethod
                def setup_context(ctx, inputs, output):
                    pass

            class Add(Base):
                @staticmethod
                def backward(ctx, grad):
                    return grad, grad
            """
        ),
        # A generic Function (PEP 695 type parameters, Python 3.12+).
        Valid(
            """
            import torch

            class Mul[T: torch.Tensor](torch.autograd.Function):
                @staticmethod
                def forward(ctx, a: T, b: T) -> T:
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    return grad * b, grad * a
            """,
            min_python=(3, 12),
        ),
        # Generic methods and `type` aliases around and inside the class (Python 3.12+).
        Valid(
            """
            import torch

            type Scalar = float | int

            class Scale(torch.autograd.Function):
                type Grads = tuple[torch.Tensor, None]

                @staticmethod
                def forward[T: torch.Tensor](ctx, x: T, factor: Scalar) -> T:
                    ctx.factor = factor
                    return x * factor

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.factor, None
            """,
            min_python=(3, 12),
        ),
        # Every `case` of a match statement returns both gradients.
        Valid(
            """
            import torch

            class Act(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, kind):
                    ctx.save_for_backward(x)
                    ctx.kind = kind
                    return x.relu() if kind == "relu" else x.sigmoid()

                @staticmethod
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    match ctx.kind:
                        case "relu":
                            return grad * (x > 0), None
                        case _:
                            s = x.sigmoid()
                            return grad * s * (1 - s), None
            """,
        ),
        # Positional-only parameters are inputs like any others.
        Valid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b, /):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, grad, /):
                    a, b = ctx.saved_tensors
                    return grad * b, grad * a
            """,
        ),
        # A helper's tuple of the right length; helpers whose length can't be told (two
        # lengths, a path that falls off the end) are not counted.
        Valid(
            """
            import torch

            def _grads(g, x, w):
                return g @ w, g.t() @ x

            def _maybe(g, x, w, full):
                if full:
                    return g @ w, g.t() @ x, g.sum(0)
                return g @ w, g.t() @ x

            def _falls(g, w):
                if g is not None:
                    return (g @ w,)

            class Linear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w):
                    ctx.save_for_backward(x, w)
                    return x @ w.t()

                @staticmethod
                def backward(ctx, g):
                    x, w = ctx.saved_tensors
                    return _grads(g, x, w)

            class Affine(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w, b, full):
                    ctx.save_for_backward(x, w)
                    return x @ w.t() + b

                @staticmethod
                def backward(ctx, g):
                    x, w = ctx.saved_tensors
                    if ctx.needs_input_grad[2]:
                        return _maybe(g, x, w, True) + (None,)
                    return (None,) + _falls(g, w) + (None, None)
            """
        ),
        # `(None,) * 2 + grads`, grads a tuple literal: 4 gradients for 4 inputs; a tuple
        # grown in a loop has no known length.
        Valid(
            """
            import torch

            class ShardedLinear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, group, chunks, x, w):
                    ctx.save_for_backward(x, w)
                    return x @ w.t()

                @staticmethod
                def backward(ctx, g):
                    x, w = ctx.saved_tensors
                    grads = (g @ w, g.t() @ x)
                    return (None,) * 2 + grads

            class Stack(torch.autograd.Function):
                @staticmethod
                def forward(ctx, n, x, y):
                    return x + y

                @staticmethod
                def backward(ctx, g):
                    grads = ()
                    for _ in range(2):
                        grads = grads + (g,)
                    return (None,) + grads
            """
        ),
    ]
    INVALID = [
        # A gradient list built by appends (one per branch) and an extend: 4 for 5 inputs.
        Invalid(
            """
            import torch

            class PerSample(torch.autograd.Function):
                @staticmethod
                def forward(ctx, names, op, x, weight, bias):
                    ctx.save_for_backward(x, weight)
                    return op(x, weight, bias)

                @staticmethod
                def backward(ctx, grad):
                    x, weight = ctx.saved_tensors
                    results = [None, None]
                    if ctx.needs_input_grad[2]:
                        results.append(grad @ weight)
                    else:
                        results.append(None)
                    results.extend([None])
                    return tuple(results)
            """,
            line=18,
            message="PerSample.backward returns 4 gradients, but forward takes 5 inputs",
        ),
        # Gradients from a same-module helper's tuple, alone and joined to a leading None.
        Invalid(
            """
            import torch

            def _linear_grads(g, x, w):
                return g @ w, g.t() @ x

            class Linear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w, b):
                    ctx.save_for_backward(x, w)
                    return x @ w.t() + b

                @staticmethod
                def backward(ctx, g):
                    x, w = ctx.saved_tensors
                    return _linear_grads(g, x, w)

            class Sharded(torch.autograd.Function):
                @staticmethod
                def forward(ctx, group, chunks, x, w):
                    ctx.save_for_backward(x, w)
                    return x @ w.t()

                @staticmethod
                def backward(ctx, g):
                    x, w = ctx.saved_tensors
                    return (None,) + _linear_grads(g, x, w)
            """,
            line=15,
            message="Linear.backward returns 2 gradients (through `_linear_grads`), but forward takes 3 inputs",
        ),
        # A tuple bound to a name, joined to leading Nones: 3 + 2 for 4 inputs.
        Invalid(
            """
            import torch

            class ShardedLinear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, group, chunks, x, w):
                    ctx.save_for_backward(x, w)
                    return x @ w.t()

                @staticmethod
                def backward(ctx, g):
                    x, w = ctx.saved_tensors
                    grads = (g @ w, g.t() @ x)
                    return (None, None, None) + grads
            """,
            line=13,
            message="ShardedLinear.backward returns 5 gradients, but forward takes 4 inputs (extra gradients must be None)",
        ),
        # One gradient parameter returned alone while forward takes two inputs.
        Invalid(
            """
            import torch

            class Add(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    return a + b

                @staticmethod
                def backward(ctx, g):
                    return g
            """,
            line=10,
            message="returns 1 gradient, but forward takes 2 inputs",
        ),
        # A defaulted parameter the module's own call passes.
        Invalid(
            """
            import torch

            class Scale(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, factor=2.0):
                    ctx.factor = factor
                    return x * factor

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.factor

            def halve(x):
                return Scale.apply(x, 0.5)
            """,
            line=11,
            message=(
                "Scale.apply on line 14 passes 2 inputs: backward raises "
                "`returned an incorrect number of gradients (expected 2, got 1)`"
            ),
        ),
        Invalid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    return grad * b
            """,
            line=12,
            message="Mul.backward returns 1 gradient, but forward takes 2 inputs",
        ),
        Invalid(
            """
            from torch.autograd import Function as F

            class Square(F):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x * x

                @staticmethod
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    return 2 * x * grad, grad
            """,
            line=12,
            message="extra gradients must be None",
        ),
        Invalid(
            """
            import torch.autograd as ag

            class Lerp(ag.Function):
                @staticmethod
                def forward(ctx, a, b, w):
                    ctx.save_for_backward(w)
                    return a + w * (b - a)

                @staticmethod
                def backward(ctx, grad):
                    (w,) = ctx.saved_tensors
                    grads = (grad * (1 - w), grad * w)
                    return grads
            """,
            line=13,
            message=(
                "returns 2 gradients, but forward takes 3 inputs: backward raises "
                "`returned an incorrect number of gradients (expected 3, got 2)`"
            ),
        ),
        # Split style: forward takes no ctx, so both parameters are inputs.
        Invalid(
            """
            import torch

            class Add(torch.autograd.Function):
                @staticmethod
                def forward(x, y):
                    return x + y

                @staticmethod
                def setup_context(ctx, inputs, output):
                    pass

                @staticmethod
                def backward(ctx, grad):
                    return (grad,)
            """,
            line=14,
            message="returns 1 gradient, but forward takes 2 inputs",
        ),
        # A generic Function (PEP 695, Python 3.12+) is found and checked like any other.
        Invalid(
            """
            import torch

            class Mul[T: torch.Tensor](torch.autograd.Function):
                @staticmethod
                def forward(ctx, a: T, b: T) -> T:
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    return grad * b
            """,
            line=12,
            message="Mul.backward returns 1 gradient, but forward takes 2 inputs",
            min_python=(3, 12),
        ),
        # A generic forward and `type` aliases (Python 3.12+): the float is still an input.
        Invalid(
            """
            import torch

            type Scalar = float | int

            class Scale(torch.autograd.Function):
                type Grads = tuple[torch.Tensor, None]

                @staticmethod
                def forward[T: torch.Tensor](ctx, x: T, factor: Scalar) -> T:
                    ctx.factor = factor
                    return x * factor

                @staticmethod
                def backward(ctx, grad):
                    return grad * ctx.factor
            """,
            line=15,
            message="Scale.backward returns 1 gradient, but forward takes 2 inputs",
            min_python=(3, 12),
        ),
        # One `case` of a match statement forgets the None for `kind`.
        Invalid(
            """
            import torch

            class Act(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, kind):
                    ctx.save_for_backward(x)
                    ctx.kind = kind
                    return x.relu() if kind == "relu" else x.sigmoid()

                @staticmethod
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    match ctx.kind:
                        case "relu":
                            return grad * (x > 0), None
                        case _:
                            s = x.sigmoid()
                            return grad * s * (1 - s)
            """,
            line=18,
            message="Act.backward returns 1 gradient, but forward takes 2 inputs",
        ),
        # Positional-only parameters (`/`) in forward and backward.
        Invalid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b, /):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                def backward(ctx, grad, /):
                    a, b = ctx.saved_tensors
                    return grad * b
            """,
            line=12,
            message="Mul.backward returns 1 gradient, but forward takes 2 inputs",
        ),
    ]
