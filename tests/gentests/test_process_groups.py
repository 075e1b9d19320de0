"""Calls recorded under a process group are replayed under one.

A Function that calls a collective (torch.distributed.nn's ``all_reduce``,
DDP's and FSDP's hooks, DTensor's redistribution) runs only while a default
process group is initialised.  The recording keeps the group (backend, world
size, rank, and the device mesh an argument holds); a generated test runs a case
recorded in a world of one process under a single-process group of its own, and
skips one recorded in a larger world with one exact reason.
"""

from __future__ import annotations

import json
import weakref

import pytest

from gentests_support import gen_tests, outcomes_by_class
from pytest_process import run_pytest

torch = pytest.importorskip("torch")

from autograd_lint.gentests import harness  # noqa: E402
from autograd_lint.gentests.runtime import environment  # noqa: E402
from autograd_lint.gentests.harness import Case, RecordedProcessGroup, tensor  # noqa: E402
from autograd_lint.gentests.recording import Recording, load  # noqa: E402

dist = torch.distributed
pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_backend_available("gloo"),
                                reason="torch without torch.distributed or gloo")

OPS = '''\
import torch
import torch.distributed as dist


class AllReduceSum(torch.autograd.Function):
    """The sum over the ranks; its gradient is the sum of the ranks' gradients."""

    @staticmethod
    def forward(ctx, x):
        y = x.clone()
        dist.all_reduce(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


class AllReduceWrong(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.clone()
        dist.all_reduce(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        grad = grad.flip(-1)
        dist.all_reduce(grad)
        return grad


class ScaleByMeshSize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, mesh):
        ctx.size = mesh.size()
        return x * mesh.size()

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.size, None


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad
'''

RECORDED_TESTS = '''\
import pytest
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from ops import AllReduceSum, AllReduceWrong, Double, ScaleByMeshSize


@pytest.fixture
def group():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_under_a_group(group):
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    AllReduceSum.apply(x).sum().backward()
    AllReduceWrong.apply(x).sum().backward()
    ScaleByMeshSize.apply(x, init_device_mesh("cpu", (1,))).sum().backward()
    Double.apply(x).sum().backward()


def test_without_a_group():
    Double.apply(torch.randn(3, 4, dtype=torch.float64, requires_grad=True)).sum().backward()
'''

# Run after the generated tests: they leave no process group behind.
AFTER = '''\
import torch.distributed as dist


def test_no_process_group_is_left_initialised():
    assert not dist.is_initialized()
'''

GLOO_1 = {"backend": "gloo", "rank": 0, "world_size": 1}


def _record_and_generate(pytester: pytest.Pytester) -> dict:
    pytester.makepyfile(ops=OPS, test_recorded=RECORDED_TESTS)
    run_pytest(pytester, "--autograd-record-file=rec.json", "-p", "no:cacheprovider",
                                  "test_recorded.py").assert_outcomes(passed=2)
    generated = gen_tests(pytester.path, "ops.py", "--inputs", "rec.json", "--out", "gen")
    assert generated.returncode == 0, generated.stderr
    return json.loads((pytester.path / "rec.json").read_text())


