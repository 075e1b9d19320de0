"""The semantic model's queries that rules ask instead of walking a body themselves:
attribute loads, the tree around a node, what an expression reads, and what may hold a value."""

from __future__ import annotations

import textwrap

import libcst as cst

from autograd_lint.model import semantic, traverse
from autograd_lint.model.imports import ImportMap
from autograd_lint.model.semantic import Binding, BindingFacts, How, MethodModel, Sink


def model_of(source: str) -> MethodModel:
    """The model of the first ``def`` in ``source`` (after its imports)."""
    text = textwrap.dedent(source).lstrip("\n")
    module = cst.parse_module(text)
    function = next(s for s in module.body if isinstance(s, cst.FunctionDef))
    return semantic.build(function, ImportMap.from_text(text, None))


def code(node: cst.CSTNode) -> str:
    return cst.Module(body=()).code_for_node(node)


# -- attribute loads ---------------------------------------------------------------
def test_attribute_loads_leave_out_stores_dels_and_nested_scopes() -> None:
    model = model_of(
        """
        def backward(ctx, grad):
            ctx.saved_tensors = ()
            del ctx.saved_tensors
            a = ctx.saved_tensors[0]
            ctx.saved_tensors[1] = grad
            f = lambda: ctx.saved_tensors
            def helper():
                return ctx.saved_tensors
            return ctx.other, ctx.saved_variables
        """
    )
    loads = model.attribute_loads("ctx", {"saved_tensors", "saved_variables"})
    assert [code(n) for n in loads] == ["ctx.saved_tensors", "ctx.saved_tensors", "ctx.saved_variables"]
    assert [n.attr.value for n in model.attribute_loads("ctx")] == [
        "saved_tensors", "saved_tensors", "other", "saved_variables"
    ]
    assert model.attribute_loads("grad") == []


def test_per_item_loads_are_the_comprehension_parts_that_run_per_item() -> None:
    model = model_of(
        """
        def backward(ctx, grad):
            once = [t for t in ctx.a]
            element = [ctx.b[i] for i in range(2)]
            condition = [i for i in range(2) if ctx.c]
            inner = [j for i in range(2) for j in ctx.d]
            nested = [[u for u in ctx.e] for i in range(2)]
            outer_of_outer = [i for i in [j for j in ctx.f]]
            return ctx.g
        """
    )
    per_item = {n.attr.value for n in model.attribute_loads("ctx") if model.per_item(n)}
    assert per_item == {"b", "c", "d", "e"}


def test_loads_follow_the_text_through_try_except_else() -> None:
    model = model_of(
        """
        def backward(ctx, grad):
            try:
                a = ctx.first
            except ValueError:
                b = ctx.handler
            else:
                c = ctx.orelse
            finally:
                d = ctx.last
            return a
        """
    )
    assert [n.attr.value for n in model.attribute_loads("ctx")] == ["first", "handler", "orelse", "last"]
    # Bindings are recorded in the same order.
    assert list(model.bindings)[-4:] == ["a", "b", "c", "d"]


# -- every binding, in walk order ---------------------------------------------------
def test_all_bindings_in_walk_order_each_once() -> None:
    model = model_of(
        """
        def backward(ctx, grad, *rest):
            a = grad
            for i in range(2):
                b = a * i
                a = b
            try:
                c = a
            except ValueError as e:
                d = 0
            else:
                c = 1
            if c is not None:
                pass
            return a
            dead = 1
        """
    )
    found = model.all_bindings()
    assert [(b.name, b.how) for b in found if b.how is not How.NARROWING] == [
        ("ctx", How.PARAMETER), ("grad", How.PARAMETER), ("rest", How.PARAMETER),
        ("a", How.ASSIGNMENT), ("i", How.FOR), ("b", How.ASSIGNMENT), ("a", How.ASSIGNMENT),
        ("c", How.ASSIGNMENT), ("e", How.EXCEPT), ("d", How.ASSIGNMENT), ("c", How.ASSIGNMENT),
    ]
    assert len(found) == len({id(b) for b in found})
    assert {id(b) for b in found} == {id(b) for every in model.bindings.values() for b in every}


