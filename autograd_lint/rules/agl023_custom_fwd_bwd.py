"""AGL023: ``custom_fwd``/``custom_bwd`` (AMP) misuse."""

from __future__ import annotations

import ast
from functools import lru_cache
from typing import TYPE_CHECKING, Iterator, Sequence

import libcst as cst

from autograd_lint.rules.base import (
    Diagnostic,
    FixSafety,
    Fixer,
    FunctionContext,
    ImportRef,
    Invalid,
    Report,
    Rule,
    Severity,
    Valid,
)
from autograd_lint.model.spec import Decorator, MethodSpec, Position

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis

_AMP = ("torch.amp.", "torch.amp.autocast_mode.")
_CUDA_AMP = ("torch.cuda.amp.", "torch.cuda.amp.autocast_mode.")
_NEUTRAL = frozenset({"builtins.staticmethod", "builtins.classmethod"})


def _which(decorator: Decorator) -> tuple[str, bool] | None:
    """("custom_fwd" or "custom_bwd", is the deprecated torch.cuda.amp one) or None."""
    name = decorator.qualified_name or ""
    for prefixes, deprecated in ((_AMP, False), (_CUDA_AMP, True)):
        for prefix in prefixes:
            if name in (f"{prefix}custom_fwd", f"{prefix}custom_bwd"):
                return name.rsplit(".", 1)[-1], deprecated
    return None


@lru_cache(maxsize=16)
def _bindings(text: str) -> dict[str, set[str]]:
    """What each module name may be bound to: the imports that bind it, or its assignments.

    Repeating one import (``import torch`` in two functions, ``import torch.nn``) binds the
    same object and counts once; every assignment or ``def`` counts on its own.
    """
    found: dict[str, set[str]] = {}
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return found
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                found.setdefault(local, set()).add(f"import {alias.name if alias.asname else local}")
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                source = f"from {'.' * node.level}{node.module or ''} import {alias.name}"
                found.setdefault(alias.asname or alias.name, set()).add(source)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.setdefault(node.name, set()).add(f"def at {node.lineno}")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.setdefault(node.id, set()).add(f"assignment at {node.lineno}:{node.col_offset}")
    return found


class _Fix(Fixer):
    """(d) only: rewrites a reported ``torch.cuda.amp.custom_fwd``/``custom_bwd`` decorator
    (bare or called, under any import alias) to ``torch.amp.<same>(device_type="cuda",
    ...)``, adds ``import torch`` when needed and drops the old import once unused.
    A call with a positional argument is left alone."""

    def __init__(self, analysis: "FileAnalysis", diagnostics: Sequence[Diagnostic]) -> None:
        super().__init__(analysis, diagnostics)
        # Position of each deprecated decorator on the file's own methods -> custom_fwd/custom_bwd.
        self.targets: dict[Position, tuple[str, Decorator]] = {}
        for function in analysis.functions:
            for method in function.methods.values():
                for decorator in method.decorators:
                    found = _which(decorator)
                    if found is not None and found[1] and decorator.position in self.positions:
                        self.targets[decorator.position] = (found[0], decorator)

    def leave_Decorator(self, original_node: cst.Decorator, updated_node: cst.Decorator) -> cst.Decorator:
        target = self.targets.get(self.position(original_node))
        if target is None:
            return updated_node
        kind, decorator = target
        expression = updated_node.decorator
        if isinstance(expression, cst.Call) and any(arg.keyword is None for arg in expression.args):
            return updated_node
        name = cst.Attribute(cst.Attribute(cst.Name("torch"), cst.Name("amp")), cst.Name(kind))
        device = cst.Arg(
            cst.SimpleString('"cuda"'),
            keyword=cst.Name("device_type"),
            equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
        )
        if isinstance(expression, cst.Call):
            if expression.args:
                device = device.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            call = expression.with_changes(func=name, args=[device, *expression.args])
        else:
            call = cst.Call(name, [device])
        self.needed_imports.append(ImportRef("torch"))
        head = decorator.text.split("(", 1)[0].split(".", 1)[0].strip()
        bound = self.analysis.imports.aliases.get(head)
        if bound is not None and head != "torch":
            # `from torch.cuda.amp import custom_fwd [as head]` or `import torch.cuda.amp as head`.
            module, _, obj = bound.rpartition(".")
            self.unused_imports.append(ImportRef(module, obj, head if head != obj else None))
            self.unused_imports.append(ImportRef(bound, None, head))
        return updated_node.with_changes(decorator=call)


