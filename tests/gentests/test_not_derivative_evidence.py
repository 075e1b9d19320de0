"""Run-time evidence that backward is not the derivative, the gradient contract, degenerate inputs,
readable failures and the input kinds the harness makes (issue 25)."""

from __future__ import annotations

import pytest
from pytest_process import run_pytest

torch = pytest.importorskip("torch")

from autograd_lint.gentests import harness  # noqa: E402
from autograd_lint.gentests.harness import Case, any_tensor, tensor  # noqa: E402


class Spike(torch.autograd.Function):
    """A spiking neuron: a step forward, a smooth surrogate backward (not the derivative)."""

    @staticmethod
    def forward(ctx, mem):
        ctx.save_for_backward(mem)
        return (mem > 0).float().to(mem.dtype)

    @staticmethod
    def backward(ctx, grad):
        (mem,) = ctx.saved_tensors
        s = torch.sigmoid(mem)
        return grad * s * (1 - s)


class SpikeAndPotential(torch.autograd.Function):
    """Two outputs: the spike (a surrogate) and the potential itself (a true derivative)."""

    @staticmethod
    def forward(ctx, mem):
        ctx.save_for_backward(mem)
        return (mem > 0).to(mem.dtype), mem * 2

    @staticmethod
    def backward(ctx, grad_spike, grad_mem):
        (mem,) = ctx.saved_tensors
        return grad_spike * torch.sigmoid(mem) + 2 * grad_mem


class WrongPotential(SpikeAndPotential):
    @staticmethod
    def backward(ctx, grad_spike, grad_mem):
        (mem,) = ctx.saved_tensors
        return grad_spike * torch.sigmoid(mem) + 3 * grad_mem


class FarThreshold(torch.autograd.Function):
    """A surrogate that is zero wherever the inputs are drawn: both Jacobians are zero."""

    @staticmethod
    def forward(ctx, mem):
        ctx.save_for_backward(mem)
        return (mem > 100).to(mem.dtype)

    @staticmethod
    def backward(ctx, grad):
        (mem,) = ctx.saved_tensors
        return grad * ((mem - 100).abs() < 0.5).to(grad.dtype)


class SampledGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2 * torch.bernoulli(torch.full_like(grad, 0.5)) * 2


class WritesGradOutput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return (x > 0).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad.mul_(2)  # noqa: AGL007 - the bug the contract check must catch


