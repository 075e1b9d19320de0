"""Calls of torch's own autograd.Functions, for ``pytest --autograd-record --autograd-record-torch``.

torch's test suite is not in the wheel, and the ``pytorch/pytorch`` snapshot (about
4 GB) is over what ``fetch`` can bring here (500 MB), so this driver stands in for
the test files that call torch's Functions.  Where torch ships the inputs its
tests use, they are used as they are:

* ``autograd_function_db`` (functorch's ``test_ops.py``, ``test_vmap.py``,
  ``test_eager_transforms.py``): every sample of every OpInfo, from the OpInfo's
  own ``sample_inputs_func``, called and differentiated as ``test_vjp`` does;
* ``torch._export.db`` (``test/export/test_db.py``): the example's ``example_args``;
* expanded weights (``test/test_expanded_weights.py``): the ``module_db`` inputs of
  the modules that have per-sample-gradient Functions, through
  ``call_for_per_sample_grads``.

The other CPU-callable Functions are called through their public entry points
with small inputs written here (marked "driver input" below).

torch's distributed tests spawn two or more ranks (``TestDistributedNNFunctionsGloo``
of ``test/distributed/test_c10d_spawn_gloo.py`` even needs two GPUs); here the
distributed entry points run under a single-process gloo group (the
``process_group`` fixture: rank 0 of 1, an in-memory store), where each collective
is the identity or a copy, and the recording keeps that group for the replay:

* the ten differentiable collectives of ``torch.distributed.nn.functional``, for
  ``TestDistributedNNFunctionsGloo``;
* ``DistributedDataParallel`` with ``find_unused_parameters`` (``_DDPSink``), for
  the DDP tests of ``test/distributed/test_c10d_gloo.py``;
* FSDP2's ``fully_shard`` (``RegisterPostBackwardFunction``; under ``torch.func.jvp``
  also ``RegisterPreBackwardFunction``), for ``test/distributed/_composable/fsdp/``;
* ``DTensor.from_local``, ``redistribute`` and ``to_local`` on a 1-device mesh,
  for ``test/distributed/tensor/test_dtensor.py``;
* ``LocalTensor.contiguous()`` under ``LocalTensorMode``, which simulates ranks
  without a group, for ``test/distributed/test_local_tensor.py``.

Not called: CUDA-only Functions; ``SyncBatchNorm`` (its module refuses CPU input,
and in a world of one it calls ``F.batch_norm``, not the Function);
the three ``dist_autograd_test`` Functions, which raise on purpose
outside their own test's state (a class flag, a released context, a count of
distributed backward passes), RPC or not.  Usage (docs/accuracy.md,
"torch's own Functions with recordings")::

    pytest -p no:cacheprovider -q bench/gentests_torch_driver.py \\
        --autograd-record-file=/tmp/torchrec/inputs.json --autograd-record-torch
"""

from __future__ import annotations

import warnings

import pytest
import torch

pytest.importorskip("expecttest")  # torch.testing._internal needs it


def _differentiate(output):
    tensors = [t for t in torch.utils._pytree.tree_leaves(output)
               if isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point()]
    if tensors:
        torch.autograd.backward([t.sum() for t in tensors])


def _opinfo_ids():
    from torch.testing._internal.autograd_function_db import autograd_function_db
    return [op.name for op in autograd_function_db]


@pytest.mark.parametrize("name", _opinfo_ids())
def test_autograd_function_db(name):
    """As functorch's test_ops.test_vjp: every sample input of the OpInfo, in float64, with requires_grad."""
    from torch.testing._internal.autograd_function_db import autograd_function_db
    op = next(op for op in autograd_function_db if op.name == name)
    for sample in op.sample_inputs("cpu", torch.float64, requires_grad=True):
        _differentiate(op.op(sample.input, *sample.args, **sample.kwargs))


def test_export_db_example():
    """test/export/test_db.py runs each example on its example_args."""
    from torch._export.db.examples import autograd_function as example
    args = tuple(a.clone().requires_grad_() for a in example.example_args)
    _differentiate(example.model(*args))