# -- facts per binding ----------------------------------------------------------------
def derived_from_x(source: str) -> tuple[list[tuple[str, int]], BindingFacts]:
    """The bindings computed from ``x`` (directly or through others), as (name, position in
    walk order), and the solver that found them."""
    model = model_of(source)
    facts = BindingFacts(model)
    derived: set[Binding] = {model.params["x"]}

    def compute(binding: Binding) -> bool:
        if binding in derived or binding.value is None:
            return False
        reads = [n for n in traverse.walk(binding.value) if isinstance(n, cst.Name)]
        if any(b in derived for use in reads for b in facts.reaching(use)):
            derived.add(binding)
            return True
        return False

    computed = [b for b in model.all_bindings() if b.how is How.ASSIGNMENT]
    facts.solve(computed, compute)
    order = model.all_bindings()
    return [(b.name, order.index(b)) for b in order if b in derived], facts


def test_binding_facts_straight_line_take_one_round() -> None:
    found, facts = derived_from_x(
        """
        def forward(ctx, x, w):
            a = w * 2
            b = x + a
            a = b
            c = w
            return a
        """
    )
    assert [name for name, _ in found] == ["x", "b", "a"]
    assert facts.rounds == 1


def test_binding_facts_follow_a_loop_back_to_its_top() -> None:
    found, facts = derived_from_x(
        """
        def forward(ctx, x, w):
            c = w
            b = w
            for _ in range(3):
                a = b * 2
                if a is not None:
                    c = a
                b = x
            return c
        """
    )
    # `a` reads the `b = x` of the previous round; `c = a` reads `a` through its narrowing.
    assert [name for name, _ in found] == ["x", "a", "c", "b"]
    assert facts.rounds == 3  # the first round read `b = x` before computing it; one round to confirm


# -- the tree ------------------------------------------------------------------------
def test_parent_and_ancestors() -> None:
    model = model_of(
        """
        def backward(ctx, grad):
            if ctx.needs_input_grad[0]:
                out = grad * 2
            else:
                out = None
            return out
        """
    )
    first, second = model.bindings_of("out")
    assert isinstance(first.site, cst.Assign)
    use = first.site.value.left  # type: ignore[union-attr]
    assert isinstance(model.parent(use), cst.BinaryOperation)
    pairs = list(model.ancestors(first.site))
    ifs = [(a, c) for a, c in pairs if isinstance(a, cst.If)]
    assert len(ifs) == 1 and ifs[0][1] is ifs[0][0].body
    ifs = [(a, c) for a, c in model.ancestors(second.site) if isinstance(a, cst.If)]
    assert len(ifs) == 1 and ifs[0][1] is ifs[0][0].orelse
    assert pairs[-1][0] is model.node
    assert model.parent(model.node) is None
    assert model.parent(cst.Name("elsewhere")) is None


# -- dependencies --------------------------------------------------------------------
def test_dependencies_are_the_bindings_an_expression_reads_in_order() -> None:
    model = model_of(
        """
        def backward(ctx, grad, w):
            x = grad * 2
            if grad.sum() > 0:
                x = grad
            y = torch.mm(x, w.t()) + (lambda: z)() + w.shape[0]
            return y
        """
    )
    (y,) = model.bindings_of("y")
    assert y.value is not None
    read = model.dependencies(y.value)
    assert [(b.name, b.how) for b in read] == [
        ("x", How.ASSIGNMENT), ("x", How.ASSIGNMENT), ("w", How.PARAMETER)
    ]
    assert model.dependencies(cst.Name("grad")) == ()  # not a node of the body


# -- holders -------------------------------------------------------------------------
def holders_of(source: str, name: str) -> list[str]:
    model = model_of(source)
    found = model.holders([model.params[name]])
    return sorted({b.name for b in found})


