"""AGL006: backward arity does not match the number of forward outputs."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from autograd_lint.model import traverse
from autograd_lint.model.exprs import dotted_name
from autograd_lint.model.imports import ImportMap
from autograd_lint.rules._common import plural
from autograd_lint.rules.base import (
    FunctionContext,
    Invalid,
    Report,
    Rule,
    Severity,
    Valid,
)
from autograd_lint.model.spec import FunctionSpec, MethodSpec

# torch functions that return a tuple although the classifier calls every
# torch.<fn>(...) a tensor; a forward that calls one may return several outputs.
TUPLE_RETURNING = frozenset(
    """
    meshgrid broadcast_tensors atleast_1d atleast_2d atleast_3d sort topk max min median nanmedian
    mode kthvalue cummax cummin aminmax std_mean var_mean unique unique_consecutive frexp
    histogram histogramdd geqrf qr svd slogdet lu lu_unpack lstsq triangular_solve eig eigh
    where nonzero gradient adaptive_max_pool1d adaptive_max_pool2d adaptive_max_pool3d
    max_pool1d max_pool2d max_pool3d fractional_max_pool2d fractional_max_pool3d
    multi_head_attention_forward native_batch_norm native_layer_norm native_group_norm
    batch_norm_stats batch_norm_gather_stats batch_norm_gather_stats_with_counts
    cholesky_ex inv_ex solve_ex lu_factor lu_factor_ex ldl_factor ldl_factor_ex lstm gru
    rnn_tanh rnn_relu lstm_cell embedding_bag native_dropout batch_norm_backward_reduce
    cudnn_batch_norm miopen_batch_norm fake_quantize_per_tensor_affine_cachemask
    fake_quantize_per_channel_affine_cachemask choose_qparams_optimized
    """.split()
)
# Name parts that mark the rest of the split/chunk family (unsafe_split, split_copy, ...).
TUPLE_RETURNING_PARTS = ("split", "chunk", "unbind", "with_indices")


def _calls_tuple_returning_torch(forward: MethodSpec, imports: ImportMap) -> bool:
    """Whether forward calls a torch function that may return a tuple (see above)."""
    assert forward.node is not None
    found = False

    class _Calls(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            name = dotted_name(node.func)
            qualified = imports.resolve(name) if name else None
            short = qualified.rsplit(".", 1)[-1] if qualified and qualified.startswith("torch.") else ""
            if short in TUPLE_RETURNING or any(part in short for part in TUPLE_RETURNING_PARTS):
                found = True

    traverse.visit(forward.node, _Calls())
    return found


def _n_outputs(function: FunctionSpec, ctx: FunctionContext) -> int | None:
    """N_out, but unknown when one output was inferred from a torch call that may
    return a tuple, or when that can't be checked (forward parsed elsewhere)."""
    n_outputs = function.n_outputs
    forward = function.method("forward")
    if n_outputs is None or forward is None:
        return None
    if all(r.shape == "tuple" for r in forward.returns):
        return n_outputs
    if forward.node is None or ctx.unit(forward) is None:
        return None
    return None if _calls_tuple_returning_torch(forward, ctx.analysis.imports) else n_outputs