def _expanded_weight_modules():
    from torch.testing._internal.common_modules import module_db
    wanted = (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Embedding, torch.nn.GroupNorm,
              torch.nn.InstanceNorm1d, torch.nn.InstanceNorm2d, torch.nn.LayerNorm)
    return [info for info in module_db if info.module_cls in wanted]


@pytest.mark.parametrize("info", _expanded_weight_modules(), ids=lambda info: info.name)
def test_expanded_weights(info):
    """As test_expanded_weights.TestExpandedWeightModule: module_db inputs through call_for_per_sample_grads."""
    from torch.nn.utils._per_sample_grad import call_for_per_sample_grads
    calls = 0
    for module_input in info.module_inputs_func(info, device="cpu", dtype=torch.float64, requires_grad=True,
                                                training=True):
        args, kwargs = module_input.forward_input.args, module_input.forward_input.kwargs
        if kwargs or not args or not isinstance(args[0], torch.Tensor) or args[0].dim() < 2:
            continue  # per-sample gradients need a batch dimension
        module = info.module_cls(*module_input.constructor_input.args,
                                 **module_input.constructor_input.kwargs).to(torch.float64)
        try:
            output = call_for_per_sample_grads(module)(*args)
        except (RuntimeError, NotImplementedError, ValueError):
            continue  # a configuration expanded weights do not support (as in torch's test's filter)
        _differentiate(output)
        calls += 1
    assert calls


def test_checkpoint_reentrant():
    """driver input: torch.utils.checkpoint with use_reentrant=True (CheckpointFunction)."""
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    _differentiate(torch.utils.checkpoint.checkpoint(torch.sin, x, use_reentrant=True))


def test_masked_tensor_functions():
    """driver input: the MaskedTensor conversions with autograd Functions."""
    from torch.masked import masked_tensor
    data = torch.randn(3, 4, dtype=torch.float64)
    mask = torch.rand(3, 4) > 0.3
    calls = {
        "to_dense": lambda mt: mt.to_dense(),
        "contiguous": lambda mt: mt.contiguous(),
        "where": lambda mt: torch.where(mask, mt, masked_tensor(data * 2, mask, requires_grad=True)),
        "to_sparse": lambda mt: mt.to_sparse(),
        "to_sparse_csr": lambda mt: mt.to_sparse_csr(),
    }
    outcomes = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, call in calls.items():
            try:
                _differentiate(call(masked_tensor(data, mask, requires_grad=True)))
                outcomes[name] = "ok"
            except Exception as error:  # noqa: BLE001 - recorded when forward returned
                outcomes[name] = f"{type(error).__name__}: {str(error)[:80]}"
    print(outcomes)


def test_nested_views():
    """driver input: the buffer of a jagged nested tensor and a nested view of a buffer."""
    from torch.nested._internal.nested_tensor import (
        buffer_from_jagged,
        nested_view_from_values_offsets,
    )
    nt = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)], layout=torch.jagged,
                                    dtype=torch.float64, requires_grad=True)
    _differentiate(buffer_from_jagged(nt))  # ViewBufferFromNested
    values = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    nested = nested_view_from_values_offsets(values, torch.tensor([0, 2, 6]))
    _differentiate(nested.values())


def test_nn_module_functions():
    """driver input: CrossMapLRN2d, and a full backward hook (BackwardHookFunction)."""
    x = torch.rand(2, 3, 4, 4, dtype=torch.float64, requires_grad=True)
    _differentiate(torch.nn.CrossMapLRN2d(3)(x))
    linear = torch.nn.Linear(4, 2).double()
    linear.register_full_backward_hook(lambda module, grad_input, grad_output: None)
    _differentiate(linear(torch.randn(3, 4, dtype=torch.float64, requires_grad=True)))


def test_lobpcg_and_dirichlet():
    """driver input: torch.lobpcg of an SPD matrix that requires grad; Dirichlet.rsample."""
    a = torch.randn(8, 8, dtype=torch.float64)
    spd = (a @ a.T / 8 + torch.eye(8, dtype=torch.float64)).requires_grad_()
    _differentiate(torch.lobpcg(spd, k=2)[0])
    concentration = torch.rand(3, 4, dtype=torch.float64).add(0.5).requires_grad_()
    _differentiate(torch.distributions.Dirichlet(concentration).rsample())