def test_holders_follow_aliases_values_and_containers() -> None:
    assert holders_of(
        """
        def forward(ctx, x, y):
            out = x.mul_(2)
            items = []
            items.append(out)
            for t in items:
                pass
            with torch.no_grad() as g:
                pass
            pair = (x, y)
            first, second = pair
            n = (m := first)
            s = 1
            s += x
            ctx.kept = x
            box = {}
            box["x"] = x
            return out
        """,
        "x",
    ) == ["box", "ctx", "first", "items", "m", "n", "out", "pair", "s", "second", "t", "x"]


def test_holders_start_from_the_origins_of_an_alias() -> None:
    model = model_of(
        """
        def forward(ctx, x):
            out = x
            ctx.mark_dirty(out)
            return x, x * 2
        """
    )
    (out,) = model.bindings_of("out")
    found = model.holders([out])
    assert model.params["x"] in found


def test_holders_leave_out_unrelated_and_nested_uses() -> None:
    assert holders_of(
        """
        def forward(ctx, x, y):
            a = y + 1
            f = lambda: x
            torch.zeros_like(y, out=y)
            return a
        """,
        "x",
    ) == ["x"]


# -- narrowings ----------------------------------------------------------------------
def test_unnarrowed_follows_narrowings_once_even_in_a_loop() -> None:
    model = model_of(
        """
        def backward(ctx, grad_x, n):
            for _ in range(n):
                if grad_x is not None:
                    if grad_x is not None:
                        grad_x = grad_x * 2
            return grad_x
        """
    )
    returned = model.returns[0].value
    assert isinstance(returned, cst.Name)
    reaching = model.reaching(returned)
    assert any(b.how is How.NARROWING for b in model.bindings_of("grad_x"))
    assert [(b.name, b.how) for b in sorted(model.unnarrowed(reaching), key=lambda b: b.how.value)] == [
        ("grad_x", How.ASSIGNMENT), ("grad_x", How.PARAMETER)
    ]


# -- where a tensor comes from -------------------------------------------------------
def _stored(model: MethodModel, attribute: str) -> cst.BaseExpression:
    return next(f.expr for f in model.flows if f.detail == attribute and f.index is None)


def test_sources_follow_views_detach_data_conditionals_and_locals() -> None:
    model = model_of(
        """
        def forward(ctx, x, w, b=None):
            v = x.view(-1)
            d = w.detach()
            t = d.T
            if not isinstance(b, torch.Tensor):
                b = torch.tensor(b)
            b = b.expand(3)
            y = torch.exp(x)
            ctx.v = v.t()
            ctx.t = t
            ctx.opt = x.data if x is not None else None
            ctx.b = b
            ctx.y = y.contiguous()
            ctx.made = x * 2
            ctx.glob = SOME_GLOBAL
            return y
        """
    )
    def names(bindings: frozenset[Binding]) -> set[tuple[str, How]]:
        return {(b.name, b.how) for b in bindings}

    v = model.sources(_stored(model, "v"))
    assert names(v.same) == {("x", How.PARAMETER)} and not v.detached and not v.made
    assert v.through == {"view", "t"}
    assert model.sources(_stored(model, "t")).through == {"T"}
    assert model.sources(_stored(model, "y")).through == {"contiguous"}
    t = model.sources(_stored(model, "t"))
    assert not t.same and names(t.detached) == {("w", How.PARAMETER)}
    opt = model.sources(_stored(model, "opt"))
    assert names(opt.detached) == {("x", How.PARAMETER)} and not opt.same
    b = model.sources(_stored(model, "b"))
    assert names(b.same) == {("b", How.PARAMETER), ("b", How.ASSIGNMENT)}
    y = model.sources(_stored(model, "y"))
    assert names(y.same) == {("y", How.ASSIGNMENT)}
    made = model.sources(_stored(model, "made"))
    assert made.made and not made.bindings
    glob = model.sources(_stored(model, "glob"))
    assert glob.unknown and not glob.bindings and not glob.made


def test_sources_end_in_a_loop_that_rebinds_through_a_view() -> None:
    model = model_of(
        """
        def forward(ctx, x, n):
            for _ in range(n):
                x = x.view(-1).detach()
            ctx.x = x
        """
    )
    found = model.sources(_stored(model, "x"))
    assert {b.how for b in found.bindings} == {How.PARAMETER}
    assert found.same and found.detached  # no loop run, or some


