"""Recorded calls with tensor-subclass arguments are pickled as those subclasses and replayed.

A ``MaskedTensor``, a jagged nested tensor and an ``ExpandedWeight`` (per-sample
gradients) are kept with their plain tensors reduced to values (promoted to
float64, shared where shared); the replay differentiates the plain tensor inputs
and checks the structure of the gradients backward gives the subclasses.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest

from gentests_support import gen_tests, outcomes_by_class
from pytest_process import run_pytest

torch = pytest.importorskip("torch")
masked = pytest.importorskip("torch.masked")
expanded = pytest.importorskip("torch.nn.utils._expanded_weights.expanded_weights_impl")
from autograd_lint.gentests import pickled

OPS = '''\
import torch
from torch.autograd import Function
from torch.masked import MaskedTensor


class MaskedScale(Function):
    """x times the kept entries of a MaskedTensor (masked-out entries count as 0)."""

    @staticmethod
    def forward(ctx, x, mt):
        kept = mt.get_data().masked_fill(~mt.get_mask(), 0)
        ctx.save_for_backward(kept)
        return x * kept

    @staticmethod
    def backward(ctx, grad):
        (kept,) = ctx.saved_tensors
        return grad * kept, None


class MaskedDouble(Function):
    """A MaskedTensor in, a MaskedTensor out: only its gradient's structure can be checked."""

    @staticmethod
    def forward(ctx, mt):
        return MaskedTensor(mt.get_data() * 2, mt.get_mask())

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


class RaggedScale(Function):
    """The values of a jagged nested tensor, scaled per feature by w."""

    @staticmethod
    def forward(ctx, nt, w):
        ctx.save_for_backward(nt.values(), w)
        return nt.values() * w

    @staticmethod
    def backward(ctx, grad):
        values, w = ctx.saved_tensors
        return None, (grad * values).sum(0)


