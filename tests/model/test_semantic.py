"""The semantic model of one method body: bindings, kinds, flows, in-place writes."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from autograd_lint.model import semantic
from autograd_lint.model.exprs import annotation_kind
from autograd_lint.model.imports import ImportMap
from autograd_lint.model.semantic import How, MethodModel, Sink
from autograd_lint.model.spec import Kind


def model_of(source: str, **options: object) -> tuple[MethodModel, cst.Module]:
    """The model of the first ``def`` in ``source`` (after its imports)."""
    text = textwrap.dedent(source).lstrip("\n")
    module = cst.parse_module(text)
    function = next(s for s in module.body if isinstance(s, cst.FunctionDef))
    return semantic.build(function, ImportMap.from_text(text, None), **options), module  # type: ignore[arg-type]


def uses_of(model: MethodModel, name: str) -> list[cst.Name]:
    """Every use of ``name`` the walk recorded, in text order of recording."""
    found: list[cst.Name] = []
    for binding in model.bindings_of(name):
        for use in model.uses(binding):
            if not any(use is f for f in found):
                found.append(use)
    return found


def kinds_at_uses(model: MethodModel, name: str) -> list[Kind | None]:
    return [model.name_kind(use) for use in uses_of(model, name)]


def ctx_attribute_kind(model: MethodModel, attribute: str) -> Kind:
    (flow,) = [f for f in model.flows_to(Sink.CTX_ATTRIBUTE, attribute) if f.index is None]
    return model.kind(flow.expr)


# -- annotations are types ---------------------------------------------------------
@pytest.mark.parametrize(
    ("annotation", "kind"),
    [
        ("torch.Tensor", Kind.TENSOR),
        ("Tensor", Kind.TENSOR),
        ("'torch.Tensor'", Kind.TENSOR),
        ("Optional[torch.Tensor]", Kind.OPTIONAL_TENSOR),
        ("torch.Tensor | None", Kind.OPTIONAL_TENSOR),
        ("Union[int, torch.Tensor]", Kind.UNKNOWN),
        ("int | torch.Tensor", Kind.UNKNOWN),
        ("torch.LongTensor", Kind.INDEX_TENSOR),
        ("torch.LongTensor | None", Kind.OPTIONAL_INDEX_TENSOR),
        ("Optional[torch.BoolTensor]", Kind.OPTIONAL_INDEX_TENSOR),
        ("Union[torch.IntTensor, torch.Tensor, None]", Kind.OPTIONAL_TENSOR),
        ("int", Kind.NON_TENSOR),
        ("Optional[int]", Kind.NON_TENSOR),
        ("List[torch.Tensor]", Kind.NON_TENSOR),
        ("DTensorSpec", Kind.UNKNOWN),  # contains "Tensor", is not torch.Tensor
        ("MyTensorList", Kind.UNKNOWN),
        ("ProcessGroup", Kind.NON_TENSOR),
        ("typing.Mapping", Kind.NON_TENSOR),  # "Mapping" is listed, "typing.Mapping" is not
    ],
)
def test_annotations_are_read_as_types(annotation: str, kind: Kind) -> None:
    imports = ImportMap.from_text("import torch\nimport typing\nfrom typing import Optional, Union, List\n", None)
    assert annotation_kind(annotation, imports) is kind


# -- bindings ---------------------------------------------------------------------
def test_every_binding_site_is_a_binding() -> None:
    model, _ = model_of(
        """
        def f(x, *args, **kwargs):
            a = 1
            b, (c, *d) = g()
            for e in range(3):
                pass
            with open(p) as h:
                pass
            k = [i for i in x]
            if (w := 2):
                pass
            x += 1
            del a
            import os
            try:
                pass
            except E as err:
                pass
        """
    )
    hows = {name: [b.how for b in model.bindings_of(name)] for name in model.bindings}
    assert hows["x"] == [How.PARAMETER, How.AUGMENTED]
    assert hows["a"] == [How.ASSIGNMENT, How.DELETE]
    assert hows["b"] == hows["c"] == [How.UNPACKING]
    assert hows["d"] == [How.UNPACKING]
    assert hows["e"] == [How.FOR]
    assert hows["h"] == [How.WITH]
    assert hows["i"] == [How.COMPREHENSION]
    assert hows["w"] == [How.WALRUS]
    assert hows["os"] == [How.IMPORT]
    assert hows["err"] == [How.EXCEPT]
    assert model.params["args"].kind is Kind.NON_TENSOR
    assert model.is_rebound("x") and not model.is_rebound("kwargs")


def test_which_binding_reaches_which_use() -> None:
    model, module = model_of(
        """
        import torch
        def f(x):
            if c:
                x = torch.exp(x)
            else:
                pass
            return x
        """
    )
    ret = model.returns[0]
    assert ret.value is not None and isinstance(ret.value, cst.Name)
    reaching = model.reaching(ret.value)
    assert {b.how for b in reaching} == {How.PARAMETER, How.ASSIGNMENT}


def test_a_tensor_s_metadata_attributes_are_no_tensors_and_its_views_are() -> None:
    model, _ = model_of(
        """
        import torch
        def f(x: torch.Tensor):
            return x.shape, x.dtype, x.requires_grad, x.T, x.data
        """
    )
    (ret,) = model.returns
    assert ret.elements is not None
    assert [model.kind(e) for e in ret.elements] == [Kind.NON_TENSOR] * 3 + [Kind.TENSOR] * 2


def test_a_walrus_target_is_its_binding_and_no_use_of_it() -> None:
    model, _ = model_of(
        """
        def f(x):
            if (n := x.sum()) > 0:
                pass
            if (m := x.sum()) > 0:
                return m
        """
    )
    (n,) = model.bindings_of("n")
    (m,) = model.bindings_of("m")
    assert model.uses(n) == []
    assert [use.value for use in model.uses(m)] == ["m"] and model.reaching(model.returns[0].value) == {m}


def test_a_loop_rebinding_reaches_the_top_of_the_loop() -> None:
    model, _ = model_of(
        """
        import torch
        def f(x: torch.Tensor, n: int):
            y = x
            for i in range(n):
                use(y)
                y = y.shape
            return y
        """
    )
    # At `use(y)` the first time y is the tensor; after a round it is a shape.
    assert kinds_at_uses(model, "y")[0] is Kind.UNKNOWN
    (ret,) = model.returns
    assert model.kind(ret.value) is Kind.UNKNOWN  # type: ignore[arg-type]


def test_code_after_return_is_not_reached() -> None:
    model, _ = model_of(
        """
        def f(x):
            return x
            x = 1
        """
    )
    (assignment,) = [b for b in model.bindings_of("x") if b.how is How.ASSIGNMENT] or [None]
    assert assignment is None  # never walked: it cannot run


# -- kinds and narrowing -------------------------------------------------------------
def test_isinstance_narrows_a_union() -> None:
    model, _ = model_of(
        """
        import torch
        from typing import Union
        def forward(ctx, x: torch.Tensor, n: Union[int, torch.Tensor]):
            if isinstance(n, int):
                ctx.n = n
            else:
                ctx.t = n
            if not isinstance(n, torch.Tensor):
                ctx.m = n
            return x * 2
        """
    )
    assert ctx_attribute_kind(model, "n") is Kind.NON_TENSOR
    assert ctx_attribute_kind(model, "t") is Kind.UNKNOWN
    assert ctx_attribute_kind(model, "m") is Kind.NON_TENSOR


def test_is_none_narrows_an_optional_tensor() -> None:
    model, _ = model_of(
        """
        import torch
        from typing import Optional
        def forward(ctx, x, w: Optional[torch.Tensor] = None):
            ctx.before = w
            if w is None:
                return x
            ctx.after = w
            return x * w
        """
    )
    assert ctx_attribute_kind(model, "before") is Kind.OPTIONAL_TENSOR
    assert ctx_attribute_kind(model, "after") is Kind.TENSOR


def test_usage_evidence_makes_an_unannotated_parameter_a_tensor() -> None:
    model, _ = model_of(
        """
        import torch
        def forward(ctx, a, b, c, group, e, f: SomeClass, n):
            a.contiguous()
            torch.exp(b)
            c.shape
            group.size()
            ctx.save_for_backward(e)
            f.view(-1)
            torch.zeros(n)
            torch.exp(input=b)
        """
    )
    kinds = {name: model.param_kind(name) for name in ("a", "b", "c", "group", "e", "f", "n")}
    assert kinds == {
        "a": Kind.TENSOR,
        "b": Kind.TENSOR,
        "c": Kind.TENSOR,
        "group": Kind.UNKNOWN,  # `.size()` is no evidence: process groups have one
        "e": Kind.TENSOR,
        "f": Kind.UNKNOWN,  # an annotation naming another class rules evidence out
        "n": Kind.UNKNOWN,  # a factory's first argument is a size, not a tensor
    }


def test_evidence_after_a_rebinding_does_not_count() -> None:
    model, _ = model_of(
        """
        def forward(ctx, a):
            a = load(a)
            a.contiguous()
        """
    )
    assert model.param_kind("a") is Kind.UNKNOWN


def test_a_gradient_from_backward_is_evidence() -> None:
    model, _ = model_of("def forward(ctx, a, b):\n    return op(a, b)\n", tensor_params=["a"])
    assert model.param_kind("a") is Kind.TENSOR
    assert model.param_kind("b") is Kind.UNKNOWN


def test_literal_defaults_and_integer_tensors() -> None:
    model, _ = model_of(
        """
        import torch
        def forward(ctx, x: torch.Tensor, eps=1e-5, bias=None):
            mask = x > 0
            idx = torch.argmax(x, dim=-1)
            ids = torch.zeros(3, dtype=torch.long)
            ctx.mask, ctx.idx, ctx.ids = mask, idx, ids
            ctx.y = x.float()
            return x
        """
    )
    assert model.param_kind("eps") is Kind.NON_TENSOR
    assert model.param_kind("bias") is Kind.UNKNOWN
    for attribute in ("mask", "idx", "ids"):
        assert ctx_attribute_kind(model, attribute) is Kind.INDEX_TENSOR
    assert ctx_attribute_kind(model, "y") is Kind.TENSOR


def test_integer_kinds_propagate_through_dtype_keeping_calls() -> None:
    model, _ = model_of(
        """
        import torch
        def forward(ctx, x: torch.Tensor, ids: torch.LongTensor, offsets: Optional[torch.IntTensor] = None):
            valid = ids != -100
            ctx.a = ids.masked_fill(~valid, 0)
            ctx.b = valid.clone().contiguous()
            ctx.c = ids.to(x.device, non_blocking=True)
            ctx.d = torch.zeros_like(ids)
            ctx.e = x.new_zeros(4, dtype=torch.int32)
            ctx.f = ids.new_zeros(4)
            ctx.g = offsets
            if offsets is not None:
                ctx.h = offsets.flip(0)
            ctx.float1 = ids.to(x)  # .to(tensor) takes its dtype
            ctx.float2 = ids.to(torch.float32)
            ctx.float3 = torch.zeros_like(ids, dtype=torch.float32)
            ctx.float4 = ids.clone(memory_format=torch.contiguous_format) * x
            return x
        """
    )
    for attribute in "abcdefh":
        assert ctx_attribute_kind(model, attribute) is Kind.INDEX_TENSOR, attribute
    assert ctx_attribute_kind(model, "g") is Kind.OPTIONAL_INDEX_TENSOR
    for attribute in ("float1", "float2", "float3", "float4"):
        assert ctx_attribute_kind(model, attribute) is Kind.TENSOR, attribute


def test_classmethod_skips_cls() -> None:
    model, _ = model_of("def forward(cls, ctx, x):\n    return x.clone()\n", skip=1)
    assert model.param_kind("cls") is Kind.NON_TENSOR
    assert model.param_kind("x") is Kind.TENSOR


# -- flows ---------------------------------------------------------------------------
def test_flows_to_returns_ctx_and_calls() -> None:
    model, module = model_of(
        """
        import torch
        def forward(ctx, x, y):
            out = torch.exp(x)
            ctx.inv, ctx.eps = torch.rsqrt(out), 1e-5
            ctx.pair = [x, y]
            ctx.save_for_backward(out)
            helper(y)
            return out, x.view(-1)
        """
    )
    x = model.params["x"]
    sinks = {(f.sink, f.detail, f.index) for f in model.flows_of(x)}
    assert (Sink.CTX_ATTRIBUTE, "pair", 0) in sinks
    assert (Sink.RETURN, None, 1) in sinks  # a view of x is returned at position 1
    assert ctx_attribute_kind(model, "inv") is Kind.TENSOR
    assert ctx_attribute_kind(model, "eps") is Kind.NON_TENSOR
    (saved,) = model.flows_to(Sink.CTX_API, "save_for_backward")
    assert {b.name for b in saved.origins} == {"out"}
    assert any(f.detail == "helper" for f in model.flows_of(model.params["y"]))
    assert model.parameter_of(model.returns[0].elements[1]) == "x"  # type: ignore[index]


def test_a_name_bound_to_a_tuple_gives_the_returned_elements() -> None:
    model, _ = model_of("def backward(ctx, g):\n    grads = (g, None)\n    return grads\n")
    (ret,) = model.returns
    assert ret.elements is not None and len(ret.elements) == 2


# -- in-place writes -----------------------------------------------------------------
def test_inplace_writes_and_their_origins() -> None:
    model, _ = model_of(
        """
        import torch
        def forward(ctx, x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor, n: int):
            v = x.view(-1)
            v.mul_(2)
            y[0] = 1
            x += bias
            n += 1
            torch.relu_(bias)
            torch.add(x, 1, out=y)
            t = x.clone()
            t.copy_(t)
            t.add_(1)
            return x
        """
    )
    found = sorted((w.how, sorted(w.names), w.self_copy) for w in model.inplace_writes)
    assert found == [
        ("AddAssign", ["x"], False),
        ("[...] =", ["y"], False),
        ("add_()", ["t"], False),
        ("copy_()", ["t"], True),
        ("mul_()", ["x"], False),
        ("out=", ["y"], False),
        ("torch.relu_()", ["bias"], False),
    ]
    assert model.writes_to(model.params["x"])
    assert not model.writes_to(model.params["n"])  # `n += 1` on an int rebinds


def test_a_write_after_rebinding_is_not_a_write_to_the_parameter() -> None:
    model, _ = model_of(
        """
        def forward(ctx, x):
            x = x.clone()
            x.mul_(2)
            return x
        """
    )
    assert not model.writes_to(model.params["x"])
    (write,) = model.inplace_writes
    assert {b.how for b in write.origins} == {How.ASSIGNMENT}


def test_narrowing_an_optional_integer_tensor_keeps_its_integer_kind() -> None:
    model, _ = model_of(
        """
        import torch
        def forward(ctx, x: torch.Tensor, offsets: torch.LongTensor | None = None):
            if offsets is not None:
                ctx.a = offsets
            if isinstance(offsets, torch.Tensor):
                ctx.b = offsets
            return x
        """
    )
    assert ctx_attribute_kind(model, "a") is Kind.INDEX_TENSOR
    assert ctx_attribute_kind(model, "b") is Kind.INDEX_TENSOR


def test_inplace_writes_through_detach_views_and_collectives() -> None:
    model, _ = model_of(
        """
        import torch.distributed as dist
        from torch.distributed import broadcast

        def forward(ctx, x, y, z, w, xs):
            mask = x.detach().apply_(lambda v: v > 0)
            y[:, 0].zero_()
            z.t().mul_(2)
            dist.all_reduce(w)
            broadcast(z, 0)
            w.data.clamp_(-1, 1)
            xs[0].add_(1)
            d = y.detach()
            d.sign_()
            item = xs[1]
            item.div_(3)
            return mask
        """
    )
    found = sorted((w.how, sorted(w.names), w.through) for w in model.inplace_writes)
    assert found == [
        ("add_()", ["xs"], "[...]"),
        ("apply_()", ["x"], ".detach()"),
        ("clamp_()", [], None),  # `.data` is the deliberate, untracked way: not seen through
        ("div_()", ["item"], None),  # an item bound to a local is a value of its own
        ("mul_()", ["z"], None),  # `.t()` is an alias method already
        ("sign_()", ["y"], ".detach()"),  # through a local bound to `y.detach()`
        ("torch.distributed.all_reduce()", ["w"], None),
        ("torch.distributed.broadcast()", ["z"], None),
        ("zero_()", ["y"], "[...]"),
    ]


def test_a_call_with_an_inplace_flag_writes_its_first_argument() -> None:
    model, _ = model_of(
        """
        import torch.nn.functional as F
        from .kernels import apply_rotary

        def forward(ctx, x, y, z, w, inplace):
            a = apply_rotary(x, inplace=inplace)
            F.relu(y, inplace=True)
            F.relu(z, inplace=False)
            F.dropout(w, 0.1, True, inplace=None)
            return a
        """
    )
    found = sorted((w.how, sorted(w.names)) for w in model.inplace_writes)
    assert found == [
        ("F.relu(..., inplace=True)", ["y"]),
        ("apply_rotary(..., inplace=inplace)", ["x"]),
    ]


def test_setattr_with_a_literal_name_is_an_attribute_store() -> None:
    model, _ = model_of(
        """
        def forward(ctx, x, name):
            y = x.exp()
            setattr(ctx, "y", y)
            setattr(ctx, name, y)
            setattr(ctx, "not an identifier", y)
            return y
        """
    )
    stores = [(f.detail, f.owner, sorted(b.name for b in f.origins)) for f in model.flows_to(Sink.CTX_ATTRIBUTE)]
    assert stores == [("y", "ctx", ["y"])]
