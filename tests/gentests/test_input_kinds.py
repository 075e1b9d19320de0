"""The kind of input gen-tests makes for a parameter, from how forward uses it (no torch)."""

from __future__ import annotations

import textwrap

from autograd_lint.gentests.inputs import InputCase, ScalarInput, TensorInput, choose_inputs
from autograd_lint.gentests.literals import default_sources
from autograd_lint.gentests.param_uses import parameter_uses
from autograd_lint.model.analysis import analyze
from autograd_lint.model.source import SourceFile
from autograd_lint.settings import Settings

SOURCE = '''
import torch


class Reduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, levels, mask, alpha):
        d = dim.item()
        ctx.save_for_backward(mask)
        ctx.d, ctx.alpha = d, alpha
        return x.sum(d) * levels.to(x.dtype).sum() * alpha

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        return grad, None, None, None, None
'''


def _spec():
    text = textwrap.dedent(SOURCE)
    (spec,) = analyze(SourceFile("m.py", text, "m"), {}, Settings()).functions
    return spec, text.splitlines()


def test_a_dimension_read_with_item_is_a_0d_integer_tensor_and_a_tensor_used_as_one_is_a_tensor() -> None:
    spec, lines = _spec()
    uses = parameter_uses(spec, lines)
    assert uses == {"x": "tensor", "dim": "integer", "levels": "tensor"}
    (case,) = choose_inputs(spec, [], [], default_sources(spec), uses).cases
    x, dim, levels, mask, alpha = case.args
    assert x == TensorInput(None)
    assert dim == TensorInput((), "int64", requires_grad=False, values=(1,))
    assert levels == TensorInput(None, requires_grad=False)
    assert mask == TensorInput(None, requires_grad=False)  # saved for backward, which gives it None
    assert isinstance(alpha, ScalarInput)  # no evidence it is a tensor


def test_recorded_tensors_backward_never_differentiates_do_not_require_grad() -> None:
    spec, lines = _spec()
    recorded = InputCase((TensorInput((3, 4)), TensorInput((), "int64", requires_grad=False, values=(1,)),
                          TensorInput((2,)), TensorInput((3, 4)), TensorInput(())))
    (case,) = choose_inputs(spec, [recorded], [], default_sources(spec)).cases
    assert [arg.requires_grad for arg in case.args] == [True, False, False, False, False]
    pickled = InputCase(recorded.args, pickled="abc")
    (case,) = choose_inputs(spec, [pickled], [], default_sources(spec)).cases
    assert case.no_grad == (1, 2, 3, 4)


def test_a_dimension_saved_for_backward_and_read_there_with_item_is_a_0d_integer_tensor() -> None:
    # torch-struct's _SparseMaxGrad: `dim` is saved in forward and read with .item() in backward.
    text = textwrap.dedent('''
        import torch


        class SparseMaxGrad(torch.autograd.Function):
            @staticmethod
            def forward(ctx, w_star, dim):
                ctx.save_for_backward(w_star, dim)
                return w_star

            @staticmethod
            def backward(ctx, grad_output):
                w_star, dim = ctx.saved_tensors
                return grad_output * w_star.sum(dim.item(), keepdim=True), None
    ''')
    (spec,) = analyze(SourceFile("m.py", text, "m"), {}, Settings()).functions
    uses = parameter_uses(spec, text.splitlines())
    assert uses["dim"] == "integer"
    (case,) = choose_inputs(spec, [], [], default_sources(spec), uses).cases
    assert case.args[1] == TensorInput((), "int64", requires_grad=False, values=(1,))
