"""Values the search guesses for inputs backward never differentiates (filters, masks), and the
looser re-run of a failed comparison that names a declaration (issue 25)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from autograd_lint.gentests import harness  # noqa: E402
from autograd_lint.gentests.harness import Case, any_tensor  # noqa: E402

F = torch.nn.functional


def _correlate(x, h):
    """Full cross-correlation of x and h, both flattened: y[i] = sum_k xpad[i + k] h[k]."""
    k = h.numel()
    return F.pad(x.reshape(-1), (k - 1, k - 1)).unfold(0, k, 1) @ h.reshape(-1)


class UnreversedFilter(torch.autograd.Function):
    """pytorch-wavelets' ScatLayerj1_rot_f in small: backward filters with h itself, not its time
    reversal ("these filters are symmetric"): the adjoint only for the symmetric filters its callers pass."""

    @staticmethod
    def forward(ctx, x, h):
        ctx.save_for_backward(h)
        ctx.shape = x.shape
        return _correlate(x, h)

    @staticmethod
    def backward(ctx, grad):
        (h,) = ctx.saved_tensors
        # The adjoint is grad.unfold(0, k, 1) @ h.flip(0).
        return (grad.unfold(0, h.numel(), 1) @ h.reshape(-1)).reshape(ctx.shape), None


class UnreversedFilterOff(UnreversedFilter):
    """The same, and a factor of 2 wrong: wrong for every filter, symmetric ones too."""

    @staticmethod
    def backward(ctx, grad):
        (h,) = ctx.saved_tensors
        return 2 * (grad.unfold(0, h.numel(), 1) @ h.reshape(-1)).reshape(ctx.shape), None


class UntransposedMatrix(torch.autograd.Function):
    """backward applies the constant matrix where its transpose belongs: right for symmetric ones only."""

    @staticmethod
    def forward(ctx, x, m):
        ctx.save_for_backward(m)
        return x @ m

    @staticmethod
    def backward(ctx, grad):
        (m,) = ctx.saved_tensors
        return grad @ m, None


class FirstChannelGain(torch.autograd.Function):
    """Multiplies by a gain broadcast over the data; backward takes the gain's first row only: right for
    a gain of one channel, (1, L), the shape its callers pass, wrong for the data-shaped one the search guesses."""

    @staticmethod
    def forward(ctx, x, gain):
        ctx.save_for_backward(gain)
        return x * gain

    @staticmethod
    def backward(ctx, grad):
        (gain,) = ctx.saved_tensors
        return grad * gain.reshape(-1, gain.shape[-1])[0], None


def test_a_failure_that_passes_with_symmetric_guessed_filters_is_skipped_not_failed() -> None:
    with pytest.raises(pytest.skip.Exception, match=r"(?s)gradcheck fails on the searched inputs but passes when the "
                       r"searched input\(s\) #1, .* are made mirror-symmetric .* no evidence of a bug; record real"):
        harness.check_gradcheck(UnreversedFilter, Case((any_tensor(), any_tensor(requires_grad=False))))
    with pytest.raises(pytest.skip.Exception, match=r"are made symmetric in their last two dimensions"):
        harness.check_gradcheck(UntransposedMatrix, Case((any_tensor(), any_tensor(requires_grad=False))))
    with pytest.raises(pytest.skip.Exception, match=r"are made of one channel"):
        harness.check_gradcheck(FirstChannelGain, Case((any_tensor(), any_tensor(requires_grad=False))))


def test_a_backward_wrong_for_symmetric_filters_too_still_fails() -> None:
    with pytest.raises(pytest.fail.Exception, match="backward differs from the finite-difference Jacobian"):
        harness.check_gradcheck(UnreversedFilterOff, Case((any_tensor(), any_tensor(requires_grad=False))))


def test_recorded_filters_are_not_second_guessed() -> None:
    # Values a caller passed (a recording, a call site) are what the Function is for: the failure stands.
    case = Case((harness.tensor((3, 4)), harness.tensor((5,), requires_grad=False)))
    with pytest.raises(pytest.fail.Exception, match="backward differs from the finite-difference Jacobian"):
        harness.check_gradcheck(UnreversedFilter, case)


class RateCodedSpikes(torch.autograd.Function):
    """spikingjelly's DSRIFFunction in small: integrate-and-fire spikes (float32) over the first axis, a
    spike-rate gradient backward for the input and the threshold: a surrogate, far from the derivative."""

    @staticmethod
    def forward(ctx, inp, v_threshold):
        ctx.save_for_backward(inp)
        mem, spikes = torch.zeros_like(inp[0]), []
        for step in inp:
            mem = mem + step
            spike = (mem >= 0.5 * v_threshold).float() * v_threshold
            mem = mem - spike
            spikes.append(spike)
        return torch.stack(spikes).float()

    @staticmethod
    def backward(ctx, grad):
        (inp,) = ctx.saved_tensors
        rate = inp.mean(0)
        grad_rate = grad.mean(0).to(inp.dtype)
        inside = (rate >= 0) & (rate <= 1)
        return (grad_rate * inside).expand_as(inp) / 1, (grad_rate * ~inside).sum()


def test_a_float32_surrogate_is_offered_the_surrogate_declaration_not_a_tolerance() -> None:
    # float32's atol=1e-3, rtol=1e-2 times 100 gave rtol=1, which accepts a zero gradient for any
    # derivative: the failure called the DSR neuron's rate gradient a small mismatch.
    with pytest.raises(pytest.fail.Exception) as caught:
        harness.check_gradcheck(RateCodedSpikes, Case((harness.tensor((4, 2)), harness.tensor(()))))
    message = str(caught.value)
    assert "and looser (atol=0.001, rtol=0.1): not a precision problem" in message, message
    assert "# autograd-lint: surrogate-gradient" in message
    assert "# autograd-lint: gradcheck atol" not in message