def test_tensor_functions():
    """driver input: Tensor.resize (autograd._functions.Resize) and Tensor.type (Type)."""
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _differentiate(x.resize(4, 3))
        from torch.autograd._functions.tensor import Type
        _differentiate(Type.apply(x, torch.float32))


def test_dynamo_and_inductor_helpers():
    """driver input: the eager paths of mod_index, tracable_create_parameter and inductor's realize."""
    from torch._dynamo._trace_wrapped_higher_order_op import mod_index
    from torch._dynamo.create_parameter_op import (
        new_parameter_placeholder,
        tracable_create_parameter,
    )
    from torch._inductor.test_operators import realize
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    _differentiate(mod_index(x, [torch.tensor([0, 2])]))
    _differentiate(realize(x))
    placeholder = new_parameter_placeholder((4, 3), torch.float64, torch.device("cpu"), True)
    _differentiate(tracable_create_parameter(x, placeholder))


def test_fake_quant_per_channel():
    """driver input: quantized_decomposed.fake_quant_per_channel (FakeQuantPerChannel)."""
    import torch.ao.quantization.fx._decomposed
    x = torch.randn(3, 4, dtype=torch.float32, requires_grad=True)
    scales = torch.full((3,), 0.1)
    zero_points = torch.zeros(3, dtype=torch.int32)
    _differentiate(torch.ops.quantized_decomposed.fake_quant_per_channel(x, scales, zero_points, 0, -128, 127))


def test_higher_order_ops_eager():
    """driver input: torch.cond, map, scan, while_loop, associative_scan, flex_attention in eager on CPU."""
    from torch._higher_order_ops.associative_scan import associative_scan
    from torch._higher_order_ops.map import map as hop_map
    from torch._higher_order_ops.scan import scan
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    outcomes = {}
    calls = {
        "cond": lambda: torch.cond(x.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (x,)),
        "map": lambda: hop_map(lambda t: t * 2, x),
        "scan": lambda: scan(lambda c, t: (c + t, c * t), x[0], x),
        "associative_scan": lambda: associative_scan(lambda a, b: a + b, x, 0, combine_mode="generic"),
        "while_loop": lambda: torch._higher_order_ops.while_loop(
            lambda i, t: i < 3, lambda i, t: (i + 1, t * 2), (torch.tensor(0), x)),
    }
    for name, call in calls.items():
        try:
            _differentiate(call())
            outcomes[name] = "ok"
        except Exception as error:  # noqa: BLE001 - recorded only if forward returned
            outcomes[name] = f"{type(error).__name__}: {str(error)[:80]}"
    try:
        from torch.nn.attention.flex_attention import flex_attention
        q, k, v = (torch.randn(1, 1, 4, 8, dtype=torch.float64, requires_grad=True) for _ in range(3))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _differentiate(flex_attention(q, k, v))
        outcomes["flex_attention"] = "ok"
    except Exception as error:  # noqa: BLE001
        outcomes["flex_attention"] = f"{type(error).__name__}: {str(error)[:80]}"
    print(outcomes)


@pytest.fixture
def process_group():
    """A single-process gloo group (rank 0 of 1, in-memory store), destroyed after the test."""
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_backend_available("gloo"):
        pytest.skip("torch.distributed with gloo is not available")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield dist
    dist.destroy_process_group()


def test_distributed_nn_functional(process_group):
    """driver input: the 10 differentiable collectives of torch.distributed.nn.functional in world size 1."""
    from torch.distributed.nn import functional as collectives

    def x():
        return torch.randn(3, 4, dtype=torch.float64, requires_grad=True)

    calls = {
        "broadcast": lambda: collectives.broadcast(x(), src=0),
        "gather": lambda: collectives.gather(x(), dst=0),
        "scatter": lambda: collectives.scatter([x()], src=0),
        "reduce": lambda: collectives.reduce(x(), dst=0),
        "reduce_scatter": lambda: collectives.reduce_scatter(torch.zeros(3, 4, dtype=torch.float64), [x()]),
        "all_gather": lambda: collectives.all_gather(x()),
        "_all_gather_base": lambda: collectives._all_gather_base(torch.zeros(3, 4, dtype=torch.float64), x()),
        "all_to_all": lambda: collectives.all_to_all([torch.zeros(3, 4, dtype=torch.float64)], [x()]),
        "all_to_all_single": lambda: collectives.all_to_all_single(torch.zeros(3, 4, dtype=torch.float64), x()),
        "all_reduce": lambda: collectives.all_reduce(x()),
    }
    outcomes = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated in favour of _functional_collectives
        for name, call in calls.items():
            try:
                _differentiate(call())
                outcomes[name] = "ok"
            except Exception as error:  # noqa: BLE001 - recorded when forward returned
                outcomes[name] = f"{type(error).__name__}: {str(error)[:80]}"
    print(outcomes)


