"""AGL015: backward can end without ``return``."""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

import libcst as cst

from autograd_lint.model import flow, traverse
from autograd_lint.model.exprs import dotted_name, node_code
from autograd_lint.rules._common import is_stub
from autograd_lint.rules.base import FunctionContext, Invalid, Report, Rule, Severity, Valid


def _guarded_by_any_input_grad(body: Sequence[cst.BaseStatement], ctx_name: str | None) -> Sequence[cst.BaseStatement]:
    """The body of a final ``if any(ctx.needs_input_grad):`` (that test is always true when
    autograd runs backward: a node exists only when some input needs a gradient, so its
    ``else``, written or not, is unreachable); else ``body`` itself."""
    last = body[-1] if body else None
    if not isinstance(last, cst.If) or isinstance(last.orelse, cst.If) or ctx_name is None:
        return body
    test = last.test
    if (
        isinstance(test, cst.Call)
        and dotted_name(test.func) == "any"
        and len(test.args) == 1
        and dotted_name(test.args[0].value) == f"{ctx_name}.needs_input_grad"
    ):
        return [*body[:-1], *flow.suite_body(last.body)]
    return body


def _chain(statement: cst.BaseStatement) -> list[tuple[cst.BaseExpression, Sequence[cst.BaseStatement]]] | None:
    """The (test, body) pairs of an ``if``/``elif`` chain without a final ``else``; else None."""
    pairs = []
    node: cst.BaseStatement | cst.BaseSuite | None = statement
    while isinstance(node, cst.If):
        pairs.append((node.test, flow.suite_body(node.body)))
        node = node.orelse
    return pairs if pairs and node is None else None


def _falls_through_only_where_forward_does(
    backward: Sequence[cst.BaseStatement], forward: cst.FunctionDef | None, names_bound: Callable[[str], bool]
) -> bool:
    """Whether backward falls through only past the end of a final ``if``/``elif`` chain whose
    tests forward's final chain repeats word for word, on module state alone (no name either
    method binds): on that path forward returned None, no output has a grad_fn, and backward
    never runs (RWKV's ``if '32' in os.environ['RWKV_FLOAT_MODE']: ... elif ... 'bf16':``)."""
    if forward is None or not backward:
        return False
    forward_body = flow.method_body(forward)
    back_chain = _chain(backward[-1])
    fore_chain = _chain(forward_body[-1]) if forward_body else None
    if back_chain is None or fore_chain is None or len(back_chain) != len(fore_chain):
        return False
    for (back_test, back_body), (fore_test, fore_body) in zip(back_chain, fore_chain):
        if node_code(back_test) != node_code(fore_test):
            return False
        if flow.can_fall_through(back_body) or flow.can_fall_through(fore_body):
            return False
        if any(isinstance(n, cst.Name) and names_bound(n.value) for n in traverse.walk(back_test)):
            return False
    return True