class Labeled(torch.Tensor):
    """A Python subclass over its own storage: gradcheck perturbs it like a plain tensor."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


class LabeledSquare(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * grad * x


class PerSampleLinear(Function):
    """x @ W.T for an ExpandedWeight W, whose per-sample gradients backward stores on W.orig_weight."""

    @staticmethod
    def forward(ctx, x, weight):
        ctx.save_for_backward(x)
        ctx.weight = weight
        return x @ weight.orig_weight.t()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        ctx.weight.orig_weight.grad_sample = torch.einsum("ni,nj->nij", grad, x)
        return grad @ ctx.weight.orig_weight, None
'''

WRONG = {"return grad * kept, None": "return 2 * grad * kept, None",
         "return grad * 2": "return grad.sum()",
         "return None, (grad * values).sum(0)": "return None, (grad * values).sum(0) * 2",
         "return grad @ ctx.weight.orig_weight, None": "return grad @ ctx.weight.orig_weight * 2, None",
         "return 2 * grad * x": "return grad * x"}

TESTS = '''\
import warnings

import torch
from torch.masked import masked_tensor
from torch.nn.utils._expanded_weights.expanded_weights_impl import ExpandedWeight

from ops import Labeled, LabeledSquare, MaskedDouble, MaskedScale, PerSampleLinear, RaggedScale

warnings.simplefilter("ignore")  # MaskedTensor is a prototype


def test_masked():
    mask = torch.tensor([[True, False, True], [False, True, True]])
    mt = masked_tensor(torch.randn(2, 3), mask, requires_grad=True)
    MaskedScale.apply(torch.randn(2, 3, requires_grad=True), mt).sum().backward()
    MaskedDouble.apply(mt)


def test_ragged():
    nt = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)], layout=torch.jagged)
    RaggedScale.apply(nt, torch.randn(3, requires_grad=True)).sum().backward()


def test_expanded_weight():
    weight = torch.nn.Parameter(torch.randn(2, 3))
    PerSampleLinear.apply(torch.randn(4, 3, requires_grad=True), ExpandedWeight(weight, 4, "sum")).sum().backward()
    assert weight.grad_sample.shape == (4, 2, 3)


def test_labeled():
    LabeledSquare.apply(torch.randn(3).as_subclass(Labeled).requires_grad_()).sum().backward()
'''


@pytest.fixture(autouse=True)
def _quiet() -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MaskedTensor is a prototype and says so
        yield


def test_masked_tensor_is_kept_with_its_data_promoted_and_its_mask_bool() -> None:
    mt = masked.masked_tensor(torch.randn(3, 4), torch.rand(3, 4) > 0.3, requires_grad=True)
    (back,) = pickled.loads(pickled.dumps((mt,)))
    assert type(back) is type(mt) and back.requires_grad
    assert back.dtype == back.get_data().dtype == torch.float64 and back.get_mask().dtype == torch.bool
    assert torch.equal(back.get_data(), mt.get_data().double()) and torch.equal(back.get_mask(), mt.get_mask())
    (kept,) = pickled.loads(pickled.dumps((mt,)), promote=False)
    assert kept.dtype == kept.get_data().dtype == torch.float32


def test_jagged_nested_tensor_keeps_int64_offsets() -> None:
    nt = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)], layout=torch.jagged, requires_grad=True)
    (back,) = pickled.loads(pickled.dumps((nt,)))
    assert back.is_nested and back.layout == torch.jagged and back.requires_grad
    assert back.values().dtype == torch.float64 and back.offsets().dtype == torch.int64
    assert torch.equal(back.offsets(), nt.offsets()) and torch.equal(back.values(), nt.values().double())


def test_expanded_weight_is_rebuilt_around_the_shared_weight() -> None:
    weight = torch.nn.Parameter(torch.randn(2, 3))
    x = torch.randn(5, 3, requires_grad=True)
    plain, rebuilt, rebuilt_weight = pickled.loads(pickled.dumps((x, expanded.ExpandedWeight(weight, 5, "mean"), weight)))
    assert type(rebuilt) is expanded.ExpandedWeight and rebuilt.orig_weight is rebuilt_weight
    assert type(plain) is torch.Tensor and type(rebuilt_weight) is torch.nn.Parameter  # each its own kind
    assert rebuilt.dtype == torch.float64 and (rebuilt.batch_size, rebuilt.loss_reduction) == (5, "mean")


def test_unflattened_subclass_requires_grad_as_recorded() -> None:
    """LocalTensor's __tensor_unflatten__ drops requires_grad (DTensor's keeps it): the rebuild restores it."""
    local = pytest.importorskip("torch.distributed._local_tensor")
    with local.LocalTensorMode(2):
        recorded = torch.randn(3, 4, requires_grad=True).t()
        text = pickled.dumps((recorded,))
    (back,) = pickled.loads(text)
    assert type(back) is local.LocalTensor and back.dtype == torch.float64 and back.requires_grad and back.is_leaf


DTENSOR = """\
import torch, torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore
from torch.distributed.tensor import DeviceMesh, Shard, distribute_tensor
from autograd_lint.gentests import pickled
dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
dt = distribute_tensor(torch.randn(4, 3), DeviceMesh("cpu", [0, 1]), [Shard(0)]).requires_grad_()
(back,) = pickled.loads(pickled.dumps((dt,)))
print(type(back).__name__, back.dtype, back.to_local().dtype, back._spec.tensor_meta.dtype, tuple(back.shape),
      back.placements, back.requires_grad)
"""


def test_dtensor_is_unflattened_with_its_local_tensor_and_metadata_promoted() -> None:
    """DTensor goes through __tensor_flatten__ (in a subprocess: it initialises a fake process group)."""
    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available")
    result = subprocess.run([sys.executable, "-c", DTENSOR], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == ("DTensor torch.float64 torch.float64 torch.float64 (4, 3) "
                                            "(Shard(dim=0),) True")


class Labeled(torch.Tensor):
    """A Python subclass over its own storage, with attributes (one of them a tensor)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206 - torch's protocol
        return super().__torch_function__(func, types, args, kwargs or {})


