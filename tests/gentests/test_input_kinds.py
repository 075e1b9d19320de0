"""The kind of input gen-tests makes for a parameter, from how forward uses it (no torch)."""

from __future__ import annotations

import textwrap

from autograd_lint.gentests.inputs import InputCase, ScalarInput, TensorInput, ValueInput, choose_inputs
from autograd_lint.gentests.literals import default_sources
from autograd_lint.gentests.param_uses import parameter_ranks, parameter_sizes, parameter_uses
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
    # Unpacked with a star, the saved tensors are not followed by name (and nothing fails).
    starred = text.replace("w_star, dim = ctx.saved_tensors", "w_star, *dim = ctx.saved_tensors")
    (spec,) = analyze(SourceFile("m.py", starred, "m"), {}, Settings()).functions
    assert "dim" not in parameter_uses(spec, starred.splitlines())
    # A saved expression is no parameter; the parameters saved beside it still are.
    expression = text.replace("ctx.save_for_backward(w_star, dim)", "ctx.save_for_backward(w_star * 1, dim)")
    (spec,) = analyze(SourceFile("m.py", expression, "m"), {}, Settings()).functions
    assert parameter_uses(spec, expression.splitlines())["dim"] == "integer"


def test_a_tensor_used_as_one_in_forward_is_an_integer_when_backward_reads_it_as_a_number() -> None:
    # `scale.to(...)` in forward says only "a tensor"; `.item()` in backward says which: a 0-d
    # integer tensor (an `.item()` of a larger tensor raises).
    text = textwrap.dedent('''
        import torch


        class Repeat(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, times):
                ctx.save_for_backward(times)
                return x * times.to(x.dtype)

            @staticmethod
            def backward(ctx, grad_output):
                (times,) = ctx.saved_tensors
                return grad_output * times.item(), None
    ''')
    (spec,) = analyze(SourceFile("m.py", text, "m"), {}, Settings()).functions
    assert parameter_uses(spec, text.splitlines())["times"] == "integer"


FILTER_BANK = '''
import torch


def helper(x, h, dim):
    return x


class Analysis(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, h0, h1, mode):
        batch, channels, rows, columns = x.shape
        h0 = h0[:, :, None, :]
        ctx.save_for_backward(h0, h1)
        low = helper(x, h0, dim=3)
        return low * h1.shape[-2:][0]

    @staticmethod
    def backward(ctx, grad):
        return (grad,) + (None,) * 3


class Bands(torch.autograd.Function):
    @staticmethod
    def forward(ctx, low, highs):
        lh, hl, hh = torch.unbind(highs, dim=2)
        return low + lh + hl + hh + low.size(1)

    @staticmethod
    def backward(ctx, grad):
        return grad, None
'''


def _specs(source: str):
    text = textwrap.dedent(source)
    return analyze(SourceFile("m.py", text, "m"), {}, Settings()).functions, text.splitlines()


def test_forward_s_indexing_unpacking_and_dimensions_give_a_searched_tensor_its_least_rank() -> None:
    # pytorch-wavelets: `batch, ch, r, c = x.shape`, `h0[:, :, None, :]`, `torch.unbind(highs, dim=2)`.
    (analysis, bands), lines = _specs(FILTER_BANK)
    ranks = parameter_ranks(analysis, lines)
    # h0's evidence is the index before `h0` is assigned again (3 elements besides None), not the new h0.
    assert ranks == {"x": 4, "h0": 3, "h1": 2}
    assert parameter_ranks(bands, lines) == {"low": 2, "highs": 3}
    (case,) = choose_inputs(analysis, [], [], default_sources(analysis), parameter_uses(analysis, lines),
                            ranks).cases
    x, h0, h1, mode = case.args
    assert x == TensorInput(None, rank=4)
    # Indexed with a slice and None: a tensor, though backward never differentiates it ((grad,) + (None,) * 3).
    assert h0 == TensorInput(None, requires_grad=False, rank=3)
    assert h1 == TensorInput(None, requires_grad=False, rank=2)
    assert isinstance(mode, ScalarInput)


