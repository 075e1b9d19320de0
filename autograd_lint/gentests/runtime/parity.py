"""Parity checks: a Function (or custom op) agrees with itself under a transform,
``torch.vmap`` against a loop, ``torch.compile`` against eager."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import pytest
import torch

from autograd_lint.gentests.runtime.arguments import BATCH_SIZE, SEED
from autograd_lint.gentests.runtime.calls import differentiable_call
from autograd_lint.gentests.runtime.cases import Case
from autograd_lint.gentests.runtime.gradchecks import ATOL, RTOL
from autograd_lint.gentests.runtime.report import describe_inputs, reported, where_to_reproduce
from autograd_lint.gentests.runtime.search import make_args
from autograd_lint.gentests.runtime.tensors import differentiable_outputs, outputs_of


@reported
def check_vmap(function: Any, case: Case, surrogate: bool = False, atol: float = ATOL, rtol: float = RTOL) -> None:
    """``torch.vmap`` over the Function equals a loop, and so do its gradients under ``torch.vmap``.

    For a ``surrogate`` gradient only the forward is compared.
    """
    samples = [make_args(function, case, seed=SEED + index) for index in range(BATCH_SIZE)]
    first = samples[0]
    in_dims = tuple(0 if isinstance(a, torch.Tensor) else None for a in first)
    batched_args = tuple(
        torch.stack([sample[i].detach() for sample in samples]) if dim == 0 else first[i]
        for i, dim in enumerate(in_dims)
    )
    batched = outputs_of(torch.vmap(function.apply, in_dims=in_dims)(*batched_args))
    looped = [
        outputs_of(function.apply(*(a.detach() if isinstance(a, torch.Tensor) else a for a in sample)))
        for sample in samples
    ]
    for index, batched_output in enumerate(batched):
        if isinstance(batched_output, torch.Tensor):
            expected = torch.stack([outputs[index] for outputs in looped])
            torch.testing.assert_close(batched_output, expected)
    if surrogate:
        return
    _check_batched_gradients(function, samples, atol, rtol)


def _check_batched_gradients(function: Any, samples: list[tuple[Any, ...]], atol: float, rtol: float) -> None:
    """backward (``torch.func.vjp``), and ``jvp`` where defined, under ``torch.vmap`` equal a loop over ``samples``.

    This is what ``torch.func.jacrev``, ``jacfwd`` and ``vmap(grad(f))`` run.  Not
    gradcheck's ``check_batched_grad``/``check_batched_forward_grad``: those vmap
    with ``torch._vmap_internals``, a deprecated prototype that never uses a
    Function's ``vmap`` staticmethod or ``generate_vmap_rule``, so that a Function
    converting to numpy (with a right ``vmap`` rule) fails there with "Batching rule
    not implemented" without a bug (found on torch's own ``autograd_function_db``).
    Whether backward and jvp match the derivative is for test_gradcheck and
    test_forward_ad.
    """
    call, _ = differentiable_call(function, samples[0])
    # Each sample's differentiable inputs; the other arguments are the first sample's, unbatched.
    primals = [tuple(a.detach() for a in differentiable_call(function, sample)[1]) for sample in samples]
    generator = torch.Generator().manual_seed(SEED)

    def like(tensors: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        return tuple(torch.randn(t.shape, generator=generator, dtype=t.dtype).to(t.device) for t in tensors)

    def vjp(inputs: tuple[torch.Tensor, ...], cotangents: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        return torch.func.vjp(call, *inputs)[1](cotangents)

    def jvp(inputs: tuple[torch.Tensor, ...], tangents: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        return torch.func.jvp(call, inputs, tangents)[1]

    transforms = [("backward (torch.func.vjp)", vjp, [like(call(*p)) for p in primals])]
    if getattr(function, "jvp", None) is not torch.autograd.Function.jvp:
        transforms.append(("jvp (torch.func.jvp)", jvp, [like(p) for p in primals]))
    for what, transform, vectors in transforms:
        stage, failure = f"{what} raises, unbatched", None
        try:
            expected = [transform(p, v) for p, v in zip(primals, vectors)]
            stage = f"{what} raises under torch.vmap"
            batched = torch.vmap(transform)(tuple(torch.stack(parts) for parts in zip(*primals)),
                                            tuple(torch.stack(parts) for parts in zip(*vectors)))
            stage = f"{what} under torch.vmap differs from a loop over the batch at atol={atol:g}, rtol={rtol:g}"
            for index, result in enumerate(batched):
                torch.testing.assert_close(result, torch.stack([e[index] for e in expected]), atol=atol, rtol=rtol)
        except Exception as error:  # noqa: BLE001 - any failure of the transform is the finding
            failure = f"{type(error).__name__}: {error}"
        if failure is not None:
            pytest.fail(
                f"{function.__qualname__}: {stage} ({failure})\n"
                f"inputs (float64, batch of {len(samples)}): {describe_inputs(samples[0])}; {where_to_reproduce()}\n"
                "The Function declares vmap support (a vmap staticmethod or generate_vmap_rule = True), so "
                "torch.func.jacrev, jacfwd and vmap(grad(...)) run this and get the batched result.",
                pytrace=False,
            )


@reported
def check_compile_parity(function: Any, case: Case) -> None:
    """Outputs and gradients agree between eager and ``torch.compile(backend="aot_eager")``;
    with ``setup_context``, so do ``torch.func.grad`` eager and compiled."""
    def call(*args: Any) -> Any:
        return function.apply(*args)

    compile_parity(call, lambda: make_args(function, case))
    if not torch.autograd.function._is_setup_context_defined(function.setup_context):
        return
    args = make_args(function, case)
    position = next((i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad), None)
    if position is None:
        return

    def loss(x: torch.Tensor) -> torch.Tensor:
        full = list(args)
        full[position] = x
        outputs = differentiable_outputs(function.apply(*full))
        return sum(weighted_sum(o) for o in outputs)

    x = args[position].detach()
    eager = torch.func.grad(loss)(x)
    torch._dynamo.reset()
    compiled = torch.compile(torch.func.grad(loss), backend="aot_eager")(x)
    torch.testing.assert_close(compiled, eager, msg=lambda m: f"torch.func.grad differs under torch.compile: {m}")


def _tensors(values: Sequence[Any]) -> list[torch.Tensor]:
    return [v for v in values if isinstance(v, torch.Tensor)]


def weighted_sum(output: torch.Tensor) -> torch.Tensor:
    """A scalar of ``output`` whose gradient differs per element (a transposed gradient shows)."""
    return (output * torch.linspace(0.5, 1.5, output.numel(), dtype=output.dtype).reshape(output.shape)).sum()


def _run(call: Callable[..., Any], args: tuple[Any, ...]) -> tuple[list[torch.Tensor], list[torch.Tensor], list[Any]]:
    """Outputs, the tensor arguments after the call (mutations show there), and input gradients:
    of all outputs, then (with several) of the first alone, the others getting no gradient."""
    outputs = outputs_of(call(*args))
    differentiable = [o for o in differentiable_outputs(outputs) if o.requires_grad]
    inputs = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    grads: list[Any] = []
    if differentiable and inputs:
        grads = list(torch.autograd.grad(sum(weighted_sum(o) for o in differentiable), inputs, allow_unused=True,
                                         retain_graph=True))
        if len(differentiable) > 1:
            grads += list(torch.autograd.grad(weighted_sum(differentiable[0]), inputs, allow_unused=True))
    return _tensors(outputs), [a.detach() for a in _tensors(args)], grads


def _assert_same(what: str, eager: Sequence[Any], compiled: Sequence[Any]) -> None:
    assert len(eager) == len(compiled), f"{what}: eager gave {len(eager)}, compiled {len(compiled)}"
    for index, (e, c) in enumerate(zip(eager, compiled)):
        if e is None or c is None:
            assert e is None and c is None, f"{what} {index}: eager {e!r}, compiled {c!r}"
            continue
        torch.testing.assert_close(c.detach(), e.detach(), msg=lambda m: f"{what} {index} differs under "
                                   f"torch.compile(backend='aot_eager'): {m}")


def compile_parity(call: Callable[..., Any], make_args: Callable[[], tuple[Any, ...]]) -> None:
    """Outputs, mutated arguments and gradients of ``call`` agree between eager and
    ``torch.compile(backend="aot_eager")``, on identical fresh arguments."""
    torch._dynamo.reset()  # a shared code object must not hit the recompile limit and fall back to eager
    eager = _run(call, make_args())
    compiled = _run(torch.compile(call, backend="aot_eager"), make_args())
    _assert_same("output", eager[0], compiled[0])
    _assert_same("argument after the call", eager[1], compiled[1])
    _assert_same("gradient of input", eager[2], compiled[2])