class OneGradientForTwo(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        return (x + y > 0).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad  # noqa: AGL001 - the bug the contract check must catch


class Downcast(torch.autograd.Function):
    """forward returns float32 for float64 inputs; backward is right."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x * x).float()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad.to(x.dtype)


class SumOfNine(torch.autograd.Function):
    @staticmethod
    def forward(ctx, *tensors):
        return sum(tensors[1:], tensors[0] * 1)

    @staticmethod
    def backward(ctx, grad):
        return (grad,) * 9


def test_a_locally_constant_forward_with_a_gradient_is_an_expected_failure_not_a_failure() -> None:
    with pytest.raises(pytest.xfail.Exception, match="locally constant at output.s. #0") as caught:
        harness.check_gradcheck(Spike, Case((any_tensor(),)))
    assert "gradient contract holds" in str(caught.value)
    assert "# autograd-lint: surrogate-gradient" in str(caught.value)


def test_the_other_outputs_are_still_compared() -> None:
    with pytest.raises(pytest.xfail.Exception, match="the other outputs agree"):
        harness.check_gradcheck(SpikeAndPotential, Case((any_tensor(),)))
    with pytest.raises(pytest.fail.Exception, match="the other outputs disagree with finite differences too"):
        harness.check_gradcheck(WrongPotential, Case((any_tensor(),)))


def test_zero_jacobians_on_both_sides_are_reported_as_degenerate_inputs_not_a_pass() -> None:
    with pytest.raises(pytest.skip.Exception, match="degenerate inputs: on 3 draw"):
        harness.check_gradcheck(FarThreshold, Case((any_tensor(),)))


def test_a_random_backward_is_recognised_at_run_time() -> None:
    with pytest.raises(pytest.xfail.Exception, match="backward is random"):
        harness.check_gradcheck(SampledGradient, Case((any_tensor(),)))


def test_the_gradient_contract_of_a_surrogate() -> None:
    harness.check_surrogate_gradients(Spike, Case((any_tensor(),)))
    harness.check_surrogate_gradients(SampledGradient, Case((any_tensor(),)), sampled=True)
    with pytest.raises(pytest.fail.Exception, match="(?s)different gradients .* surrogate-gradient sampled"):
        harness.check_surrogate_gradients(SampledGradient, Case((any_tensor(),)))
    with pytest.raises(pytest.fail.Exception, match="wrote into the gradient of output #0"):
        harness.check_surrogate_gradients(WritesGradOutput, Case((any_tensor(),)))
    with pytest.raises(pytest.fail.Exception, match="(?s)incorrect number of gradients .* no input fixes this"):
        harness.check_surrogate_gradients(OneGradientForTwo, Case((any_tensor(), any_tensor())))


def test_every_failure_opens_with_the_function_the_check_the_case_and_the_seed() -> None:
    with pytest.raises(pytest.fail.Exception) as caught:
        harness.check_surrogate_gradients(WritesGradOutput, Case((any_tensor(),)))
    assert str(caught.value).startswith("FAILED WritesGradOutput · surrogate_gradients · case ")
    assert "seed 0" in str(caught.value).splitlines()[0]


def test_a_bare_error_gets_the_header_and_its_cause() -> None:
    with pytest.raises(pytest.fail.Exception) as caught:
        harness.check_gradcheck(OneGradientForTwo, Case((tensor((3,)), tensor((3,)))))
    message = str(caught.value)
    assert message.startswith("FAILED OneGradientForTwo · gradcheck")
    assert "wrong number of gradients; no input fixes this" in message


def test_a_forward_that_casts_to_float32_is_compared_at_float32_precision() -> None:
    harness.check_gradcheck(Downcast, Case((tensor((20, 5)),)))  # > 64 elements: fast mode would raise
    # Its double backward too: the output gradients gradgradcheck perturbs are float32 (it failed, 1.0133 for 1).
    harness.check_gradgradcheck(Downcast, Case((tensor((4, 3)),)))


def test_any_number_of_searched_tensors() -> None:
    args = harness.make_args(SumOfNine, Case(tuple(any_tensor() for _ in range(9))))
    assert len(args) == 9


class SlowForward(torch.autograd.Function):
    """Each forward sleeps: the search alone outlasts a short limit."""

    @staticmethod
    def forward(ctx, x):
        import time

        time.sleep(0.3)
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


def test_the_time_limit_bounds_every_check_search_included(monkeypatch) -> None:
    monkeypatch.setenv(harness.CHECK_SECONDS_VARIABLE, "0.5")
    with pytest.raises(pytest.skip.Exception, match="surrogate_gradients did not finish within 0.5 s"):
        harness.check_surrogate_gradients(SlowForward, Case((any_tensor(),)))


def test_the_suite_reports_checks_cut_off(pytester: pytest.Pytester, monkeypatch) -> None:
    pytester.makepyfile(test_slow="""
        import time

        import torch
        from autograd_lint.gentests.harness import Case, any_tensor, check_gradcheck


        class SlowForward(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                time.sleep(0.3)
                return x * 2

            @staticmethod
            def backward(ctx, grad):
                return grad * 2


        def test_gradcheck():
            check_gradcheck(SlowForward, Case((any_tensor(),)))
    """)
    monkeypatch.setenv(harness.CHECK_SECONDS_VARIABLE, "0.5")
    result = run_pytest(pytester, "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*autograd-lint: 1 generated check(s) cut off by the time limit*"])


def test_a_recorded_case_keeps_its_no_grad_positions_non_tensors_among_them() -> None:
    from autograd_lint.gentests import pickled
    from autograd_lint.gentests.harness import recorded

    mask = torch.ones(3, dtype=torch.float64)
    text = pickled.dumps((torch.ones(3, dtype=torch.float64), mask, torch.device("cpu")))
    args = harness.make_args(Masked, recorded(text, no_grad=(1, 2)))
    assert args[0].requires_grad and not args[1].requires_grad and args[2] == torch.device("cpu")


class Masked(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, mask, device):
        ctx.save_for_backward(mask)
        return x * mask

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        return grad * mask, None, None


class TangentExp(torch.autograd.Function):
    """Saves its output and returns twice the derivative (a gradient by another convention, as pypose's)."""

    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return 2 * grad * y


class LooseDouble(torch.autograd.Function):
    """A right first derivative from a value forward computed without history: a wrong double backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(2 * x.detach())
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (twice,) = ctx.saved_tensors
        return grad * twice


def test_a_double_backward_failure_that_follows_from_the_first_derivative_names_the_declaration() -> None:
    with pytest.raises(pytest.fail.Exception) as failure:
        harness.check_gradgradcheck(TangentExp, Case((tensor((3,)),)))
    assert "first-order: backward differs" in str(failure.value)
    assert "# autograd-lint: surrogate-gradient" in str(failure.value)
    # A first derivative that is right: the double backward is wrong on its own, and said so alone.
    with pytest.raises(pytest.fail.Exception) as failure:
        harness.check_gradgradcheck(LooseDouble, Case((tensor((3,)),)))
    assert "first-order" not in str(failure.value) and "@once_differentiable" in str(failure.value)


def test_a_first_order_comparison_cut_off_by_the_time_limit_still_names_the_declaration() -> None:
    # pypose's recorded 20x8 cases on a loaded machine: gradgradcheck failed, then the limit stopped the
    # first-order comparison; the line says it was not compared, and which declaration applies if it differs.
    import time

    from autograd_lint.gentests.runtime import budget, gradchecks

    x = torch.rand(3, dtype=torch.float64, requires_grad=True)
    previous = budget._deadline[0]
    budget._deadline[0] = time.monotonic() - 1
    try:
        line = gradchecks._first_order_differs(lambda x: _over_budget_exp(x), (x,), 1e-5, 1e-3, {})
    finally:
        budget._deadline[0] = previous
    assert line.startswith("first-order: not compared") and "# autograd-lint: surrogate-gradient" in line


def _over_budget_exp(x):
    from autograd_lint.gentests.runtime.budget import stop_if_over_budget

    stop_if_over_budget()  # as every call of a Function under the harness does
    return TangentExp.apply(x)


class Tolerance(torch.autograd.Function):
    """snntorch's SpikeTime.Tolerance: elements within 0.5 of the target become the target; every gradient passes."""

    @staticmethod
    def forward(ctx, x):
        return torch.where((x - 1.0).abs() < 0.5, torch.ones_like(x), x)

    @staticmethod
    def backward(ctx, grad):
        return grad.clone()


class LeakyWrong(torch.autograd.Function):
    """The same overwrite, and a backward wrong where forward moves too: no evidence excuses it."""

    @staticmethod
    def forward(ctx, x):
        return torch.where((x - 1.0).abs() < 0.5, torch.ones_like(x), 3 * x)

    @staticmethod
    def backward(ctx, grad):
        return grad.clone()


def test_elements_where_forward_is_locally_constant_are_named_in_the_failure_never_excused() -> None:
    # A straight-through estimator by design and a clamp whose backward forgets its mask look the same
    # at run time: the failure stands, says where backward is wrong, and names the declaration.
    case = Case((tensor((4,), values=(0.9, 1.2, -1.0, 2.0)),))
    with pytest.raises(pytest.fail.Exception) as failure:
        harness.check_gradcheck(Tolerance, case)
    message = str(failure.value)
    assert "locally constant at 2 of 4 output elements" in message
    assert "every other element agrees with finite differences" in message
    assert "# autograd-lint: surrogate-gradient" in message
    with pytest.raises(pytest.fail.Exception, match="the other elements disagree with finite differences too"):
        harness.check_gradcheck(LeakyWrong, case)


def _rare_flip() -> type:
    """A fresh class (the search is cached per class) like norse's ``CircDist``: forward samples a
    Bernoulli whose draws seldom change the output, so two draws are often the same."""

    class RareFlip(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return torch.bernoulli(torch.full_like(x, 0.97)) * x

        @staticmethod
        def backward(ctx, grad):
            return grad

    return RareFlip


def _outcome(function: type) -> str:
    try:
        harness.check_gradcheck(function, Case((any_tensor(),)))
    except (pytest.skip.Exception, pytest.xfail.Exception, pytest.fail.Exception) as outcome:
        return f"{type(outcome).__name__}: {outcome}"
    return "passed"


def test_a_random_forward_gets_the_same_verdict_whichever_tests_ran_before() -> None:
    outcomes = set()
    for state in range(6):
        torch.manual_seed(state)  # what the tests run before left in torch's generator
        outcomes.add(_outcome(_rare_flip()))
    assert len(outcomes) == 1, outcomes
    assert "forward gives different outputs for the same inputs under seeds 0 and " in outcomes.pop()


class WrongDowncast(torch.autograd.Function):
    """forward returns float32 for float64 inputs; backward forgets the factor 2."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x * x).float()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return x * grad.to(x.dtype)


def test_a_wrong_cast_says_whether_float32_resolves_the_mismatch() -> None:
    # The float32 verdict raised "got multiple values for keyword argument 'eps'" (spikingjelly's DSR neurons).
    with pytest.raises(pytest.fail.Exception, match=r"in float32 \(eps=0.001, atol=0.001, rtol=0.01\): fails too"):
        harness.check_gradcheck(WrongDowncast, Case((tensor((4, 3)),)))


class BernoulliSpikes(torch.autograd.Function):
    """spikingjelly's poisson_pass, with a saved sample: Bernoulli spikes forward, the gradient passed where
    a spike was drawn. Its forward is random (gradcheck can't judge it); its gradient contract holds."""

    @staticmethod
    def forward(ctx, x):
        spikes = torch.bernoulli(x.clamp(0, 1))
        ctx.save_for_backward(spikes)
        return spikes

    @staticmethod
    def backward(ctx, grad):
        (spikes,) = ctx.saved_tensors
        return grad * (0.5 + spikes)


def test_a_random_forward_still_gets_the_gradient_contract() -> None:
    case = Case((tensor((3, 4)),))
    with pytest.raises(pytest.skip.Exception, match="forward gives different outputs"):
        harness.check_gradcheck(BernoulliSpikes, case)
    # Forward draws the same sample on both backward calls of the contract: backward is judged alone.
    harness.check_surrogate_gradients(BernoulliSpikes, case)