class BackwardArity(Rule):
    """Checks that ``backward`` (or ``vjp``) accepts one gradient per forward output:
    with the output count known (every forward ``return`` is a tuple literal of the
    same length, or a single tensor), the grad parameters after ctx must not require
    more arguments than there are outputs, nor accept fewer.  Outputs passed to
    ``mark_non_differentiable`` and non-tensor outputs still get an argument
    (``None``).  With ``boxed_grads_call = True`` the grads arrive as one list, so
    backward must take exactly ``(ctx, grads)``.  Signatures with ``*args`` are skipped."""

    code = "AGL006"
    title = "backward arity does not match the number of forward outputs"
    severity = Severity.ERROR
    why = (
        "Too few parameters: `TypeError: F.backward() takes 2 positional arguments but 3 were "
        "given`. Too many: `TypeError: F.backward() missing 1 required positional argument: "
        "'g2'`. With `boxed_grads_call = True` and `(ctx, g1, g2)`: the same `missing 1 required "
        "positional argument: 'g2'`."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        for name in ("backward", "vjp"):
            method = function.methods.get(name)
            if method is None or method.has_var_positional:
                continue
            grads = method.positional[1:]
            required = sum(1 for p in grads if p.is_required_positional)
            boxed = function.attribute("boxed_grads_call")
            if boxed is not None and boxed.text not in ("True", "False"):
                continue  # the calling convention is unknown
            if function.attribute_is_true("boxed_grads_call"):
                if required > 1 or not grads:
                    yield Report(
                        method.position,
                        f"{function.name}.{name} takes {plural(len(grads), 'gradient parameter')}"
                        f"{'' if required == len(grads) else f' ({required} required)'}, but "
                        "boxed_grads_call = True passes all gradients as one list: use "
                        f"{name}(ctx, grads)",
                    )
                continue
            n_outputs = _n_outputs(function, ctx)
            if n_outputs is None:
                continue
            if required > n_outputs:
                yield Report(
                    method.position,
                    f"{function.name}.{name} requires {plural(required, 'gradient')}, but "
                    f"forward returns {plural(n_outputs, 'output')}",
                )
            elif len(grads) < n_outputs:
                yield Report(
                    method.position,
                    f"{function.name}.{name} takes {plural(len(grads), 'gradient')}, but "
                    f"forward returns {plural(n_outputs, 'output')} and each gets one "
                    "(None for non-differentiable ones)",
                )

    VALID = [
        Valid(
            """
            import torch

            class Split(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    idx = x.argmax()
                    ctx.mark_non_differentiable(idx)
                    return x * 2, idx

                @staticmethod
                def backward(ctx, g_out, g_idx):
                    return g_out * 2
            """
        ),
        # Trap 3: *grad_outputs accepts any number of gradients.
        Valid(
            """
            import torch

            class Pair(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2, x * 3

                @staticmethod
                def backward(ctx, *grad_outputs):
                    return grad_outputs[0] * 2 + grad_outputs[1] * 3
            """
        ),
        # Trap 4: outputs that differ per branch make the count unknown; a
        # defaulted parameter can take an optional output's gradient.
        Valid(
            """
            import torch

            class Maybe(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, with_state):
                    if with_state:
                        return x * 2, x.sum()
                    return x * 2

                @staticmethod
                def backward(ctx, grad, g_state=None):
                    return grad * 2, None
            """
        ),
        # Trap 4: a torch call that returns a tuple is not one output.
        Valid(
            """
            import torch

            class Sort(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    out = torch.sort(x)
                    return out

                @staticmethod
                def backward(ctx, g_values, g_indices):
                    return g_values
            """
        ),
        # Trap 5: forward in the base class, backward in the subclass; boxed grads.
        Valid(
            """
            import torch

            class Base(torch.autograd.Function):
                @staticmethod
                def forward(x, y):
                    return x + y, x - y

                @staticmethod
                def setup_context(ctx, inputs, output):
                    pass

            class Sub(Base):
                @staticmethod
                def backward(ctx, g_sum, g_diff):
                    return g_sum + g_diff, g_sum - g_diff

            class Boxed(Base):
                boxed_grads_call = True

                @staticmethod
                def backward(ctx, grads):
                    g_sum, g_diff = grads
                    grads.clear()
                    return g_sum + g_diff, g_sum - g_diff
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class Pair(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2, x * 3

                @staticmethod
                def backward(ctx, grad):
                    return grad * 2
            """,
            line=9,
            message="Pair.backward takes 1 gradient, but forward returns 2 outputs",
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
                def backward(ctx, grad, g2):
                    (x,) = ctx.saved_tensors
                    return 2 * x * grad
            """,
            line=10,
            message="Square.backward requires 2 gradients, but forward returns 1 output",
        ),
        # mark_non_differentiable does not remove the output's gradient argument.
        Invalid(
            """
            from torch.autograd import Function

            class ArgMax(Function):
                @staticmethod
                def forward(ctx, x):
                    idx = x.argmax()
                    ctx.mark_non_differentiable(idx)
                    return x.max(), idx

                @staticmethod
                def backward(ctx, grad):
                    return grad
            """,
            line=11,
            message="forward returns 2 outputs",
        ),
        Invalid(
            """
            import torch

            class Boxed(torch.autograd.Function):
                boxed_grads_call = True

                @staticmethod
                def forward(ctx, x):
                    return x * 2, x * 3

                @staticmethod
                def backward(ctx, g1, g2):
                    return g1 * 2 + g2 * 3
            """,
            line=11,
            message="boxed_grads_call = True passes all gradients as one list",
        ),
    ]