def test_ddp_sink(process_group):
    """driver input: DistributedDataParallel on CPU with find_unused_parameters (_DDPSink)."""
    from torch.nn.parallel import DistributedDataParallel
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "did not find any unused parameters"
        model = DistributedDataParallel(torch.nn.Linear(4, 2).double(), find_unused_parameters=True)
        _differentiate(model(torch.randn(3, 4, dtype=torch.float64, requires_grad=True)))


def test_fsdp2_fully_shard(process_group):
    """driver input: FSDP2's fully_shard on CPU, forward and backward (RegisterPostBackwardFunction), and
    torch.func.jvp of it (RegisterPreBackwardFunction, which FSDP2 applies only under functorch transforms)."""
    from torch.distributed.fsdp import fully_shard
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)).double()
    fully_shard(model)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    _differentiate(model(x))
    torch.func.jvp(model, (x.detach(),), (torch.ones(3, 4, dtype=torch.float64),))


def test_dtensor_on_a_one_device_mesh(process_group):
    """driver input: DTensor.from_local, redistribute and to_local on a 1-device CPU mesh
    (_FromTorchTensor, Redistribute, NestedRedistribute in its backward, _ToTorchTensor)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard
    mesh = init_device_mesh("cpu", (1,))
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    sharded = DTensor.from_local(x, mesh, [Shard(0)])
    _differentiate(sharded.redistribute(mesh, [Replicate()]).to_local())
    # Twice differentiated, as a gradient penalty: NestedRedistribute then gets a gradient that requires grad.
    replicated = DTensor.from_local(x, mesh, [Shard(0)]).redistribute(mesh, [Replicate()]).to_local()
    (gradient,) = torch.autograd.grad((replicated**2).sum(), x, create_graph=True)
    _differentiate(gradient)


def test_local_tensor_contiguous():
    """driver input: LocalTensor.contiguous() under LocalTensorMode (_LocalContiguous); it simulates
    its ranks in one process, without a process group."""
    from torch.distributed._local_tensor import LocalTensorMode
    with LocalTensorMode(2):
        x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
        _differentiate(x.t().contiguous())


def test_foreach_map_compiled_eager_backend():
    """driver input: foreach_map under torch.compile(backend="eager"), as inductor's foreach tests call it.

    The eager backend runs the captured graph in Python, so the higher-order op's
    autograd Function (BaseHOPFunction) is applied to real tensors, outside tracing.
    """
    from torch._higher_order_ops import foreach_map
    a, b = (torch.randn(4, 3, dtype=torch.float64, requires_grad=True) for _ in range(2))

    def products(x, y):
        return foreach_map(torch.mul, [x, y], [y, x])

    _differentiate(torch.compile(products, backend="eager", fullgraph=True)(a, b))


def test_leaf_function_compiled_eager_backend():
    """driver input: a @leaf_function under torch.compile(backend="eager"), as its docstring's example.

    At run time the eager backend calls the invoke_leaf_function higher-order op on
    real tensors, which applies InvokeLeafFunctionAutogradOp.
    """
    from torch._dynamo.decorators import leaf_function

    @leaf_function
    def scaled(x, y):
        return (x * y.sin(),)

    @scaled.register_fake
    def scaled_fake(x, y):
        return (torch.empty_like(x),)

    a, b = (torch.randn(3, 4, dtype=torch.float64, requires_grad=True) for _ in range(2))
    _differentiate(torch.compile(lambda x, y: scaled(x, y)[0] * 2, backend="eager", fullgraph=True)(a, b))