def test_python_subclass_is_retyped_with_its_attributes() -> None:
    scale = torch.randn(3)
    x = torch.randn(3).as_subclass(Labeled).requires_grad_()
    x.label, x.scale = "t", scale
    back, back_scale = pickled.loads(pickled.dumps((x, scale)))
    assert type(back) is Labeled and back.dtype == torch.float64 and back.requires_grad and back.is_leaf
    assert back.label == "t" and back.scale is back_scale  # shared tensors stay shared
    assert torch.equal(back.as_subclass(torch.Tensor), x.detach().as_subclass(torch.Tensor).double())


def test_subclass_that_refuses_pickling_is_refused_with_the_reason() -> None:
    class Refusing(torch.Tensor):
        @staticmethod
        def __new__(cls, data):  # noqa: ANN001, ANN205
            return torch.Tensor._make_wrapper_subclass(cls, data.shape, dtype=data.dtype)

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206
            raise NotImplementedError(func)

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206
            raise RuntimeError(f"no {func.__name__}")

    with pytest.raises(pickled.NotPicklable, match=r"Refusing that can't be pickled \(RuntimeError: no __reduce_ex__\)"):
        pickled.dumps((Refusing(torch.randn(2)),))


def _project(pytester: pytest.Pytester, name: str, wrong: bool) -> None:
    directory = pytester.mkdir(name)
    source = OPS
    if wrong:
        for old, new in WRONG.items():
            assert old in source
            source = source.replace(old, new)
    (directory / "ops.py").write_text(source)
    (directory / "test_usage.py").write_text(TESTS)


@pytest.mark.slow
def test_subclass_arguments_are_recorded_replayed_and_checked(pytester: pytest.Pytester,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    for name, wrong in (("correct", False), ("wrong", True)):
        _project(pytester, name, wrong)
        project = pytester.path / name
        monkeypatch.chdir(project)
        result = run_pytest(pytester, "test_usage.py", "--autograd-record", "-p", "no:cacheprovider")
        result.assert_outcomes(passed=4)
        data = json.loads((project / ".autograd-lint" / "inputs.json").read_text())
        args = {key.rsplit(".", 1)[-1]: entry["cases"][0]["args"] for key, entry in data["functions"].items()}
        assert args["MaskedScale"][1]["tensor"]["subclass"] == "torch.masked.maskedtensor.core.MaskedTensor"
        assert args["RaggedScale"][0]["tensor"]["shape"] == [2, -1, 3]  # -1: the ragged dimension
        assert args["PerSampleLinear"][1]["tensor"]["subclass"].endswith(".ExpandedWeight")
        generated = gen_tests(project, "ops.py", "--out", "generated")
        assert generated.returncode == 0, generated.stderr
        assert "5 recorded" in generated.stdout, generated.stdout
        text = (project / "generated" / "test_gradcheck_ops.py").read_text()
        assert 'id="recorded-NestedTensor-2xjx3-3"' in text
        monkeypatch.chdir(pytester.path)
        (project / "test_usage.py").unlink()  # the replay must not need the test module
        run_pytest(pytester, str(project / "generated"), "-p", "no:cacheprovider",
                                      f"--junitxml={project / 'report.xml'}")
    correct = outcomes_by_class(pytester.path / "correct" / "report.xml")
    # MaskedDouble has no plain input: gradcheck and gradgradcheck skip, its gradients' structure is checked.
    # Labeled, over its own storage, is perturbed like a plain tensor.
    assert {name: dict(counts) for name, counts in correct.items()} == {
        "TestMaskedScale": {"passed": 4}, "TestMaskedDouble": {"passed": 1, "skipped": 2},
        "TestRaggedScale": {"passed": 3}, "TestPerSampleLinear": {"passed": 4}, "TestLabeledSquare": {"passed": 3}}
    wrong = outcomes_by_class(pytester.path / "wrong" / "report.xml")
    assert all(counts["failed"] >= 1 for counts in wrong.values()), wrong