def test_unpacked_gives_the_value_and_index_of_a_flat_target() -> None:
    model = model_of(
        """
        def setup_context(ctx, inputs, output):
            x, y = inputs
            a, *rest = inputs
            (p, q), r = output
            s = inputs[0]
        """
    )
    by_name = {b.name: b for b in model.all_bindings()}
    for name, source, index in (("x", "inputs", 0), ("y", "inputs", 1), ("r", "output", 1)):
        value, found = model.unpacked(by_name[name])  # type: ignore[misc]
        assert code(value) == source and found == index
    for name in ("a", "rest", "p", "q", "s", "inputs"):
        assert model.unpacked(by_name[name]) is None


# -- returns by position -------------------------------------------------------------
def test_return_positions() -> None:
    model = model_of(
        """
        def backward(ctx, grad: torch.Tensor):
            if ctx.a:
                return grad, None, *[None] * 2
            if ctx.b:
                return grad, None, *rest, None
            if ctx.c:
                pair = (grad, None)
                return pair
            if ctx.d:
                return grad * 2
            if ctx.e:
                return helper(ctx, grad)
            if ctx.f:
                return None
            return
        """
    )

    def shown(ret):  # type: ignore[no-untyped-def]
        found = model.return_positions(ret)
        if found is None:
            return None
        elements, complete = found
        return [None if e is None else code(e) for e in elements], complete

    assert [shown(r) for r in model.returns] == [
        (["grad", "None", "None", "None"], True),  # the padding's own `None`s (model/sequences.py)
        (["grad", "None"], False),
        (["grad", "None"], True),
        (["grad * 2"], True),
        None,
        (["None"], True),
        None,
    ]


# -- data or metadata ----------------------------------------------------------------
def _loads(model: MethodModel, attribute: str) -> list[cst.Attribute]:
    return model.attribute_loads("ctx", (attribute,))


def test_reads_data_tells_metadata_from_data() -> None:
    model = model_of(
        """
        import torch

        def backward(ctx, grad):
            if ctx.empty:
                g = None if ctx.bias is None else torch.zeros_like(ctx.bias)
                return torch.zeros_like(ctx.a), ctx.b.new_zeros(ctx.b.shape), g
            n = ctx.c.size(0) + ctx.c.dim() + len(ctx.c)
            view = ctx.d.view(-1).T
            s = view.shape
            dtype = ctx.e.detach().dtype
            out = grad * ctx.f
            if ctx.g:
                pass
            local = ctx.h
            return local.float(), isinstance(ctx.i, torch.Tensor)
        """
    )
    expected = {"bias": False, "a": False, "b": False, "c": False, "d": False, "e": False,
                "f": True, "g": True, "h": True, "i": False}
    for attribute, data in expected.items():
        assert any(model.reads_data(load) for load in _loads(model, attribute)) is data, attribute


def test_reads_data_of_one_element_of_a_container() -> None:
    model = model_of(
        """
        def backward(ctx, grad):
            cat, sub, _a = ctx.tensors
            first = ctx.pair[0]
            shape = ctx.pair[1].shape
            whole = ctx.whole
            x = grad * cat * sub * first
            return x, whole[2]
        """
    )
    (tensors,) = _loads(model, "tensors")
    assert model.reads_data(tensors, 0) and model.reads_data(tensors, 1)
    assert not model.reads_data(tensors, 2)  # `_a` is never used
    pair = _loads(model, "pair")
    assert any(model.reads_data(load, 0) for load in pair)
    assert not any(model.reads_data(load, 1) for load in pair)
    (whole,) = _loads(model, "whole")
    assert model.reads_data(whole, 2) and not model.reads_data(whole, 0)


