"""The run-time search for shapes: ranks from forward's source and from its errors, mixed last dimensions."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from autograd_lint.gentests import harness  # noqa: E402
from autograd_lint.gentests.harness import Case, any_scalar, any_tensor  # noqa: E402
from autograd_lint.gentests.runtime import arguments  # noqa: E402


def _image_size(x):
    """A helper of another module, as pytorch-wavelets' rowfilter: the forward's source says nothing of x."""
    batch, channels, rows, columns = x.shape
    return rows * columns


class Blur(torch.autograd.Function):
    """A batch of images (the rank is read in a helper only) filtered by a fixed filter bank."""

    @staticmethod
    def forward(ctx, x, weight):
        _image_size(x)
        ctx.save_for_backward(weight)
        kernel = weight.reshape(1, 1, -1, 1).expand(x.shape[1], 1, -1, 1)
        ctx.groups = x.shape[1]
        return torch.nn.functional.conv2d(x, kernel, groups=x.shape[1], padding="same")

    @staticmethod
    def backward(ctx, grad):
        (weight,) = ctx.saved_tensors
        kernel = weight.reshape(1, 1, -1, 1).expand(ctx.groups, 1, -1, 1)
        return torch.nn.functional.conv_transpose2d(grad, kernel, groups=ctx.groups,
                                                    padding=(kernel.shape[2] // 2, 0)), None


def test_a_tensor_is_given_the_dimensions_forward_s_error_asks_for() -> None:
    # "not enough values to unpack (expected 4, got 2)": the first tensor becomes a batch of images.
    case = Case((any_tensor(), any_tensor(requires_grad=False)))
    x, weight = harness.make_args(Blur, case)
    assert x.shape == (2, 3, 4, 4) and weight.dim() < 4
    harness.check_gradcheck(Blur, Case((any_tensor(), any_tensor(requires_grad=False))))


def test_lifted_plans_follow_the_errors_torch_and_python_raise() -> None:
    plan = ((3, 4), (4,))
    assert arguments.lifted_plans(plan, "raised ValueError: not enough values to unpack (expected 4, got 2)") == [
        ((2, 3, 4, 4), (4,)), ((2, 3, 4, 4), (2, 3, 4, 4))]
    assert arguments.lifted_plans(plan, "raised IndexError: too many indices for tensor of dimension 2") == [
        ((2, 3, 4), (4,)), ((2, 3, 4), (2, 3, 4))]
    message = "raised IndexError: Dimension out of range (expected to be in range of [-2, 1], but got 2)"
    assert arguments.lifted_plans(plan, message)[0] == ((2, 3, 4), (4,))
    message = "raised RuntimeError: Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [3, 4]"
    assert arguments.lifted_plans(plan, message)[0] == ((2, 3, 4, 4), (4,))
    assert arguments.lifted_plans(plan, "raised ValueError: too many values to unpack (expected 2)") == []
    assert arguments.lifted_plans(((2, 3, 4, 4),), "not enough values to unpack (expected 3, got 2)") == []


def _row_filter(x, h):
    """A helper of another module, as pytorch-wavelets' rowfilter: the filter bank's shape (1, 1, L, 1)
    is read here only (``h.shape[2]``, ``repeat`` to the channels), never in forward's source."""
    batch, channels, rows, columns = x.shape
    m = h.shape[2] // 2
    weight = h.transpose(2, 3).repeat(channels, 1, 1, 1)
    return torch.nn.functional.conv2d(x, weight, groups=channels, padding=(0, m))


class RowFilter(torch.autograd.Function):
    """A batch of images filtered along rows by a fixed filter bank backward never differentiates."""

    @staticmethod
    def forward(ctx, x, h):
        ctx.save_for_backward(h)
        return _row_filter(x, h)

    @staticmethod
    def backward(ctx, grad):
        (h,) = ctx.saved_tensors
        return _row_filter(grad, h.flip(2)), None


class Synthesis(torch.autograd.Function):
    """Bands stacked along dimension 2, each filtered (pytorch-wavelets' SFB2D): `lo, hi = unbind(bands, dim=2)`."""

    @staticmethod
    def forward(ctx, bands, h):
        lo, hi = torch.unbind(bands, dim=2)
        ctx.save_for_backward(h)
        return _row_filter(lo, h) + hi

    @staticmethod
    def backward(ctx, grad):
        (h,) = ctx.saved_tensors
        return torch.stack((_row_filter(grad, h.flip(2)), grad), dim=2), None


def test_a_filter_bank_reshaped_in_a_helper_is_found_from_the_convolution_s_error() -> None:
    # conv2d's "weight of size [6, 3, 4, 4], expected input[2, 3, 4, 4] to have 9 channels": the fixed
    # tensor becomes a filter of one channel, odd length first; the data keeps its shape.
    case = Case((any_tensor(), any_tensor(requires_grad=False)))
    x, h = harness.make_args(RowFilter, case)
    assert x.shape == (2, 3, 4, 4) and h.shape == (1, 1, 5, 1)
    harness.check_gradcheck(RowFilter, case)


def test_a_tensor_unbound_into_data_gets_one_more_dimension_beside_filters() -> None:
    case = Case((any_tensor(rank=3, sizes=((2, 2),)), any_tensor(requires_grad=False)))
    bands, h = harness.make_args(Synthesis, case)
    assert bands.shape == (2, 3, 2, 4, 4) and h.shape == (1, 1, 5, 1)
    harness.check_gradcheck(Synthesis, case)


