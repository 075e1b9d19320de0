"""The run-time side of generated tests: searching inputs and the checks themselves."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

from autograd_lint.gentests import harness  # noqa: E402
from autograd_lint.gentests.runtime import arguments, budget  # noqa: E402
from autograd_lint.gentests.harness import Case, any_scalar, any_tensor, tensor  # noqa: E402


class MatrixVector(torch.autograd.Function):
    @staticmethod
    def forward(ctx, m, v):
        ctx.save_for_backward(m, v)
        return m @ v

    @staticmethod
    def backward(ctx, grad):
        m, v = ctx.saved_tensors
        return torch.outer(grad, v), m.t() @ grad


class Log(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.log()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad / x


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        if x.shape != (7, 7, 7):
            raise ValueError("only 7x7x7")
        return x**3

    @staticmethod
    def backward(ctx, grad):
        return grad


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x * factor

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.factor, None


class GradForFactor(torch.autograd.Function):
    """A backward that returns a gradient for its non-tensor ``factor``."""

    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x * factor

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.factor, grad.sum()


class NotOnceDifferentiable(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


def test_the_search_finds_the_shapes_the_forward_accepts() -> None:
    m, v = harness.make_args(MatrixVector, Case((any_tensor(), any_tensor())))
    assert (m.shape, v.shape) == ((3, 4), (4,))
    assert m.dtype == torch.float64 and m.requires_grad
    harness.check_gradcheck(MatrixVector, Case((any_tensor(), any_tensor())))


def test_values_move_to_a_domain_where_the_forward_is_finite() -> None:
    (x,) = harness.make_args(Log, Case((tensor((5,)),)))
    assert bool((x > 0).all())
    harness.check_gradgradcheck(Log, Case((tensor((5,)),)))


def test_scalars_are_searched_too() -> None:
    x, factor = harness.make_args(Scale, Case((any_tensor(), any_scalar())))
    assert factor == 2


def test_no_accepted_candidate_skips_with_the_way_to_record() -> None:
    with pytest.raises(pytest.skip.Exception, match="pytest --autograd-record"):
        harness.check_gradcheck(Cube, Case((any_tensor(),)))


def test_a_gradient_for_a_non_tensor_input_fails() -> None:
    with pytest.raises(pytest.fail.Exception, match=r"(?s)^FAILED GradForFactor · non_tensor_grads_are_none · .*"
                                                    r"non-tensor input\(s\) at position\(s\) \[1\]"):
        harness.check_non_tensor_grads_are_none(GradForFactor, Case((tensor((3,)), 2.0)))


def test_a_differentiable_backward_claimed_once_differentiable_fails() -> None:
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        harness.check_once_differentiable(NotOnceDifferentiable, Case((tensor((3,)),)))


def test_cuda_cases_are_marked_to_skip_without_cuda() -> None:
    mark = harness.requires_device("cuda:0")
    assert mark.args == (not torch.cuda.is_available(),)
    assert mark.kwargs["reason"] == "case recorded on cuda:0; cuda is not available here"
    assert harness.requires_device("cpu").args == (False,)


class Affine(torch.autograd.Function):
    """x @ w.T + b, whose backward only works for a vector bias."""

    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        return x @ w.t() + b

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad @ w, grad.t() @ x, grad.sum(0)


def test_a_gradient_shaped_for_another_input_shape_moves_the_search_there() -> None:
    # Searched as a matrix, the bias gets a vector gradient from backward ("returned an invalid
    # gradient at index 2 - got [3] but expected shape compatible with [3, 3]"): the search tries
    # the bias at the gradient's shape, forward and backward agree there, and the check runs.
    harness.check_gradcheck(Affine, Case((any_tensor(), any_tensor(), any_tensor())))
    harness.check_gradcheck(Affine, Case((tensor((5, 3)), tensor((2, 3)), tensor((2,)))))


class ReshapedAffine(torch.autograd.Function):
    """x @ w.T + b, whose backward reshapes the bias' gradient to the bias' shape: torch refuses
    that for every matrix bias the search tries, and no gradient says which shape to try."""

    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        ctx.bias_shape = b.shape
        return x @ w.t() + b

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad @ w, grad.t() @ x, grad.sum(0).view(ctx.bias_shape)


def test_a_backward_failing_on_every_candidate_is_skipped_with_the_way_to_record() -> None:
    # No input the search can find is one backward is written for (a vector bias): not evidence of
    # a bug, so a skip, and the message says how to record real inputs.
    with pytest.raises(pytest.skip.Exception) as skipped:
        harness.check_gradcheck(ReshapedAffine, Case((any_tensor(), any_tensor(), any_tensor())))
    message = str(skipped.value)
    assert message.startswith("ReshapedAffine.backward raised RuntimeError: shape '[3, 3]' is invalid for input of size 3")
    assert "forward accepted (first: (3, 3), (3, 3), (3, 3))" in message and "pytest --autograd-record" in message
    harness.check_gradcheck(ReshapedAffine, Case((tensor((5, 3)), tensor((2, 3)), tensor((2,)))))


def test_a_recorded_case_replays_its_values_and_layout() -> None:
    case = Case((tensor((2, 2), dtype="float64", contiguous=False, values=(1.0, 2.0, 3.0, 4.0)),))
    (x,) = harness.make_args(Log, case)
    assert x.tolist() == [[1.0, 2.0], [3.0, 4.0]] and not x.is_contiguous() and x.requires_grad
    harness.check_gradcheck(Log, case)


@pytest.mark.parametrize("stats, holds", [
    ({"symmetric": True, "positive_definite": True, "min": -2.0, "max": 9.0},
     lambda x: bool(torch.linalg.cholesky_ex(x).info == 0)),
    ({"simplex": True, "min": 0.0, "max": 0.4}, lambda x: torch.allclose(x.sum(-1), torch.ones(6, dtype=x.dtype))),
    ({"integral": True, "min": 2.0, "max": 5.0}, lambda x: bool(((x == x.round()) & (x >= 2) & (x <= 5)).all())),
    ({"min": 0.25, "max": 0.75}, lambda x: bool(((x >= 0.25) & (x <= 0.75)).all())),
])
def test_values_of_a_large_recorded_tensor_are_drawn_from_its_statistics(stats: dict, holds) -> None:
    class Identity(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            return grad

    (x,) = harness.make_args(Identity, Case((tensor((6, 6), stats=stats),)))
    assert holds(x.detach())


class CallableOnCtx(torch.autograd.Function):
    """torchdiffeq's pattern: a function passed to forward, kept on ctx, called in backward."""

    @staticmethod
    def forward(ctx, fn, x):
        ctx.fn = fn
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return None, ctx.fn(grad)


