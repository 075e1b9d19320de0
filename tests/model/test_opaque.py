"""Which calls of a body go into code autograd can't see (autograd_lint.model.opaque)."""

from __future__ import annotations

import textwrap

import libcst as cst

from autograd_lint.model import semantic
from autograd_lint.model.imports import ImportMap
from autograd_lint.model.opaque import opaque_calls


def found(source: str, module: str | None = "pkg.ops.norm") -> list[tuple[str, str]]:
    """(callee, what) of every opaque call in the last ``def`` of ``source``."""
    text = textwrap.dedent(source).lstrip("\n")
    tree = cst.parse_module(text)
    function = [s for s in tree.body if isinstance(s, cst.FunctionDef)][-1]
    model = semantic.build(function, ImportMap.from_text(text, module))
    return [(o.callee, o.what) for o in opaque_calls(model, text)]


def test_triton_launches_and_not_lists_of_callables() -> None:
    assert found(
        """
        def backward(ctx, grad, layers, i):
            _bwd_kernel[(n,)](grad)
            k[grid](grad)
            mod.k[lambda meta: (1,)](grad)
            other_kernel[meta_grid_fn(n)](grad)
            layers[i](grad)
            ctx.fns[0](grad)
        """
    ) == [
        ("_bwd_kernel[...]", "a Triton kernel launch"),
        ("k[...]", "a Triton kernel launch"),
        ("mod.k[...]", "a Triton kernel launch"),
        ("other_kernel[...]", "a Triton kernel launch"),
    ]


def test_extension_modules_cutile_and_triton_packages() -> None:
    assert found(
        """
        import fused_layer_norm_cuda
        import amp_C
        import cuda.tile as ct
        import torch
        import triton
        from .triton.chunk import chunk_bwd
        from torch._C import _nn

        def backward(ctx, grad):
            fused_layer_norm_cuda.backward(grad)
            amp_C.multi_tensor_scale(grad)
            ct.launch(stream, grid, kernel, (grad,))
            chunk_bwd(grad)
            triton.cdiv(3, 2)
            _nn.gelu_backward(grad)
            torch.ops.mylib.op(grad)
        """
    ) == [
        ("fused_layer_norm_cuda.backward", "a function of a compiled extension module"),
        ("amp_C.multi_tensor_scale", "a function of a compiled extension module"),
        ("ct.launch", "a cuTile kernel launch"),
        ("chunk_bwd", "a function of the Triton module `pkg.ops.triton.chunk`"),
    ]


def test_a_local_import_counts_and_a_local_value_does_not() -> None:
    assert found(
        """
        def backward(ctx, grad):
            from pkg.kernels.triton.conv import conv_bwd
            conv_bwd(grad)
            ext = ctx.ext_cuda
            ext.run(grad)
        """
    ) == [("conv_bwd", "a function of the Triton module `pkg.kernels.triton.conv`")]


def test_a_function_of_this_module_that_launches_a_kernel() -> None:
    assert found(
        """
        def _bwd(dout, x):
            dx = torch.empty_like(x)
            _bwd_kernel[(x.shape[0], triton.cdiv(n, 4))](dx, dout, x)
            return dx

        def _pure(dout, x):
            return dout * x

        def backward(ctx, dout):
            _bwd(dout, ctx.x)
            _pure(dout, ctx.x)
        """
    ) == [("_bwd", "a function of this module that launches a Triton kernel")]


def test_a_torch_helper_of_the_same_file_is_seen_through() -> None:
    import textwrap

    import libcst as cst

    from autograd_lint.model import semantic
    from autograd_lint.model.imports import ImportMap
    from autograd_lint.model.opaque import is_torch_helper

    text = textwrap.dedent(
        """
        import torch
        import my_ext

        def torch_math(g, y):
            return g * torch.exp(y)

        def host(g, y):
            return torch.from_numpy(g.cpu().numpy() * 2)

        def extension(g, y):
            return my_ext.bwd(g, y)

        def backward(ctx, g):
            local = torch_math
            return torch_math(g, g), host(g, g), extension(g, g), local(g, g), unknown(g, g)
        """
    )
    module = cst.parse_module(text)
    function = [s for s in module.body if isinstance(s, cst.FunctionDef)][-1]
    model = semantic.build(function, ImportMap.from_text(text, None))
    calls = [call for _, call in model.calls if isinstance(call.func, cst.Name)]
    assert [is_torch_helper(model, call, text) for call in calls] == [True, False, False, False, False]
    assert not is_torch_helper(model, calls[0], None)


def test_a_module_built_by_cpp_extension_load_is_an_extension() -> None:
    assert found(
        """
        from torch.utils.cpp_extension import load
        import torch.utils.cpp_extension as cpp

        HEAD_CE_V4 = load(name="head_ce", sources=["head_ce.cu"])
        INLINE = cpp.load_inline(name="inl", cpp_sources=[""])
        OTHER = make_module()

        def forward(ctx, x):
            HEAD_CE_V4.forward(x)
            INLINE.run(x)
            OTHER.run(x)
            return x
        """
    ) == [
        ("HEAD_CE_V4.forward", "a function of a compiled extension module"),
        ("INLINE.run", "a function of a compiled extension module"),
    ]