@pytest.mark.slow
def test_the_group_is_recorded_with_each_case_and_a_world_of_one_is_replayed_under_one(
        pytester: pytest.Pytester) -> None:
    recording = _record_and_generate(pytester)
    cases = {name.rsplit(".", 1)[-1]: entry["cases"] for name, entry in recording["functions"].items()}
    assert [case["process_group"] for case in cases["AllReduceSum"]] == [GLOO_1]
    assert [case["process_group"] for case in cases["ScaleByMeshSize"]] == [
        {**GLOO_1, "mesh": {"device_type": "cpu", "shape": [1]}}]
    # The group is part of what calls are counted by: the same arguments without one are another case.
    assert sorted((case.get("process_group") for case in cases["Double"]), key=str) == [None, GLOO_1]
    source = (pytester.path / "gen" / "test_gradcheck_ops.py").read_text()
    assert 'process_group=RecordedProcessGroup("gloo", world_size=1, mesh_device="cpu", mesh_shape=(1,))' in source
    pytester.makepyfile(test_zz_after=AFTER)
    result = run_pytest(pytester, "gen", "test_zz_after.py", "-p", "no:cacheprovider",
                                           "--junitxml=report.xml")
    outcomes = {name: dict(counts) for name, counts in outcomes_by_class(pytester.path / "report.xml").items()}
    assert outcomes == {
        # gradcheck, its non-contiguous twin, gradgradcheck, non-tensor gradients (ScaleByMeshSize)
        "TestAllReduceSum": {"passed": 3},
        # gradcheck fails; its non-contiguous twin leaves that to it; a linear backward is right twice over
        "TestAllReduceWrong": {"failed": 1, "skipped": 1, "passed": 1},
        "TestScaleByMeshSize": {"passed": 4},
        "TestDouble": {"passed": 6},  # two cases, with and without a group
        "test_zz_after": {"passed": 1},
    }, result.stdout.str()
    result.stdout.fnmatch_lines(["*_ TestAllReduceWrong.test_gradcheck[[]recorded-3x4[]] _*",
                                 ("AllReduceWrong: backward differs from the finite-difference Jacobian of forward "
                                  "(gradcheck)")])


@pytest.mark.slow
def test_a_case_recorded_in_a_larger_world_is_skipped_with_the_reason(pytester: pytest.Pytester) -> None:
    recording = _record_and_generate(pytester)
    entry = next(e for name, e in recording["functions"].items() if name.endswith("AllReduceSum"))
    entry["cases"][0]["process_group"]["world_size"] = 4
    (pytester.path / "rec.json").write_text(json.dumps(recording))
    assert gen_tests(pytester.path, "ops.py", "--inputs", "rec.json", "--out", "gen").returncode == 0
    result = run_pytest(pytester, "gen", "-p", "no:cacheprovider", "-rs", "-k", "AllReduceSum")
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines([("SKIPPED [[]3[]] *recorded in a process group of world size 4; a replay in one "
                                  "process can't reproduce its collectives")])


def test_a_recording_without_the_field_still_loads_its_cases_without_a_group(tmp_path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"format": 2, "functions": {"ops.Double": {
        "module": "ops", "qualname": "Double", "path": "ops.py",
        "cases": [{"calls": 1, "args": [{"tensor": {"shape": [2], "dtype": "float32", "device": "cpu",
                                                      "requires_grad": True}}]}]}}}))
    recording = load(str(path))
    assert isinstance(recording, Recording)
    (case,) = recording.functions["ops.Double"]["cases"]
    assert "process_group" not in case


def _group(world_size: int = 1, backend: str = "gloo") -> Case:
    return Case((tensor((2,)),), process_group=RecordedProcessGroup(backend, world_size=world_size))


def test_the_replay_makes_a_group_only_when_none_is_initialised_and_destroys_only_its_own() -> None:
    assert not dist.is_initialized()
    with harness.recorded_process_group(_group()):
        assert (dist.get_backend(), dist.get_world_size(), dist.get_rank()) == ("gloo", 1, 0)
    assert not dist.is_initialized()
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        default = dist.distributed_c10d._get_default_group()
        with harness.recorded_process_group(_group()):
            assert dist.distributed_c10d._get_default_group() is default
        assert dist.is_initialized()
    finally:
        dist.destroy_process_group()
    with harness.recorded_process_group(Case((tensor((2,)),))):
        assert not dist.is_initialized()


def test_a_backend_that_does_not_run_here_is_replaced_by_gloo() -> None:
    if not torch.cuda.is_available():
        assert environment._replay_backend("nccl") == "gloo"
        assert environment._replay_backend("cpu:gloo,cuda:nccl") == "gloo"
    assert environment._replay_backend("cpu:gloo") == "cpu:gloo"
    assert environment._replay_backend("gloo") == "gloo"
    assert environment._replay_backend("no-such-backend") == "gloo"


def test_a_larger_world_skips_before_anything_is_initialised() -> None:
    reason = r"^recorded in a process group of world size 2; a replay in one process can't reproduce its collectives$"
    with pytest.raises(pytest.skip.Exception, match=reason), harness.recorded_process_group(_group(world_size=2)):
        pass
    assert not dist.is_initialized()