def test_a_searched_number_that_backward_calls_is_a_skip_not_a_failure() -> None:
    with pytest.raises(pytest.skip.Exception, match=r"raised TypeError: 'int' object is not callable with numbers "
                                                    r"searched for the argument\(s\) at position\(s\) \[0\]"):
        harness.check_gradcheck(CallableOnCtx, Case((any_scalar(), any_tensor())))


class InplaceInBackward(torch.autograd.Function):
    """exp, whose backward changes in place a tensor autograd saves when it differentiates through backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        e = x.exp()
        result = grad * e
        e.mul_(1.0)
        return result


def test_double_backward_that_raises_fails_with_which_check_the_inputs_and_the_fix() -> None:
    harness.check_gradcheck(InplaceInBackward, Case((tensor((3, 4)),)))
    with pytest.raises(pytest.fail.Exception) as failure:
        harness.check_gradgradcheck(InplaceInBackward, Case((tensor((3, 4)),)))
    header, message = str(failure.value).split("\n", 1)
    assert header == "FAILED InplaceInBackward · gradgradcheck · case ? · seed 0"
    assert message.startswith("InplaceInBackward: gradgradcheck (double backward) raised RuntimeError: one of the "
                              "variables needed for gradient computation has been modified by an inplace operation")
    assert "inputs (float64): #0: tensor (3, 4) float64, requires_grad; seed 0" in message
    assert ("backward itself runs; the error comes from autograd differentiating through backward, which is not "
            "@once_differentiable") in message
    assert "decorate it with @torch.autograd.function.once_differentiable" in message
    assert isinstance(failure.value.__cause__, RuntimeError)


class ScalarInBackward(torch.autograd.Function):
    """x ** 2, whose backward was written for one-element tensors only."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 2

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * float(x)


def test_an_error_of_the_functions_own_code_fails_with_the_line_that_raised() -> None:
    with pytest.raises(pytest.fail.Exception) as failure:
        harness.check_gradcheck(ScalarInBackward, Case((tensor((3, 4)),)))
    header, message = str(failure.value).split("\n", 1)
    assert header == "FAILED ScalarInBackward · gradcheck · case ? · seed 0"
    assert message.startswith("ScalarInBackward: gradcheck raised ValueError: only one element tensors can be "
                              "converted to Python scalars")
    assert f"({__file__}:" in message and ", in backward)" in message
    assert "inputs (float64): #0: tensor (3, 4) float64, requires_grad; seed 0" in message
    assert "once_differentiable" not in message
    assert isinstance(failure.value.__cause__, ValueError)