def test_filter_plans_follow_convolution_and_reshape_errors() -> None:
    plan = ((2, 3, 4, 4), (3, 4), (3, 4))
    conv = ("raised RuntimeError: Given groups=3, weight of size [6, 3, 4, 4], expected input[2, 3, 4, 4] "
            "to have 9 channels, but got 3 channels instead")
    assert arguments.filter_plans(plan, conv) == [((2, 3, 4, 4), (1, 1, 5, 1), (1, 1, 5, 1)),
                                                  ((2, 3, 4, 4), (1, 1, 4, 1), (1, 1, 4, 1))]
    # The fixed tensors are the filters; the other data get the weight's number of dimensions.
    assert arguments.filter_plans(((3, 4), (3, 4), (3, 4)), conv, fixed=[False, False, True])[0] == (
        (2, 3, 4, 4), (2, 3, 4, 4), (1, 1, 5, 1))
    # A conv1d weight: filters of three dimensions.
    conv1d = "Given groups=3, weight of size [6, 3, 4], expected input[2, 3, 4] to have 9 channels, but got 3"
    assert arguments.filter_plans(((2, 3, 4), (2, 3, 4)), conv1d)[0] == ((2, 3, 4), (1, 1, 5))
    # `ha.reshape(1, 1, 1, m)` of a filter of m = 4 elements read from elsewhere.
    reshape = "raised RuntimeError: shape '[1, 1, 1, 4]' is invalid for input of size 96"
    assert arguments.filter_plans(((2, 3, 4, 4),) * 3, reshape) == [((2, 3, 4, 4), (1, 1, 4, 1), (1, 1, 4, 1))]
    assert arguments.filter_plans(plan, "raised RuntimeError: shape '[3, 40]' is invalid for input of size 96") == []
    assert arguments.filter_plans(((2, 3, 4, 4),), conv) == []
    assert arguments.filter_plans(plan, "raised RuntimeError: mat1 and mat2 shapes cannot be multiplied") == []


class Rotate(torch.autograd.Function):
    """A unit quaternion (last dimension 4) acting on points (last dimension 3), as pypose's SO3_Act."""

    @staticmethod
    def forward(ctx, q, p):
        if q.shape[-1] != 4 or p.shape[-1] != 3:
            raise RuntimeError(f"expected a quaternion and a point, got sizes {q.shape[-1]} and {p.shape[-1]}")
        ctx.save_for_backward(q, p)
        return p * q[..., :1]

    @staticmethod
    def backward(ctx, grad):
        q, p = ctx.saved_tensors
        grad_q = torch.zeros_like(q)
        grad_q[..., :1] = (grad * p).sum(-1, keepdim=True)
        return grad_q, grad * q[..., :1]


def test_a_group_element_and_a_point_get_different_last_dimensions() -> None:
    q, p = harness.make_args(Rotate, Case((any_tensor(), any_tensor())))
    assert (q.shape, p.shape) == ((3, 4), (3, 3))
    harness.check_gradcheck(Rotate, Case((any_tensor(), any_tensor())))


def test_a_rank_from_forward_s_source_is_tried_first() -> None:
    class Images(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    (x,) = harness.make_args(Images, Case((any_tensor(rank=4),)))
    assert x.shape == (2, 3, 4, 4)
    plans = arguments.search_shape_plans(2, (None, 5))
    assert plans[0] == ((3, 4), (2, 3, 3, 4, 4))
    assert ((3, 4), (3, 4)) in plans  # the evidence is a guess: the usual plans follow


def test_a_shape_forward_rejects_is_not_tried_again_in_other_value_domains() -> None:
    calls: list[tuple[int, ...]] = []

    class Fixed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            calls.append(tuple(x.shape))
            if x.shape != (5,):
                raise RuntimeError(f"size mismatch: expected 5 elements, got shape {tuple(x.shape)}")
            return x * scale

        @staticmethod
        def backward(ctx, grad):
            return grad * 2, None

    harness.make_args(Fixed, Case((any_tensor(), any_scalar())))
    rejected = [shape for shape in calls if shape != (5,)]
    # One call per rejected shape and number, not one per value domain besides.
    assert rejected and all(calls.count(shape) == len(arguments.SCALAR_CANDIDATES) for shape in set(rejected))


def test_a_forward_with_a_sparse_output_is_searched_and_checked() -> None:
    # norse's LIFSparseAdjointFunction returns a sparse COO tensor: torch.isfinite and torch.equal,
    # which the search's probes call, have no kernel for it.
    class ToSparse(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            spikes = (x * 2).to_sparse()
            ctx.mark_non_differentiable(spikes)
            return spikes, x * 3

        @staticmethod
        def backward(ctx, grad_sparse, grad):
            return grad * 3

    (x,) = harness.make_args(ToSparse, Case((any_tensor(),)))
    assert x.shape == (3, 4)


class SummedThreshold(torch.autograd.Function):
    """spikingjelly's DSRLIFFunction: backward sums a threshold's gradient to 0-d, as its callers pass one."""

    @staticmethod
    def forward(ctx, inp, steps, threshold):
        ctx.save_for_backward(inp, threshold)
        return inp * threshold

    @staticmethod
    def backward(ctx, grad_output):
        inp, threshold = ctx.saved_tensors
        return grad_output * threshold, None, torch.sum(grad_output * inp)


def test_a_searched_tensor_gets_the_shape_of_the_gradient_backward_returns_for_it() -> None:
    # Searched as (3, 4) like the data, backward's 0-d gradient failed on every candidate.
    case = Case((any_tensor(), any_scalar(), any_tensor()))
    harness.check_gradcheck(SummedThreshold, case)
    assert harness.make_args(SummedThreshold, case)[2].shape == ()