class Holder:
    """What DDP is to the weak reference it hands its _DDPSink."""

    def __init__(self) -> None:
        self.weight = torch.ones(2)


def test_a_weak_reference_and_the_default_group_are_pickled_by_what_they_refer_to() -> None:
    from autograd_lint.gentests import pickled

    holder = Holder()
    with harness.recorded_process_group(_group()):
        text = pickled.dumps((weakref.ref(holder), dist.distributed_c10d._get_default_group()))
        other = dist.new_group([0])
        with pytest.raises(pickled.NotPicklable, match="a process group other than the default one"):
            pickled.dumps((other,))
    with pytest.raises(pickled.NotPicklable, match="a dead weak reference"):
        pickled.dumps((weakref.ref(Holder()),))
    with harness.recorded_process_group(_group()):
        reference, group = pickled.loads(text)
        # Nothing else holds the rebuilt target: the reference keeps it alive.
        assert isinstance(reference, weakref.ref) and isinstance(reference(), Holder)
        assert reference().weight.dtype == torch.float64
        assert group is dist.distributed_c10d._get_default_group()


def test_a_mesh_on_another_device_is_a_device_the_case_needs() -> None:
    from autograd_lint.gentests.inputs import InputCase, ProcessGroupInput, TensorInput

    group = ProcessGroupInput("nccl", 1, mesh_device="cuda", mesh_shape=(1,))
    # requires_device marks skip such a case where the device is missing, as for a tensor recorded there.
    assert InputCase((TensorInput((3,)),), process_group=group).devices == ("cuda",)
    assert InputCase((TensorInput((3,)),), process_group=ProcessGroupInput("gloo", 1, mesh_device="cpu")).devices == ()


def test_a_recorded_mesh_is_read_and_written_into_the_case() -> None:
    from types import SimpleNamespace

    from autograd_lint.gentests.inputs import ProcessGroupInput
    from autograd_lint.gentests.render import _process_group_source

    mesh = {"backend": "gloo", "world_size": 4, "rank": 1, "mesh": {"device_type": "cpu", "shape": [2, 2]}}
    recording = Recording({"ops.Mesh": {"qualname": "Mesh", "path": "ops.py", "cases": [
        {"args": [{"value": 1}], "process_group": mesh}, {"args": [{"value": 2}], "process_group": GLOO_1}]}})
    spec = SimpleNamespace(full_name="ops.Mesh", qualname="Mesh", path="/project/ops.py")
    groups = [case.process_group for case in recording.cases_for(spec)]  # type: ignore[arg-type]
    assert groups == [ProcessGroupInput("gloo", 4, 1, "cpu", (2, 2)), ProcessGroupInput("gloo", 1)]
    assert [_process_group_source(group) for group in groups] == [  # type: ignore[arg-type]
        'RecordedProcessGroup("gloo", world_size=4, rank=1, mesh_device="cpu", mesh_shape=(2, 2))',
        'RecordedProcessGroup("gloo", world_size=1)']
    # A case with a malformed group is left out, as one with an argument that can't be decoded.
    recording.functions["ops.Mesh"]["cases"][0]["process_group"] = ["gloo", 4]
    assert [case.process_group for case in recording.cases_for(spec)] == [groups[1]]  # type: ignore[arg-type]
    assert recording.problems == []


def test_a_recorded_tensor_keeps_its_statistics() -> None:
    from types import SimpleNamespace

    from autograd_lint.gentests.inputs import TensorInput

    tensor = {"shape": [2], "dtype": "float32", "device": "cpu", "requires_grad": True,
              "stats": {"std": 0.5, "mean": 1.5}}
    recording = Recording({"ops.Double": {"qualname": "Double", "path": "ops.py", "cases": [
        {"args": [{"tensor": tensor}]}, {"args": [{"tensor": {**tensor, "stats": {}}}]}]}})
    spec = SimpleNamespace(full_name="ops.Double", qualname="Double", path="/project/ops.py")
    assert [case.args for case in recording.cases_for(spec)] == [  # type: ignore[arg-type]
        (TensorInput((2,), stats=(("mean", 1.5), ("std", 0.5))),), (TensorInput((2,)),)]  # in float64