def _scaled_sine(factor: float) -> type:
    """sin, whose backward is cos scaled by ``factor``."""

    class ScaledSine(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * x.cos() * factor

    return ScaledSine


@pytest.mark.parametrize(("factor", "verdict"), [
    (1.003, "in float32 (eps=0.001, atol=0.001, rtol=0.01): passes (the mismatch is below what float32 resolves)"),
    (1.05, "in float32 (eps=0.001, atol=0.001, rtol=0.01): fails too"),
])
def test_a_gradcheck_failure_says_whether_float32_would_see_it(factor: float, verdict: str) -> None:
    with pytest.raises(pytest.fail.Exception) as failure:
        harness.check_gradcheck(_scaled_sine(factor), Case((tensor((3, 4)),)))
    assert verdict in str(failure.value).splitlines()



class Cast(torch.autograd.Function):
    """torch.autograd._functions.tensor.Type: forward casts to a dtype argument, backward casts back."""

    @staticmethod
    def forward(ctx, x, dtype):
        ctx.input_dtype = x.dtype
        return x.to(dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad.to(ctx.input_dtype), None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_a_floating_dtype_argument_follows_its_tensors_to_float64(dtype) -> None:
    """A recorded or literal `Cast.apply(x, torch.float32)` is checked in float64, as a pickled case is:
    finite differences of a float32 output are no derivative (torch's Type failed gradcheck falsely)."""
    case = Case((tensor((3, 4), values=tuple(float(v) for v in range(1, 13))), dtype))
    assert harness.make_args(Cast, case)[1] == torch.float64
    harness.check_gradcheck(Cast, case)
    harness.check_gradgradcheck(Cast, case)
    assert arguments._promoted(torch.complex64) == torch.complex128
    assert arguments._promoted(torch.int64) == torch.int64  # not a floating dtype: kept


class MaskedGradient(torch.autograd.Function):
    """As torch.masked's Combine: a plain input, a MaskedTensor gradient (masked-out entries mean "no value")."""

    @staticmethod
    def forward(ctx, x):
        ctx.mask = torch.arange(x.numel()).reshape(x.shape) % 2 == 0
        return torch.where(ctx.mask, x, torch.zeros_like(x))

    @staticmethod
    def backward(ctx, grad):
        from torch.masked import as_masked_tensor
        return as_masked_tensor(grad, ctx.mask)


def test_a_tensor_subclass_gradient_skips_the_comparisons_with_the_reason() -> None:
    case = Case((tensor((3, 4)),))
    with warnings.catch_warnings(), pytest.raises(
            pytest.skip.Exception, match="backward returns a MaskedTensor .a tensor subclass. as "
                                         "the gradient of tensor input 0, which gradcheck cannot"):
        warnings.simplefilter("ignore")  # MaskedTensor is a prototype and says so
        harness.check_gradcheck(MaskedGradient, case)
    assert harness.make_args(MaskedGradient, case, compares=False)[0].shape == (3, 4)  # structure checks still run


class SingleUse(torch.autograd.Function):
    """As torch's ScanAutogradOp with its HopPartitionedGraph: an argument that one call consumes."""

    @staticmethod
    def forward(ctx, plan, x):
        ctx.plan = plan
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        if ctx.plan.pop() != "backward":
            raise TypeError("forward() missing 1 required positional argument: 'tangents_1'")
        return None, grad * 2


def test_an_argument_consumed_by_one_call_skips_the_comparisons_with_the_reason() -> None:
    case = Case((["unused", "backward"], tensor((3,))))
    with pytest.raises(pytest.skip.Exception, match="work once, then raise TypeError: forward.. missing 1 .* on a "
                                                    "second call with the same arguments: an argument is consumed"):
        harness.check_gradcheck(SingleUse, case)


class Float32Only(torch.autograd.Function):
    """As torch's FakeQuantPerChannel: forward asserts float32 input; the checks run in float64."""

    @staticmethod
    def forward(ctx, x):
        if x.dtype != torch.float32:
            raise AssertionError(f"Expecting input to have dtype torch.float32, but got dtype: {x.dtype}")
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


def test_a_recorded_case_forward_refuses_skips_with_forwards_error_not_a_request_to_record() -> None:
    case = Case((tensor((3,), values=(1.0, 2.0, 3.0)),))  # a recorded float32 tensor is rendered in float64
    with pytest.raises(pytest.skip.Exception) as skipped:
        harness.check_gradcheck(Float32Only, case)
    message = str(skipped.value)
    assert "forward raised AssertionError: Expecting input to have dtype torch.float32" in message
    assert "in float64" in message and "--autograd-record" not in message


class Slow(torch.autograd.Function):
    """A forward that takes a tenth of a second: gradgradcheck of it runs for seconds."""

    @staticmethod
    def forward(ctx, x):
        import time

        time.sleep(0.1)
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


def test_a_check_over_its_time_budget_is_skipped_as_unfinished_not_failed(monkeypatch) -> None:
    # linear-operator's recorded 50x50 cases: a gradgradcheck ran for hours, and no verdict came.
    monkeypatch.setenv(harness.CHECK_SECONDS_VARIABLE, "0.5")
    case = Case((tensor((3,)),))
    with pytest.raises(pytest.skip.Exception, match=r"Slow: gradcheck did not finish within 0\.5 s on this case; "
                                                    r"its verdict is unknown"):
        harness.check_gradcheck(Slow, case)
    # No deadline is left behind, and without a limit the same check passes.
    assert budget._deadline == [None]
    monkeypatch.setenv(harness.CHECK_SECONDS_VARIABLE, "0")
    harness.check_gradcheck(Slow, case)


class IntoBuffer(torch.autograd.Function):
    """As torch.distributed.nn's reduce_scatter: forward writes its result into an output buffer and returns it."""

    @staticmethod
    def forward(ctx, out, x):
        out.copy_(x * 2)
        return out

    @staticmethod
    def backward(ctx, grad):
        return None, grad * 2


def test_an_output_buffer_is_cloned_at_every_call_so_gradchecks_calls_are_independent() -> None:
    # Without: "Output 0 of IntoBuffer is a view and its base ... has been modified inplace", no bug.
    case = Case((tensor((3,), requires_grad=False), tensor((3,))))
    harness.check_gradcheck(IntoBuffer, case)
    harness.check_gradgradcheck(IntoBuffer, case)


class QueuesCallback(torch.autograd.Function):
    """As FSDP2's RegisterPreBackwardFunction: backward queues a callback for the end of the backward pass."""

    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x * factor

    @staticmethod
    def backward(ctx, grad):
        torch.autograd.Variable._execution_engine.queue_callback(lambda: None)
        return grad * ctx.factor, None


def test_backward_is_called_inside_a_backward_pass_where_it_may_queue_callbacks() -> None:
    # Without: "Final callbacks can only be installed during backward pass", no bug.
    harness.check_non_tensor_grads_are_none(QueuesCallback, Case((tensor((3,)), 2.0)))


def test_a_case_whose_outputs_have_no_grad_fn_skips_the_non_tensor_gradient_check() -> None:
    # As a recorded call whose only tensor is a subclass the replay does not differentiate.
    with pytest.raises(pytest.skip.Exception, match="Scale: no output has a grad_fn on this case's arguments"):
        harness.check_non_tensor_grads_are_none(Scale, Case((tensor((3,), requires_grad=False), 2.0)))


class ScaleByArgmax(torch.autograd.Function):
    """x * (1 + argmax x): not continuous where the max is tied, as a pivoted Cholesky's pivots."""

    @staticmethod
    def forward(ctx, x):
        ctx.factor = 1 + int(x.argmax())
        return x * ctx.factor

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.factor


class ScaleByArgmaxWrong(ScaleByArgmax):
    @staticmethod
    def backward(ctx, grad):
        return grad * (ctx.factor + 1)


def test_a_case_on_a_jump_of_forward_is_skipped_with_the_reason_not_failed() -> None:
    # linear-operator's PivotedCholesky on a recorded 50x50 matrix with tied pivots: the
    # numerical Jacobian was 5e5 (a jump of 1 over 2e-6) against an analytical 0.2.
    tied = Case((tensor((3,), values=(1.0, 1.0, 0.0)),))
    with pytest.raises(pytest.skip.Exception, match="ScaleByArgmax: gradcheck can't judge backward on this case: "
                                                    "forward's output jumps by"):
        harness.check_gradcheck(ScaleByArgmax, tied)
    # Off the tie the same Function passes, and a wrong backward still fails there.
    apart = Case((tensor((3,), values=(1.0, 2.0, 0.0)),))
    harness.check_gradcheck(ScaleByArgmax, apart)
    with pytest.raises(pytest.fail.Exception, match="backward differs from the finite-difference Jacobian"):
        harness.check_gradcheck(ScaleByArgmaxWrong, apart)


class MeanWrong(torch.autograd.Function):
    """mean with a backward off by a factor: its central difference along cancelling signs is rounding."""

    @staticmethod
    def forward(ctx, x):
        ctx.numel = x.numel()
        return x.mean()

    @staticmethod
    def backward(ctx, grad):
        return grad.expand(ctx.numel).reshape(-1) * 2 / ctx.numel


def test_rounding_noise_is_not_taken_for_a_jump() -> None:
    # Random signs of a 4-vector cancel in the mean: both steps then give ~1e-17, which
    # compared as "does not shrink" and skipped the failure of this wrong backward.
    try:
        harness.check_gradcheck(MeanWrong, Case((tensor((4,)),)))
    except pytest.skip.Exception as skipped:
        pytest.fail(f"a wrong backward was skipped, not reported: {skipped}")
    except pytest.fail.Exception as failed:
        assert "backward differs from the finite-difference Jacobian" in str(failed)
    else:
        pytest.fail("a wrong backward passed")
