"""What counts as an autograd.Function, and what its spec says (no torch needed)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from autograd_lint.model.analysis import analyze
from autograd_lint.model.discovery import discover_functions
from autograd_lint.settings import Settings
from autograd_lint.model.source import SourceError, SourceFile
from autograd_lint.model.spec import Kind, ParamKind


def functions(source: str, settings: Settings = Settings()) -> dict[str, object]:
    text = textwrap.dedent(source).lstrip()
    analysis = analyze(SourceFile("mod.py", text, "mod"), {}, settings)
    return {f.qualname: f for f in analysis.functions}


def test_every_import_form_resolves() -> None:
    found = functions(
        """
        import torch
        import torch.autograd as ag
        from torch.autograd import Function as F
        from torch.autograd.function import InplaceFunction, Function as Fn2
        from torch import autograd

        class A(torch.autograd.Function): pass
        class B(ag.Function): pass
        class C(F): pass
        class D(InplaceFunction): pass
        class E(autograd.function.Function): pass
        class G(Fn2): pass
        class H(torch.nn.Module): pass
        """
    )
    assert sorted(found) == ["A", "B", "C", "D", "E", "G"]


def test_other_frameworks_function_and_docstring_examples_are_not_functions() -> None:
    found = functions(
        '''
        from chainer import Function
        import torch

        class NotTorch(Function):
            def forward(self, inputs): return inputs

        def documented():
            """Example:

            class InDocstring(torch.autograd.Function):
                pass
            """

        class Nested(torch.autograd.NestedIOFunction):
            pass
        '''
    )
    assert found == {}


def test_local_subclasses_nested_classes_and_classes_in_functions() -> None:
    found = functions(
        """
        import torch

        class Base(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                return x * y

        class Child(Base):
            @staticmethod
            def backward(ctx, g):
                return g, g

        class Grandchild(Child):
            pass

        class Holder:
            class Inner(torch.autograd.Function):
                pass

        def factory():
            class Made(Base):
                pass
            return Made

        def build():
            class Box:
                class Deep(torch.autograd.Function):
                    pass
            return Box
        """
    )
    assert sorted(found) == [
        "Base", "Child", "Grandchild", "Holder.Inner", "build.<locals>.Box.Deep", "factory.<locals>.Made"
    ]
    grandchild = found["Grandchild"]
    assert grandchild.method("forward").defined_in == "Base"
    assert grandchild.method("backward").defined_in == "Child"
    assert grandchild.n_inputs == 2 and grandchild.is_split_style is False


def test_functions_under_if_else_and_with_are_found_in_a_module_parsed_whole() -> None:
    # `Fast()(x)` makes the module parsed whole (a rule reads calls on a Function class):
    # the classes are then found by walking the compound statements' bodies.
    text = textwrap.dedent(
        """\
        import torch

        if torch.cuda.is_available():
            class Fast(torch.autograd.Function):
                pass
        else:
            class Slow(torch.autograd.Function):
                pass
        with torch.no_grad():
            class Held(torch.autograd.Function):
                pass

        y = Fast()(1)
        """
    )
    analysis = analyze(SourceFile("mod.py", text, "mod"), {}, Settings())
    assert analysis.whole_module is not None
    assert sorted(f.qualname for f in analysis.functions) == ["Fast", "Held", "Slow"]


def test_class_attributes_annotated_or_not_are_read_and_a_bare_annotation_is_none() -> None:
    found = functions(
        """
        import torch

        class Fn(torch.autograd.Function):
            generate_vmap_rule: bool = True
            boxed_grads_call = False
            scale: float
        """
    )
    spec = found["Fn"]
    assert spec.attribute_is_true("generate_vmap_rule")
    assert spec.attribute("boxed_grads_call").text == "False"
    assert spec.attribute("scale") is None


def test_a_syntax_error_outside_any_function_is_reported_only_where_the_whole_file_is_asked_for() -> None:
    # A file named on the command line (or stdin, an editor's buffer) is compiled whole; a
    # file met in a walk only as far as a later stage needs it.
    source = SourceFile("mod.py", "x = 1\ny = (\n", "mod")
    assert analyze(source, {}, Settings()).functions == []
    with pytest.raises(SourceError) as raised:
        analyze(source, {}, Settings(), compile_whole=True)
    assert raised.value.problem.startswith("syntax error: ") and raised.value.line == 2


def test_a_base_rebound_to_a_plain_class_makes_no_function() -> None:
    # `class Sub(Base)` takes the last `Base` bound before it: the plain class.  Parsing the
    # Function classes as blocks alone would see only the first `Base` and make Sub a
    # Function (whose backward, never called by autograd, AGL001 would then report).
    found = functions(
        """
        import torch

        class Base(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, grad):
                return grad * 2

        class Base:
            pass

        class Sub(Base):
            @staticmethod
            def forward(ctx, a, b):
                return a * b

            @staticmethod
            def backward(ctx, grad):
                return grad
        """
    )
    assert sorted(found) == ["Base"]


def test_spec_holds_signatures_decorators_and_ctx_usage() -> None:
    spec = functions(
        """
        import torch
        from torch.autograd.function import once_differentiable

        class Op(torch.autograd.Function):
            generate_vmap_rule = True

            @staticmethod
            def forward(x, weight, scale: float = 1.0, *, mode="a"):
                return (x @ weight) * scale

            @staticmethod
            def setup_context(ctx, inputs, output):
                x, weight, scale = inputs
                ctx.save_for_backward(x, weight)
                ctx.mark_non_differentiable(output)
                ctx.set_materialize_grads(False)
                ctx.scale = scale

            @staticmethod
            @once_differentiable
            def backward(ctx, grad):
                x, weight = ctx.saved_tensors
                gx = grad * weight if ctx.needs_input_grad[0] else None
                return gx, grad * x, None
        """
    )["Op"]
    assert spec.is_split_style is True and spec.n_inputs == 3 and spec.n_outputs == 1
    forward = spec.method("forward")
    assert [p.kind for p in forward.params] == [
        ParamKind.POSITIONAL, ParamKind.POSITIONAL, ParamKind.POSITIONAL, ParamKind.KEYWORD_ONLY
    ]
    assert forward.params[2].annotation == "float" and forward.params[2].default.text == "1.0"
    setup = spec.method("setup_context")
    assert [c.api for c in setup.ctx_calls] == [
        "save_for_backward", "mark_non_differentiable", "set_materialize_grads"
    ]
    assert [w.attribute for w in setup.ctx_writes] == ["scale"]
    backward = spec.method("backward")
    assert backward.is_staticmethod and backward.is_once_differentiable
    assert backward.position.line == 21  # the `def`, not the decorators
    read = backward.reads("saved_tensors")[0]
    assert read.targets == ("x", "weight") and read.target_is_sequence
    assert [r.index for r in backward.reads("needs_input_grad[]")] == [0]
    assert [len(r.elements) for r in backward.returns] == [3]
    assert backward.returns[0].elements[2].kind is Kind.NONE
    assert spec.attribute_is_true("generate_vmap_rule")


def test_cross_file_bases_are_followed(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "base.py").write_text(
        "import torch\nclass Base(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, a):\n        return a * 2\n"
    )
    (package / "sub" / "impl.py").write_text(
        "from ..base import Base\nclass Impl(Base):\n    pass\n"
        "class Deeper(Impl):\n    pass\n"
    )
    (package / "other.py").write_text("from pkg.sub.impl import Deeper as D\nclass Last(D):\n    pass\n")
    found = {f.full_name: f for f in discover_functions([tmp_path])}
    assert sorted(found) == ["pkg.base.Base", "pkg.other.Last", "pkg.sub.impl.Deeper", "pkg.sub.impl.Impl"]
    assert found["pkg.other.Last"].n_inputs == 1


def test_unresolved_base_makes_missing_methods_unknown() -> None:
    spec = functions(
        """
        import torch
        from somewhere import Mixin

        class WithMixin(Mixin, torch.autograd.Function):
            @staticmethod
            def backward(ctx, g):
                return g
        """
    )["WithMixin"]
    assert spec.complete is False and spec.n_inputs is None and spec.is_split_style is None


def test_configured_extra_base() -> None:
    found = functions(
        """
        from mylib.autograd import FusedBase

        class Kernel(FusedBase):
            pass
        """,
        Settings(extra_bases=frozenset({"mylib.autograd.FusedBase"})),
    )
    assert list(found) == ["Kernel"]


def test_an_extra_base_without_a_module_is_accepted_and_matches_nothing(tmp_path: Path) -> None:
    # The configuration accepts a bare name (a qualified name of one part); a run with it
    # must go on.  It is compared with the qualified name a base resolves to, so it does not
    # match the imported `mylib.FusedBase`; the qualified name does.
    _tree(tmp_path, {"k.py": "from mylib import FusedBase\n\n\nclass Kernel(FusedBase):\n    pass\n"})
    assert discover_functions([str(tmp_path)], Settings(extra_bases=frozenset({"FusedBase"}))) == []
    found = discover_functions([str(tmp_path)], Settings(extra_bases=frozenset({"FusedBase", "mylib.FusedBase"})))
    assert [f.name for f in found] == ["Kernel"]


BASE = "import torch\n\n\nclass ChunkedLoss(torch.autograd.Function):\n    @staticmethod\n    def backward(ctx, grad):\n        return grad, None\n"
SUB = "from {module} import ChunkedLoss\n\n\nclass CE(ChunkedLoss):\n    @staticmethod\n    def forward(ctx, x, y):\n        return x * 2\n"


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def _base_of_ce(paths: list[str]) -> list[str] | None:
    found = {f.name: f for f in discover_functions(paths)}
    return [b.full_name for b in found["CE"].base_specs] if "CE" in found else None


def test_cross_file_bases_without_init_files_resolve_as_namespace_packages(tmp_path: Path, monkeypatch) -> None:
    # No __init__.py anywhere: scripts folders, vendored trees, namespace packages.
    _tree(tmp_path, {"models/base.py": BASE, "losses/ce.py": SUB.format(module="models.base")})
    monkeypatch.chdir(tmp_path)
    assert _base_of_ce(["."]) == ["base.ChunkedLoss"]
    # The checked directory is a root even when the working directory is elsewhere.
    monkeypatch.chdir(tmp_path.parent)
    assert _base_of_ce([str(tmp_path)]) == ["base.ChunkedLoss"]


def test_src_layout_and_partial_packages(tmp_path: Path, monkeypatch) -> None:
    # src/pkg/sub/base.py with an __init__.py in sub only: `pkg.sub.base` through the src root.
    _tree(tmp_path, {
        "src/pkg/sub/__init__.py": "", "src/pkg/sub/base.py": BASE, "src/pkg/ce.py": SUB.format(module="pkg.sub.base"),
    })
    monkeypatch.chdir(tmp_path)
    assert _base_of_ce(["."]) == ["sub.base.ChunkedLoss"]


def test_an_ambiguous_namespace_name_stays_unresolved(tmp_path: Path, monkeypatch) -> None:
    # models/base.py and src/models/base.py both import as `models.base`: neither is taken.
    _tree(tmp_path, {
        "models/base.py": BASE, "src/models/base.py": BASE, "losses/ce.py": SUB.format(module="models.base"),
    })
    monkeypatch.chdir(tmp_path)
    assert _base_of_ce(["."]) is None


def test_namespace_names_order() -> None:
    import os

    from autograd_lint.model.source import namespace_names

    root = os.path.abspath("/proj")
    assert namespace_names("/proj/src/pkg/mod.py", [root]) == ["src.pkg.mod", "pkg.mod"]
    assert namespace_names("/proj/mod.py", [root]) == []  # the regular name, `mod`
    assert namespace_names("/proj/my-scripts/mod.py", [root]) == []  # not an identifier
    assert namespace_names("/elsewhere/mod.py", [root]) == []