# -- escapes -----------------------------------------------------------------------
def test_a_name_escapes_when_used_other_than_as_an_attribute_receiver() -> None:
    kept = model_of(
        """
        def forward(ctx, x):
            ctx.save_for_backward(x)
            ctx.scale = 2
            return x * ctx.scale
        """
    )
    assert not kept.escapes("ctx")
    for body in (
        "helper(ctx)\n    return x",  # passed to a call
        "ctx2 = ctx\n    return x",  # aliased
        "ctx = None\n    return x",  # rebound
        "return x, ctx",  # returned
        "f = lambda: ctx.a\n    return x",  # a nested scope may run anywhere
    ):
        model = model_of(f"def forward(ctx, x):\n    {body}\n")
        assert model.escapes("ctx"), body


def test_attribute_uses_in_a_nested_scope_can_be_left_out() -> None:
    model = model_of(
        """
        def backward(ctx, grad):
            def helper(ctx=None):
                return ctx.needs_input_grad
            return helper()
        """
    )
    assert model.escapes("ctx")
    assert not model.escapes("ctx", in_nested_scopes=False)
    bare = model_of("def backward(ctx, grad):\n    f = lambda: g(ctx)\n    return grad\n")
    assert bare.escapes("ctx", in_nested_scopes=False)


# -- unpackings --------------------------------------------------------------------
def test_unpackings_are_the_tuple_targets_that_unpack_a_value() -> None:
    model = model_of(
        """
        def setup_context(ctx, inputs, output):
            x, y = inputs
            a, *rest = inputs
            p, q = 1, 2
            [m, n] = c, d = output
            return
            u, v = inputs
        """
    )
    found = [(code(u.target), code(u.value), u.count, u.starred) for u in model.unpackings()]
    assert found == [
        ("x, y", "inputs", 2, False),
        ("a, *rest", "inputs", 2, True),
        ("[m, n]", "output", 2, False),
        ("c, d", "output", 2, False),
    ]
    (x,) = model.bindings_of("x")
    unpacking = model.unpacking_of(x)
    assert unpacking is not None and code(unpacking.value) == "inputs"
    (p,) = model.bindings_of("p")
    assert model.unpacking_of(p) is None


# -- items of a *args parameter ------------------------------------------------------
def test_param_items_reads_literal_items_and_slices_of_star_args() -> None:
    model = model_of(
        """
        def forward(ctx, fn, *args):
            head = args[:2]
            maybe = args[1:] if fn else args[2:]
            args2 = args
            ctx.a = args[1]
            ctx.b = tuple(args[1:])
            ctx.c = head
            ctx.d = list(args[0])
            ctx.e = args[1:n]
            ctx.f = maybe
            ctx.g = args[::2]
            ctx.h = args2[0]
            ctx.i = fn[0]
            ctx.j = tuple()
        """
    )
    found = {
        flow.detail: model.param_items(flow.expr, "args")
        for flow in model.flows_to(Sink.CTX_ATTRIBUTE)
        if flow.index is None
    }
    assert found == {
        "a": (1, 2, True),
        "b": (1, None, False),
        "c": (0, 2, False),
        "d": None,  # list() of one item is not its items
        "e": None,  # a bound that is not a literal
        "f": None,  # bindings of different slices
        "g": None,  # a step
        "h": None,  # another name for the tuple: not followed
        "i": None,
        "j": None,  # an empty tuple
    }


def test_attribute_of_follows_a_local_bound_once_only() -> None:
    model = model_of(
        """
        def backward(ctx, grad, flag):
            buf = ctx.buf
            other = ctx.a
            if flag:
                other = ctx.b
            return buf, other
        """
    )
    (returned,) = [n for n in traverse.walk(model.node) if isinstance(n, cst.Return)]
    assert isinstance(returned.value, cst.Tuple)
    buf, other = (element.value for element in returned.value.elements)
    assert model.attribute_of(buf) == ("ctx", "buf")
    assert model.attribute_of(other) is None  # two bindings reach it


def test_a_star_pattern_binds_its_name_and_a_bare_star_binds_nothing() -> None:
    model = model_of(
        """
        def backward(ctx, grad):
            match ctx.shape:
                case [first, *rest]:
                    return rest
                case [*_]:
                    return grad
        """
    )
    assert [b.how for b in model.bindings_of("rest")] == [How.MATCH]
    assert model.bindings_of("_") == []