class CustomFwdBwd(Rule):
    """Checks the AMP decorators ``custom_fwd``/``custom_bwd`` (resolved through imports)
    on forward and backward/vjp.  (a) ``custom_fwd`` on the forward of a split-style
    Function: it stores its state on forward's first argument, which is then an input,
    not ctx.  (b) ``custom_bwd`` on backward while the effective forward has no
    ``custom_fwd``: it reads ``ctx._fwd_used_autocast``, which only ``custom_fwd`` sets.
    (c) ``torch.amp.custom_fwd``/``custom_bwd`` without ``device_type=``.  (d) the
    deprecated ``torch.cuda.amp.custom_fwd``/``custom_bwd`` (warning).  A decorator whose
    local name the module binds to more than one thing (a version fallback such as ``try: from
    torch.amp import custom_fwd`` / ``except: from torch.cuda.amp import custom_fwd``)
    can't be resolved statically and is skipped."""

    code = "AGL023"
    title = "`custom_fwd`/`custom_bwd` (AMP) misuse"
    severity = Severity.ERROR
    fix = FixSafety.SAFE  # (d): torch.cuda.amp.custom_fwd/bwd -> torch.amp.custom_fwd/bwd(device_type="cuda")
    fixer = _Fix
    why = (
        "(a) and (b): `AttributeError: 'FBackward' object has no attribute '_fwd_used_autocast'` "
        "during backward, with or without autocast. (c) At class definition: `TypeError: "
        "custom_fwd() missing 1 required keyword-only argument: 'device_type'`. (d) "
        "``FutureWarning: `torch.cuda.amp.custom_fwd(args...)` is deprecated. Please use "
        "`torch.amp.custom_fwd(args..., device_type='cuda')` instead.`` (same for `custom_bwd`)."
    )

    def check_function(self, ctx: FunctionContext) -> Iterator[Report]:
        function = ctx.function
        for name in ("forward", "backward", "vjp"):
            method = function.methods.get(name)
            if method is None or not ctx.own(method):
                continue
            for decorator in method.decorators:
                found = _which(decorator)
                if found is None or not self._resolvable(ctx, decorator):
                    continue
                kind, deprecated = found
                yield from self._check(ctx, method, decorator, kind, deprecated)

    def _check(
        self, ctx: FunctionContext, method: MethodSpec, decorator: Decorator, kind: str, deprecated: bool
    ) -> Iterator[Report]:
        function = ctx.function
        where = f"{function.name}.{method.name}"
        position = decorator.position or method.position
        if deprecated:
            yield Report(
                position,
                f"{where} uses the deprecated torch.cuda.amp.{kind}; use "
                f'torch.amp.{kind}(device_type="cuda")',
                Severity.INFO,  # a FutureWarning: compatibility
            )
        elif not decorator.is_call or (
            "device_type" not in decorator.keywords and "**" not in decorator.text
        ):
            yield Report(
                position,
                f"{where} uses torch.amp.{kind} without device_type=, which raises TypeError "
                "when the class is defined",
            )
        if kind == "custom_fwd" and method.name == "forward" and function.is_split_style:
            yield Report(
                position,
                f"{where} is decorated with {kind}, but {function.name} overrides setup_context: "
                f"{kind} stores autocast state on forward's first argument, which is then an "
                "input, not ctx (custom_bwd fails with AttributeError '_fwd_used_autocast')",
            )
        if kind == "custom_bwd" and method.name in ("backward", "vjp") and self._forward_lacks_fwd(ctx):
            yield Report(
                position,
                f"{where} is decorated with {kind}, but forward has no custom_fwd: backward "
                "fails with AttributeError: ... has no attribute '_fwd_used_autocast'",
            )

    @staticmethod
    def _resolvable(ctx: FunctionContext, decorator: Decorator) -> bool:
        head = decorator.text.split("(", 1)[0].split(".", 1)[0].strip()
        return len(_bindings(ctx.analysis.source.text).get(head, ())) <= 1

    @staticmethod
    def _forward_lacks_fwd(ctx: FunctionContext) -> bool:
        """True only when the effective forward is known and certainly has no custom_fwd."""
        function = ctx.function
        forward = function.method("forward")
        if forward is None:
            return False
        for decorator in forward.decorators:
            # An unknown decorator may wrap custom_fwd (a partial, a project helper).
            if decorator.qualified_name not in _NEUTRAL:
                return False
        for name in ("forward", "setup_context"):
            method = function.method(name)
            if method is not None and any(w.attribute == "_fwd_used_autocast" for w in method.ctx_writes):
                return False
        return True

    VALID = [
        Valid(
            """
            import torch
            from torch.amp import custom_bwd, custom_fwd

            class Mul(torch.autograd.Function):
                @staticmethod
                @custom_fwd(device_type="cuda", cast_inputs=torch.float32)
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                @custom_bwd(device_type="cuda")
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    return grad * b, grad * a
            """
        ),
        # Trap 8: a version fallback binds custom_fwd twice, so it can't be resolved;
        # a project's own wrapper on forward may apply custom_fwd.
        Valid(
            """
            import functools
            import torch

            try:
                from torch.amp import custom_fwd, custom_bwd
                custom_fwd = functools.partial(custom_fwd, device_type="cuda")
                custom_bwd = functools.partial(custom_bwd, device_type="cuda")
            except ImportError:
                from torch.cuda.amp import custom_fwd, custom_bwd

            amp_forward = functools.partial(torch.amp.custom_fwd, device_type="cuda")

            class Exp(torch.autograd.Function):
                @staticmethod
                @custom_fwd
                def forward(ctx, x):
                    y = x.exp()
                    ctx.save_for_backward(y)
                    return y

                @staticmethod
                @custom_bwd
                def backward(ctx, grad):
                    (y,) = ctx.saved_tensors
                    return grad * y

            class Sin(torch.autograd.Function):
                @staticmethod
                @amp_forward
                def forward(ctx, x):
                    ctx.save_for_backward(x)
                    return x.sin()

                @staticmethod
                @torch.amp.custom_bwd(device_type="cuda")
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    return grad * x.cos()
            """
        ),
        # Trap 5: forward with custom_fwd lives in the base; the subclass adds custom_bwd.
        Valid(
            """
            import torch

            class Base(torch.autograd.Function):
                @staticmethod
                @torch.amp.custom_fwd(device_type="cpu")
                def forward(ctx, x):
                    return x * 2

            class Double(Base):
                @staticmethod
                @torch.amp.custom_bwd(device_type="cpu")
                def backward(ctx, grad):
                    return grad * 2
            """
        ),
        # Trap 6: another library's custom_fwd is not torch's.
        Valid(
            """
            import torch
            from mylib.amp import custom_fwd

            class Id(torch.autograd.Function):
                @staticmethod
                @custom_fwd
                def forward(x):
                    return x.clone()

                @staticmethod
                def setup_context(ctx, inputs, output):
                    pass

                @staticmethod
                def backward(ctx, grad):
                    return grad
            """
        ),
    ]
    INVALID = [
        # (d) deprecated, in bare-decorator form (TorchFix misses this one).
        Invalid(
            """
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                @torch.cuda.amp.custom_fwd
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                @torch.cuda.amp.custom_bwd
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    return grad * b, grad * a
            """,
            line=11,
            message='Mul.backward uses the deprecated torch.cuda.amp.custom_bwd; use torch.amp.custom_bwd(device_type="cuda")',
            fixed="""
            import torch

            class Mul(torch.autograd.Function):
                @staticmethod
                @torch.amp.custom_fwd(device_type="cuda")
                def forward(ctx, a, b):
                    ctx.save_for_backward(a, b)
                    return a * b

                @staticmethod
                @torch.amp.custom_bwd(device_type="cuda")
                def backward(ctx, grad):
                    a, b = ctx.saved_tensors
                    return grad * b, grad * a
            """,
        ),
        # (d) imported by name, called with arguments: the fix imports torch and drops
        # the deprecated import once nothing uses it.
        Invalid(
            """
            from torch.autograd import Function
            from torch.cuda.amp import custom_bwd, custom_fwd

            class Tanh(Function):
                @staticmethod
                @custom_fwd(cast_inputs=None)  # keep fp32
                def forward(ctx, x):
                    y = x.tanh()
                    ctx.save_for_backward(y)
                    return y

                @staticmethod
                @custom_bwd
                def backward(ctx, grad):
                    (y,) = ctx.saved_tensors
                    return grad * (1 - y * y)
            """,
            line=6,
            message="Tanh.forward uses the deprecated torch.cuda.amp.custom_fwd",
            fixed="""
            from torch.autograd import Function
            import torch

            class Tanh(Function):
                @staticmethod
                @torch.amp.custom_fwd(device_type="cuda", cast_inputs=None)  # keep fp32
                def forward(ctx, x):
                    y = x.tanh()
                    ctx.save_for_backward(y)
                    return y

                @staticmethod
                @torch.amp.custom_bwd(device_type="cuda")
                def backward(ctx, grad):
                    (y,) = ctx.saved_tensors
                    return grad * (1 - y * y)
            """,
        ),
        # (a) split style.
        Invalid(
            """
            import torch
            from torch.amp import custom_fwd

            class Sin(torch.autograd.Function):
                @staticmethod
                @custom_fwd(device_type="cuda")
                def forward(x):
                    return x.sin()

                @staticmethod
                def setup_context(ctx, inputs, output):
                    ctx.save_for_backward(inputs[0])

                @staticmethod
                def backward(ctx, grad):
                    (x,) = ctx.saved_tensors
                    return grad * x.cos()
            """,
            line=6,
            message="Sin.forward is decorated with custom_fwd, but Sin overrides setup_context",
        ),
        # (b) custom_bwd without custom_fwd.
        Invalid(
            """
            import torch
            from torch.amp import custom_bwd

            class Exp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    y = x.exp()
                    ctx.save_for_backward(y)
                    return y

                @staticmethod
                @custom_bwd(device_type="cuda")
                def backward(ctx, grad):
                    (y,) = ctx.saved_tensors
                    return grad * y
            """,
            line=12,
            message="Exp.backward is decorated with custom_bwd, but forward has no custom_fwd",
        ),
        # (c) torch.amp's decorators need device_type, bare or called.
        Invalid(
            """
            import torch
            import torch.amp as amp
            from torch.autograd import Function

            class Tanh(Function):
                @staticmethod
                @amp.custom_fwd(cast_inputs=torch.float32)
                def forward(ctx, x):
                    y = x.tanh()
                    ctx.save_for_backward(y)
                    return y

                @staticmethod
                @amp.custom_bwd
                def backward(ctx, grad):
                    (y,) = ctx.saved_tensors
                    return grad * (1 - y * y)
            """,
            line=14,
            message="Tanh.backward uses torch.amp.custom_bwd without device_type=",
        ),
    ]