class MissingReturn(Rule):
    """Checks that backward, vjp and jvp always end in a ``return`` with a value (or a
    ``raise``): a path that falls off the end of the body, or a bare ``return``,
    returns ``None``.  ``return None`` is accepted, since it deliberately means "no
    gradient".  Stub bodies (a docstring, ``...``, ``pass`` or ``raise NotImplementedError``)
    and classes without an effective forward are skipped, and so is the fall-through of
    a final ``if any(ctx.needs_input_grad):``, which autograd never takes, and that of a
    final ``if``/``elif`` chain on module state that forward's final chain repeats (on that
    path forward returns None and backward never runs)."""

    code = "AGL015"
    title = "backward can end without `return`"
    severity = Severity.ERROR
    why = (
        "With one forward input the gradient is silently lost: `a.grad` stays `None` with no "
        "error or warning. With more inputs: `RuntimeError: function FBackward returned an "
        "incorrect number of gradients (expected 2, got 1)`."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        if function.method("forward") is None:
            return
        for name in ("backward", "vjp", "jvp"):
            method = function.methods.get(name)
            if method is None or method.node is None or ctx.unit(method) is None:
                continue
            body = flow.method_body(method.node)
            if is_stub(body):
                continue
            for ret in method.returns:
                if ret.value is None:
                    yield Report(
                        ret.position,
                        f"{function.name}.{name} has a bare `return`, which returns no gradient; "
                        "return the gradients (or `return None` when that is meant)",
                    )
            forward = function.method("forward")
            models = [m.semantic for m in (method, forward) if m is not None]
            if _falls_through_only_where_forward_does(
                body,
                forward.node if forward is not None else None,
                lambda name: any(m is None or m.is_bound(name) for m in models),
            ):
                continue
            if flow.can_fall_through(_guarded_by_any_input_grad(body, method.ctx_name)):
                yield Report(
                    method.position,
                    f"{function.name}.{name} can reach the end of its body without `return`, "
                    "which returns no gradient",
                )

    VALID = [
        # forward returns nothing on the path where backward falls through: backward never runs there.
        Valid(
            """
            import os
            import torch

            class Cast(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    if os.environ["MODE"] == "fp16":
                        return x.half()
                    elif os.environ["MODE"] == "bf16":
                        return x.bfloat16()

                @staticmethod
                def backward(ctx, g):
                    if os.environ["MODE"] == "fp16":
                        return g.float()
                    elif os.environ["MODE"] == "bf16":
                        return g.float()
            """
        ),
        # A backward that is only `pass`: a forward-only Function's placeholder.
        Valid(
            """
            import torch

            class Quantize(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return torch.round(x)

                @staticmethod
                def backward(ctx, grad):
                    pass
            """
        ),
        Valid(
            """
            import torch

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = x.exp()
                    ctx.save_for_backward(y)
                    return y

                @staticmethod
                def backward(ctx, grad):
                    (y,) = ctx.saved_tensors
                    if ctx.needs_input_grad[0]:
                        return grad * y
                    else:
                        return None
            """
        ),
        # Trap 4: every branch returns or raises; `return None` is deliberate.
        Valid(
            """
            import torch

            class Clamp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, mode):
                    ctx.mode = mode
                    return x.clamp(0, 1)

                @staticmethod
                def backward(ctx, grad):
                    if ctx.mode == "pass":
                        return grad, None
                    elif ctx.mode == "none":
                        return None
                    try:
                        return grad * 2, None
                    except RuntimeError:
                        raise ValueError("bad mode")
            """
        ),
        # Stubs, and a class without an effective forward (trap 5: an abstract base).
        Valid(
            """
            import torch

            class Stub(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x.clone()

                @staticmethod
                def backward(ctx, grad):
                    \"\"\"Not differentiable.\"\"\"
                    raise NotImplementedError

                @staticmethod
                def jvp(ctx, tangent):
                    ...

            class Abstract(torch.autograd.Function):
                @staticmethod
                def backward(ctx, grad):
                    print(grad)
            """
        ),
        # A nested helper's bare return is not backward's; `while True` only ends by return.
        Valid(
            """
            import torch

            class Loop(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def backward(ctx, grad):
                    def check(g):
                        if g is None:
                            return
                        assert g.isfinite().all()

                    while True:
                        check(grad)
                        return grad * 2
            """
        ),
        # `any(ctx.needs_input_grad)` is true whenever autograd runs backward: the
        # implicit `else` is unreachable.
        Valid(
            """
            import torch

            class Solve(torch.autograd.Function):
                @staticmethod
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return torch.linalg.solve(a, b)

                @staticmethod
                def backward(ctx, grad):
                    if any(ctx.needs_input_grad):
                        a, b = ctx.saved_tensors
                        g = torch.linalg.solve(a.mT, grad)
                        return -g @ torch.linalg.solve(a, b).mT, g

            class SolveElse(Solve):
                @staticmethod
                def backward(ctx, grad):
                    if any(ctx.needs_input_grad):
                        return grad, grad
                    else:
                        pass
            """
        ),
        # An `except*` handler (Python 3.11+) that re-raises: no path falls off the end.
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
                    try:
                        return grad * b, grad * a
                    except* RuntimeError as group:
                        print(len(group.exceptions), "errors in backward")
                        raise
            """,
            min_python=(3, 11),
        ),
        # A PEP 701 f-string (a backslash in a replacement field, Python 3.12+) in the raise.
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
                    if grad.dim() != a.dim():
                        raise ValueError(f"shapes: {"\\n".join(str(t.shape) for t in (grad, a, b))}")
                    return grad * b, grad * a
            """,
            min_python=(3, 12),
        ),
    ]
    INVALID = [
        # forward returns on every path (its chain ends in `else`): backward's fall-through is reachable.
        Invalid(
            """
            import os
            import torch

            class Cast(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    if os.environ["MODE"] == "fp16":
                        return x.half()
                    else:
                        return x.float()

                @staticmethod
                def backward(ctx, g):
                    if os.environ["MODE"] == "fp16":
                        return g.float()
            """,
            line=13,
            message="Cast.backward can reach the end of its body without `return`",
        ),
        Invalid(
            """
            import torch

            class Square(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x * x

                @staticmethod
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    grad_x = 2 * x * grad
            """,
            line=10,
            message="Square.backward can reach the end of its body without `return`",
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
                    if ctx.needs_input_grad[0]:
                        return grad * b, grad * a
            """,
            line=10,
            message="can reach the end of its body without `return`",
        ),
        Invalid(
            """
            from torch.autograd import Function

            class Relu(Function):
                @staticmethod
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x.clamp(min=0)

                @staticmethod
                def backward(ctx, grad):
                    if grad is None:
                        return
                    (x,) = ctx.saved_tensors
                    return grad * (x > 0)
            """,
            line=12,
            message="Relu.backward has a bare `return`",
        ),
        # jvp is checked too; forward may live in a base class.
        Invalid(
            """
            import torch

            class Base(torch.autograd.Function):
                @staticmethod
                def forward(x):
                    return x * 3

                @staticmethod
                def setup_context(ctx, inputs, output):
                    pass

            class Triple(Base):
                @staticmethod
                def jvp(ctx, tangent):
                    out = tangent * 3
            """,
            line=14,
            message="Triple.jvp can reach the end",
        ),
        # An `except*` handler (Python 3.11+) can't `return`; this one falls off the end.
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
                    try:
                        return grad * b, grad * a
                    except* RuntimeError as group:
                        print(len(group.exceptions), "errors in backward")
            """,
            line=10,
            message="Mul.backward can reach the end of its body without `return`",
            min_python=(3, 11),
        ),
        # A PEP 701 f-string (a backslash in a replacement field, Python 3.12+) in a branch that prints.
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
                    if grad.dim() != a.dim():
                        print(f"shapes: {"\\n".join(str(t.shape) for t in (grad, a, b))}")
                    else:
                        return grad * b, grad * a
            """,
            line=10,
            message="Mul.backward can reach the end of its body without `return`",
            min_python=(3, 12),
        ),
    ]
