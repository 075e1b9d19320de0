"""AGL117: backward reads a ctx attribute that forward / setup_context never set."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Iterable, Iterator

import libcst as cst

from autograd_lint.model.spec import MethodSpec
from autograd_lint.rules._custom_ops import registrations
from autograd_lint.rules.agl031_ctx_attribute_never_set import _assigned_elsewhere, _set_attributes
from autograd_lint.rules.base import Invalid, Report, Rule, Severity, Valid

if TYPE_CHECKING:
    from autograd_lint.model.analysis import FileAnalysis
    from autograd_lint.settings import Settings

# What a ctx (a BackwardCFunction) has without being told: `dir(ctx)` in a backward, torch 2.13.
CTX_BUILTINS = frozenset(
    """
    apply apply_boxed apply_jvp dirty_tensors mark_dirty mark_non_differentiable mark_shared_storage
    materialize_grads maybe_clear_saved_tensors metadata name needs_input_grad next_functions
    non_differentiable register_hook register_prehook requires_grad save_for_backward save_for_forward
    saved_for_forward saved_tensors saved_variables set_materialize_grads to_save
    _autograd_function_id _compiled_autograd_backward_state _compiled_autograd_key _forward_cls
    _get_compiled_autograd_symints _get_user_fn _input_metadata _is_pure_view _materialize_non_diff_grads
    _raw_saved_tensors _register_hook _register_hook_dict _sequence_nr _set_sequence_nr
    """.split()
)


def never_set(
    reader: MethodSpec | None, writers: Iterable[MethodSpec | None], text: str
) -> list[tuple[str, cst.Attribute, set[str]]] | None:
    """(attribute, read node, attributes set) for each read of a ctx attribute in ``reader`` that
    neither it nor a writer sets, as the shared semantic model sees them (AGL031's queries); None
    when some method can't be followed: ctx passed to a call, used in a nested function,
    rebound, its ``__dict__`` touched, or the code is not at hand.  Private names (``ctx._x``)
    and attributes assigned on anything elsewhere in the module are left alone, as AGL031 does."""
    if reader is None or reader.semantic is None or reader.ctx_name is None:
        return None
    written: set[str] = set()
    for method in (*writers, reader):
        if method is None or method.semantic is None:
            return None
        attributes = _set_attributes(method)
        if attributes is None:
            return None
        written |= attributes
    found = []
    seen: set[str] = set()
    for owner, name, node in reader.semantic.attribute_reads:
        if owner != reader.ctx_name or name in written or name in seen:
            continue
        if name in CTX_BUILTINS or name.startswith("_") or _assigned_elsewhere(text, name):
            continue
        seen.add(name)
        found.append((name, node, written))
    return found


def _message(where: str, name: str, written: set[str], setter: str) -> str:
    close = difflib.get_close_matches(name, sorted(written), n=1)
    hint = f" (did you mean ctx.{close[0]}, which {setter} sets?)" if close else ""
    return f"{where} reads ctx.{name}, which {setter} never sets: AttributeError when backward runs{hint}"


class CtxAttributeNeverSet(Rule):
    """Reports a read of ``ctx.<name>`` in a backward handed to ``register_autograd`` when
    the ``setup_context`` registered with it (and the backward itself) never assigns
    ``ctx.<name>``, read through the shared semantic model with AGL031's queries.  Silent
    when ctx is passed to other code (a helper, ``setattr``), used in a nested function or
    rebound, when the setup_context can't be read, for private names (``ctx._x``), and for
    a name assigned on anything elsewhere in the module.  The same mistake in an
    ``autograd.Function`` is AGL031's."""

    code = "AGL117"
    title = "backward reads a ctx attribute that is never set"
    severity = Severity.ERROR
    why = (
        "Typically a typo (`ctx.lamda` set, `ctx.lambd` read); eager forward succeeds and the first backward "
        "fails: `AttributeError: 'FBackward' object has no attribute 'lambd'`."
    )

    def check_module(self, analysis: "FileAnalysis", settings: "Settings") -> Iterator[Report]:
        for op, registration in registrations(analysis, "autograd"):
            backward = registration.function
            if backward is None or backward.node is None or registration.setup_context_unknown:
                continue
            writers = [registration.setup_context.method] if registration.setup_context else []
            found = never_set(backward.method, writers, analysis.source.text)
            for name, node, written in found or ():
                yield Report(
                    analysis.custom_ops.unit.position(node),
                    _message(f"backward `{backward.name}` of {op.display}", name, written, "setup_context"),
                )

    VALID = [
        # An autograd.Function's typo is AGL031's finding, not this rule's.
        Valid(
            """
            import torch

            class F(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, lambd):
                    ctx.lamda = lambd
                    return x * 2

                @staticmethod
                def backward(ctx, g):
                    return -ctx.lambd * g, None
            """
        ),
        # setup_context hands ctx to a helper that may set anything.
        Valid(
            """
            import torch
            from torch import Tensor

            def remember(ctx, **values):
                for key, value in values.items():
                    setattr(ctx, key, value)

            @torch.library.custom_op("demo::mul", mutates_args=())
            def mul(x: Tensor, y: float) -> Tensor:
                return x * y

            def setup_context(ctx, inputs, output):
                remember(ctx, y=inputs[1])

            mul.register_autograd(lambda ctx, g: (g * ctx.y, None), setup_context=setup_context)
            """
        ),
        Valid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::mul", mutates_args=())
            def mul(x: Tensor, y: float) -> Tensor:
                return x * y

            def setup_context(ctx, inputs, output):
                ctx.y = inputs[1]

            def backward(ctx, grad):
                if ctx.needs_input_grad[0]:
                    return grad * ctx.y, None
                return None, None

            mul.register_autograd(backward, setup_context=setup_context)
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::shrink", mutates_args=())
            def shrink(x: Tensor, lambd: float) -> Tensor:
                return x * 2

            def setup_context(ctx, inputs, output):
                ctx.lamda = inputs[1]

            def backward(ctx, g):
                return -ctx.lambd * g, None

            shrink.register_autograd(backward, setup_context=setup_context)
            """,
            line=12,
            message="did you mean ctx.lamda",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::scale", mutates_args=())
            def scale(x: Tensor, s: float) -> Tensor:
                return x * s

            def setup_context(ctx, inputs, output):
                ctx.save_for_backward(inputs[0])

            def backward(ctx, g):
                return g * ctx.s, None

            torch.library.register_autograd("demo::scale", backward, setup_context=setup_context)
            """,
            line=12,
            message="reads ctx.s, which setup_context never sets",
        ),
        Invalid(
            """
            import torch
            from torch import Tensor

            @torch.library.custom_op("demo::mul", mutates_args=())
            def mul(x: Tensor, y: float) -> Tensor:
                return x * y

            def setup_context(ctx, inputs, output):
                ctx.factor = inputs[1]

            mul.register_autograd(lambda ctx, g: (g * ctx.y, None), setup_context=setup_context)
            """,
            line=11,
            message="backward `<lambda>` of demo::mul reads ctx.y",
        ),
    ]