def test_a_tensor_unbound_into_named_parts_has_that_many_elements_along_the_dimension() -> None:
    # pytorch-wavelets' SFB2D: `lh, hl, hh = torch.unbind(highs, dim=2)`: highs.shape[2] is 3.
    (analysis, bands), lines = _specs(FILTER_BANK)
    assert parameter_sizes(bands, lines) == {"highs": ((2, 3),)}
    assert parameter_sizes(analysis, lines) == {}
    text = "import torch\nclass F(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, z, w):\n" \
           "        re, im = z.unbind(-1)\n        w = w * 2\n        a, b = w.unbind(0)\n        return re + im\n" \
           "    @staticmethod\n    def backward(ctx, grad):\n        return grad, grad\n"
    (spec,), lines = _specs(text)
    # w's unbinding reads the new w, not the argument.
    assert parameter_sizes(spec, lines) == {"z": ((-1, 2),)}
    (case,) = choose_inputs(spec, [], [], default_sources(spec), parameter_uses(spec, lines),
                            parameter_ranks(spec, lines), parameter_sizes(spec, lines)).cases
    assert case.args[0] == TensorInput(None, sizes=((-1, 2),))


def test_a_gradient_tuple_built_from_a_repeated_none_tuple_marks_those_inputs_never_differentiated() -> None:
    from autograd_lint.gentests.inputs import never_differentiated

    (analysis, _), _ = _specs(FILTER_BANK)
    assert never_differentiated(analysis) == frozenset({1, 2, 3})


THRESHOLD = '''
import torch


class Threshold(torch.autograd.Function):
    """spikingjelly's DSRIFFunction: a threshold with a number for default, given a gradient by backward."""

    @staticmethod
    def forward(ctx, inp, T=10, v_threshold=1.0):
        ctx.save_for_backward(inp, torch.as_tensor(v_threshold))
        return inp * v_threshold

    @staticmethod
    def backward(ctx, grad_output):
        inp, v_threshold = ctx.saved_tensors
        v_threshold_grad = torch.sum(grad_output * inp)
        return grad_output * v_threshold, None, v_threshold_grad
'''


def test_a_number_default_backward_gives_a_gradient_is_a_0d_tensor_of_that_value() -> None:
    text = textwrap.dedent(THRESHOLD)
    (spec,) = analyze(SourceFile("m.py", text, "m"), {}, Settings()).functions
    (case,) = choose_inputs(spec, [], [], default_sources(spec)).cases
    inp, steps, threshold = case.args
    assert inp == TensorInput(None)
    assert steps == ValueInput("10")  # backward gives it None: the default stays
    assert threshold == TensorInput((), values=(1.0,))


PASSED_THROUGH = '''
import torch


class PassThrough(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, n: int, tag):
        return x.clone(), n, tag

    @staticmethod
    def backward(ctx, grad, grad_n, grad_tag):
        return (grad,) + (None,) * 2
'''


def test_an_input_forward_returns_as_it_is_is_a_tensor_unless_its_annotation_says_otherwise() -> None:
    from autograd_lint.gentests.inputs import parameter_kinds
    from autograd_lint.model.spec import Kind

    (spec,), _ = _specs(PASSED_THROUGH)
    kinds = parameter_kinds(spec)
    assert (kinds["x"], kinds["n"], kinds["tag"]) == (Kind.TENSOR, Kind.NON_TENSOR, Kind.TENSOR)


def test_a_gradient_tuple_longer_than_the_model_follows_still_marks_the_inputs_never_differentiated() -> None:
    from autograd_lint.gentests.inputs import never_differentiated

    # The model spells out at most 64 elements (autograd_lint/model/sequences.py); 71 here.
    (spec,), _ = _specs(PASSED_THROUGH.replace("(None,) * 2", "(None,) * 70"))
    assert spec.backward_method.returns[0].elements is None
    assert never_differentiated(spec) == frozenset(range(1, 71))


def test_only_a_floating_input_of_two_dimensions_none_of_size_1_gets_the_non_contiguous_gradcheck() -> None:
    from autograd_lint.gentests.checks import Check, checks_for
    from autograd_lint.gentests.inputs import FunctionInputs, Origin

    (spec,), _ = _specs(SOURCE)

    def non_contiguous(*args: object) -> bool:
        inputs = FunctionInputs(Origin.STATIC, (InputCase(args),))  # type: ignore[arg-type]
        return Check.NON_CONTIGUOUS in checks_for(spec, inputs)

    vector, number = TensorInput((5,)), ValueInput("0")
    assert non_contiguous(TensorInput((3, 4)), number)
    assert not non_contiguous(vector, number)  # after a vector, a number: no matrix
    assert not non_contiguous(vector, TensorInput((3, 4), dtype="int64"))  # a matrix of indices: not perturbed
    assert not non_contiguous(vector, TensorInput((3, 1)))
