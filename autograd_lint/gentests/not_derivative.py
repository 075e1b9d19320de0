"""A static hint: backward plainly is not the derivative of forward.

Recognised, on the source of ``forward`` and ``backward`` alone (one output, one
incoming gradient ``g``; either style, ``setup_context`` or not), where a backward
"returns the gradient" when an element of its return is ``g``, or ``g`` scaled
(``-g``, ``g * alpha``, ``alpha * g / 2``), directly or through a local variable:

* **identity scaled or zeroed**: forward returns input ``p`` unchanged (``p``, ``p.clone()``,
  ``p.view_as(p)``; ``p`` not written in forward) and backward returns, for ``p``, ``g`` scaled (a gradient-reversal
  layer, gradient scaling) or zeros (``torch.zeros(...)``, ``zeros_like``, ``new_zeros``, ``g * 0``; a
  stop-gradient): the derivative of the identity is ``g`` itself.  With several outputs, each a distinct
  input unchanged (``return x.clone(), y.clone()``), the same output by output;
* **gradient rerouted**: forward returns input ``p`` unchanged and backward
  returns the gradient for another input ``q``, on which the output does not
  depend (``_StitchGradient`` of torchdiffeq);
* **overwritten input passed through**: forward assigns into a subscript of input
  ``p`` (``p[i] = v``, ``p.data[i] = v``) and returns ``p``, and backward returns
  ``g`` unchanged for ``p``: the overwritten elements have derivative 0;
* **straight-through estimator**: forward returns ``round``, ``floor``, ``ceil``,
  ``trunc``, ``sign`` or ``heaviside`` of input ``p``, and backward returns the
  gradient for ``p``: the derivative of a step function is 0 almost everywhere;
* **surrogate of a step**: every output of forward is piecewise constant in input
  ``p`` (built from ``p`` only through comparisons ``p > t``/``p.gt(t)``, the step
  functions above, ``argmax``/``argmin``, ``one_hot``, and casts, sums and products of
  such values: a spike ``(mem > thr).float()``), and backward returns for ``p`` a
  gradient that is neither ``None`` nor zeros (a smooth surrogate): the derivative
  of forward in ``p`` is 0 almost everywhere;
* **sampled gradient**: backward draws random numbers (``torch.rand*``,
  ``multinomial``, ``bernoulli``, ``normal``, ``poisson``, ``dirichlet``-like
  ``.sample()``/``.rsample()``, Gumbel noise ``-log(-log(u))`` from these): its gradient is a
  sample, not the derivative; such a Function is also not asked for a deterministic backward.

gradcheck must fail on each.  Such a Function is deliberate more often than not,
but the same pattern can be a bug: gen-tests generates it as an undeclared
surrogate (the checks that still hold) and keeps ``test_gradcheck`` as an
expected failure whose reason says what was recognised.  Nothing here imports torch.
"""

from __future__ import annotations

import ast
import textwrap
from typing import Sequence

from autograd_lint.model.spec import FunctionSpec, MethodSpec

_STEP_FUNCTIONS = frozenset({"round", "floor", "ceil", "trunc", "sign", "heaviside", "fix"})


def method_ast(method: MethodSpec, lines: Sequence[str]) -> ast.FunctionDef | None:
    start = method.position.line
    source = textwrap.dedent("\n".join(lines[start - 1:method.last_line]))
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    node = tree.body[0] if tree.body else None
    return node if isinstance(node, ast.FunctionDef) else None


def _assignments(function: ast.FunctionDef) -> dict[str, list[ast.expr]]:
    """Every value assigned to each plain local name (simple ``name = value`` only)."""
    found: dict[str, list[ast.expr]] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, []).append(node.value)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
            found.setdefault(node.target.id, []).append(ast.Constant("opaque") if node.value is None else node)
    return found


def _returns(function: ast.FunctionDef) -> list[ast.expr | None]:
    nested = {id(n) for child in ast.walk(function) if child is not function
              and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) for n in ast.walk(child)}
    return [node.value for node in ast.walk(function) if isinstance(node, ast.Return) and id(node) not in nested]


def _resolve(expr: ast.expr, assigned: dict[str, list[ast.expr]], depth: int = 0) -> list[ast.expr]:
    """The expressions a value may be: a local name is replaced by what was assigned to it."""
    if isinstance(expr, ast.Name) and expr.id in assigned and depth < 4:
        resolved: list[ast.expr] = []
        for value in assigned[expr.id]:
            resolved += _resolve(value, assigned, depth + 1)
        return resolved
    return [expr]


def _mentions(expr: ast.AST, name: str) -> bool:
    return any(isinstance(node, ast.Name) and node.id == name for node in ast.walk(expr))


_ZERO_CONSTRUCTORS = frozenset({"zeros", "zeros_like", "new_zeros"})


def _gradient_form(expr: ast.expr, grad: str) -> str | None:
    """"grad" for ``g`` (or ``g.clone()``), "scaled" for ``g`` times/over factors, "none" for None,
    "zeros" for a tensor of zeros (``torch.zeros(...)``, ``torch.zeros_like(g)``, ``g.new_zeros(...)``, ``g * 0``),
    else None."""
    if isinstance(expr, ast.Constant) and expr.value is None:
        return "none"
    if isinstance(expr, ast.Call):
        func = expr.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name in _ZERO_CONSTRUCTORS:
            return "zeros"
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult) and any(
            isinstance(side, ast.Constant) and side.value == 0 and not isinstance(side.value, bool)
            for side in (expr.left, expr.right)):
        return "zeros"
    if isinstance(expr, ast.Name) and expr.id == grad:
        return "grad"
    if (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "clone"
            and not expr.args and _gradient_form(expr.func.value, grad) == "grad"):
        return "grad"
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        return "scaled" if _gradient_form(expr.operand, grad) in ("grad", "scaled") else None
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Mult, ast.Div)):
        left = _gradient_form(expr.left, grad)
        right = _gradient_form(expr.right, grad) if isinstance(expr.op, ast.Mult) else None
        if left in ("grad", "scaled") and not _mentions(expr.right, grad):
            return "scaled"
        if right in ("grad", "scaled") and not _mentions(expr.left, grad):
            return "scaled"
    return None


def _element_forms(backward: ast.FunctionDef, grad: str, count: int) -> list[set[str]] | None:
    """Per input position, the gradient forms backward may return there; None if not recognised."""
    assigned = _assignments(backward)
    # ``out = torch.zeros_like(g); out[mask] = g[mask]``: not the zeros it started as.
    for name in _written_subscripts(backward):
        assigned[name] = [ast.Constant("opaque")]
    forms: list[set[str]] = [set() for _ in range(count)]
    returns = _returns(backward)
    if not returns:
        return None
    for value in returns:
        if value is None:
            return None
        elements = value.elts if isinstance(value, ast.Tuple) else [value]
        if any(isinstance(e, ast.Starred) for e in elements):
            return None
        for position, element in enumerate(elements[:count]):
            for possible in _resolve(element, assigned):
                forms[position].add(_gradient_form(possible, grad) or "other")
    return forms


def _written_subscripts(forward: ast.FunctionDef) -> set[str]:
    """Names written through a subscript (``p[i] = v``, ``p.data[i] = v``) or in place (``p.add_(...)``)."""
    written: set[str] = set()
    for node in ast.walk(forward):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign):
            targets = [node.target]
        for target in targets:
            if isinstance(node, ast.AugAssign) and isinstance(target, ast.Name):  # ``p += v`` is in place
                written.add(target.id)
            if isinstance(target, (ast.Subscript, ast.Attribute)):
                root = target
                while isinstance(root, (ast.Subscript, ast.Attribute)):
                    root = root.value
                if isinstance(root, ast.Name):
                    written.add(root.id)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_") \
                and not node.func.attr.endswith("__"):
            root = node.func.value
            while isinstance(root, (ast.Subscript, ast.Attribute)):
                root = root.value
            if isinstance(root, ast.Name):
                written.add(root.id)
    return written


def _subscript_writes(forward: ast.FunctionDef) -> set[str]:
    written: set[str] = set()
    for node in ast.walk(forward):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript):
                    root = target.value
                    while isinstance(root, (ast.Subscript, ast.Attribute)):
                        root = root.value
                    if isinstance(root, ast.Name):
                        written.add(root.id)
    return written


def _identity_of(expr: ast.expr, inputs: list[str]) -> str | None:
    """The input ``expr`` is, unchanged: ``p``, ``p.clone()``, ``p.view_as(p)``."""
    if isinstance(expr, ast.Name):
        return expr.id if expr.id in inputs else None
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and isinstance(expr.func.value, ast.Name):
        name, method = expr.func.value.id, expr.func.attr
        if name in inputs and not expr.keywords and (
                (method == "clone" and not expr.args)
                or (method == "view_as" and len(expr.args) == 1 and isinstance(expr.args[0], ast.Name)
                    and expr.args[0].id == name)):
            return name
    return None


def _step_of(expr: ast.expr, inputs: list[str]) -> str | None:
    """The input a step function (``torch.round(p)``, ``p.sign()``) is applied to, if ``expr`` is one."""
    if not isinstance(expr, ast.Call):
        return None
    func = expr.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name not in _STEP_FUNCTIONS:
        return None
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in inputs:
        return func.value.id
    if expr.args and isinstance(expr.args[0], ast.Name) and expr.args[0].id in inputs:
        return expr.args[0].id
    return None


def not_the_derivative(spec: FunctionSpec, lines: Sequence[str]) -> str | None:
    """Why backward plainly is not the derivative of forward (see the module docstring), or None."""
    forward_method, backward_method = spec.method("forward"), spec.backward_method
    inputs_params = spec.forward_inputs
    if forward_method is None or backward_method is None or inputs_params is None:
        return None
    inputs = [param.name for param in inputs_params]
    grads = [param.name for param in backward_method.positional[1:]]
    forward, backward = method_ast(forward_method, lines), method_ast(backward_method, lines)
    if forward is None or backward is None or not grads or not inputs:
        return None
    if len(grads) > 1:
        return _identities_not_passed(forward, backward, inputs, grads)
    grad = grads[0]
    forms = _element_forms(backward, grad, len(inputs))
    if forms is None:
        return None
    assigned = _assignments(forward)
    returned: set[str] = set()
    steps: set[str] = set()
    for value in _returns(forward):
        if value is None or isinstance(value, ast.Tuple):
            return None
        for possible in _resolve(value, assigned):
            if (identity := _identity_of(possible, inputs)) is not None:
                returned.add(identity)
            elif (step := _step_of(possible, inputs)) is not None:
                steps.add(step)
            else:
                return None
    if len(returned | steps) != 1 or (returned and steps):
        return None
    name = next(iter(returned | steps))
    position = inputs.index(name)
    passes = {"grad", "scaled"}
    mine = forms[position] - {"none"}
    if steps:
        if mine and mine <= passes:
            return (f"forward returns a step function of {name!r} (derivative 0 almost everywhere) and backward "
                    f"passes the output gradient to it: a straight-through estimator")
        return None
    if name in _subscript_writes(forward):
        if mine == {"grad"}:
            return (f"forward overwrites part of {name!r} and returns it, and backward passes the output gradient "
                    f"to {name!r} unchanged, also where it was overwritten (derivative 0 there)")
        return None
    if name in _written_subscripts(forward):
        return None
    if (why := _identity_not_passed(name, mine)) is not None:
        return why
    rerouted = [inputs[i] for i, form in enumerate(forms) if i != position and form & passes]
    if rerouted:
        return (f"forward returns its input {name!r} unchanged, but backward passes the output gradient to "
                f"{', '.join(repr(r) for r in rerouted)}, on which the output does not depend: a rerouted gradient")
    return None


def _identity_not_passed(name: str, forms: set[str]) -> str | None:
    """Why backward's ``forms`` for input ``name``, which an output returns unchanged, are not its gradient."""
    if forms and forms <= {"grad", "scaled"} and "scaled" in forms:
        return (f"forward returns its input {name!r} unchanged and backward returns the output gradient scaled "
                f"(the derivative of the identity is the gradient itself): a gradient reversal or scaling")
    if forms == {"zeros"}:
        return (f"forward returns its input {name!r} unchanged and backward returns zeros for it (the derivative "
                f"of the identity is the gradient itself): a stop-gradient")
    return None


def _identities_not_passed(forward: ast.FunctionDef, backward: ast.FunctionDef, inputs: list[str],
                           grads: list[str]) -> str | None:
    """Several outputs, each a distinct input unchanged (``return x.clone(), y.clone()``): the identity
    patterns of one output, output by output (``torch.testing._internal.autograd_function_db.ZeroGradientsGenVmap``)."""
    returned: list[str] | None = None
    for value in _returns(forward):
        if not isinstance(value, ast.Tuple) or len(value.elts) != len(grads):
            return None
        names = [_identity_of(element, inputs) for element in value.elts]
        if any(n is None for n in names) or (returned is not None and names != returned):
            return None
        returned = names  # type: ignore[assignment]
    if returned is None or len(set(returned)) != len(returned) or set(returned) & _written_subscripts(forward):
        return None
    for grad, name in zip(grads, returned):
        forms = _element_forms(backward, grad, len(inputs))
        if forms is None:
            return None
        if (why := _identity_not_passed(name, forms[inputs.index(name)] - {"none"})) is not None:
            return why
    return None


# Values that are piecewise constant whatever their operands: booleans, indices, steps.
_DISCRETE = frozenset({
    "gt", "ge", "lt", "le", "eq", "ne", "greater", "greater_equal", "less", "less_equal", "not_equal",
    "logical_not", "logical_and", "logical_or", "logical_xor", "isnan", "isinf", "isfinite", "signbit",
    "argmax", "argmin", "argsort", "one_hot", "bucketize", "searchsorted",
}) | _STEP_FUNCTIONS
# Operations whose result is piecewise constant in ``p`` when every operand is: casts, arithmetic, reshaping.
_COMBINING = frozenset({
    "float", "double", "half", "bfloat16", "long", "int", "bool", "byte", "short", "to", "type", "type_as",
    "mul", "add", "sub", "div", "neg", "multiply", "sum", "mean", "cumsum", "clone", "detach", "contiguous",
    "view", "view_as", "reshape", "reshape_as", "squeeze", "unsqueeze", "expand", "expand_as", "flatten",
    "permute", "transpose", "t", "where", "masked_fill", "cat", "stack", "abs",
})
# Attributes that describe a tensor without its values.
_METADATA = frozenset({"shape", "dtype", "device", "ndim", "layout", "is_cuda", "requires_grad"})
_MODULES = frozenset({"torch", "F", "functional", "nn", "math", "np", "numpy"})


class _Forward:
    """Which values of forward depend on input ``p``, and which are piecewise constant in it."""

    def __init__(self, forward: ast.FunctionDef, inputs: list[str]) -> None:
        self.inputs = inputs
        self.assigned = _assignments(forward)
        stores: dict[str, int] = {}
        for node in ast.walk(forward):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                stores[node.id] = stores.get(node.id, 0) + 1
        simple = {name: len(values) for name, values in self.assigned.items()}
        # Bound some other way too (a loop, an unpacking, ``with ... as``), or written in place: unknown values.
        self.opaque = {name for name, count in stores.items() if count != simple.get(name, 0)}
        self.opaque |= _written_subscripts(forward)
        self.opaque |= {name for name, values in self.assigned.items()
                        if any(isinstance(v, (ast.AugAssign, ast.AnnAssign))
                               or (isinstance(v, ast.Constant) and v.value == "opaque") for v in values)}

    def depends(self, expr: ast.AST, p: str, depth: int = 0) -> bool:
        if depth > 6:
            return True
        for node in ast.walk(expr):
            if isinstance(node, ast.Name):
                if node.id == p or node.id in self.opaque:
                    return True
                if node.id in self.assigned and node.id not in self.inputs and any(
                        self.depends(value, p, depth + 1) for value in self.assigned[node.id]):
                    return True
        return False

    def constant_pieces(self, expr: ast.AST, p: str, depth: int = 0) -> bool:
        """Whether ``expr`` is piecewise constant in ``p`` (False where unsure)."""
        if depth > 6:
            return False
        if not self.depends(expr, p, depth):
            return True
        if isinstance(expr, ast.Name):
            if expr.id == p or expr.id in self.opaque or expr.id not in self.assigned:
                return False
            return all(self.constant_pieces(value, p, depth + 1) for value in self.assigned[expr.id])
        if isinstance(expr, ast.Compare):
            return True
        if isinstance(expr, ast.BinOp):
            return self.constant_pieces(expr.left, p, depth) and self.constant_pieces(expr.right, p, depth)
        if isinstance(expr, ast.UnaryOp):
            return self.constant_pieces(expr.operand, p, depth)
        if isinstance(expr, ast.IfExp):
            return self.constant_pieces(expr.body, p, depth) and self.constant_pieces(expr.orelse, p, depth)
        if isinstance(expr, ast.Attribute):
            return expr.attr in _METADATA
        if isinstance(expr, ast.Subscript):
            return self.constant_pieces(expr.value, p, depth) and self.constant_pieces(expr.slice, p, depth)
        if isinstance(expr, (ast.Tuple, ast.List)):
            return all(self.constant_pieces(element, p, depth) for element in expr.elts)
        if isinstance(expr, ast.Call):
            return self._call_constant_pieces(expr, p, depth)
        return False

    def _call_constant_pieces(self, call: ast.Call, p: str, depth: int) -> bool:
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name in _DISCRETE:
            return True
        if name not in _COMBINING:
            return False
        operands: list[ast.expr] = list(call.args) + [keyword.value for keyword in call.keywords]
        if isinstance(func, ast.Attribute) and not (isinstance(func.value, ast.Name) and func.value.id in _MODULES) \
                and not isinstance(func.value, ast.Attribute):
            operands.append(func.value)
        if name == "where" and operands:
            operands = operands[1:]  # the condition is boolean: piecewise constant whatever it is
        return all(self.constant_pieces(operand, p, depth) for operand in operands)


def surrogate_of_a_step(spec: FunctionSpec, lines: Sequence[str]) -> str | None:
    """Why backward is a surrogate: forward is piecewise constant in an input backward returns a gradient for."""
    forward_method, backward_method = spec.method("forward"), spec.backward_method
    inputs_params = spec.forward_inputs
    if forward_method is None or backward_method is None or inputs_params is None:
        return None
    inputs = [param.name for param in inputs_params]
    grads = [param.name for param in backward_method.positional[1:]]
    forward, backward = method_ast(forward_method, lines), method_ast(backward_method, lines)
    if forward is None or backward is None or not grads or not inputs:
        return None
    outputs: list[ast.expr] = []
    for value in _returns(forward):
        if value is None:
            return None
        outputs += value.elts if isinstance(value, ast.Tuple) else [value]
    if not outputs:
        return None
    model = _Forward(forward, inputs)
    returned = _returns(backward)
    if not returned or any(value is None for value in returned):
        return None
    for position, name in enumerate(inputs):
        if not all(model.constant_pieces(output, name) for output in outputs) or not any(
                model.depends(output, name) for output in outputs):
            continue
        gradients = [_element_at(value, position) for value in returned]
        if any(g is None for g in gradients):
            continue  # a starred or shorter return: not recognised
        backward_assigned = _assignments(backward)
        forms = {_gradient_form(possible, grads[0]) or "other"
                 for g in gradients for possible in _resolve(g, backward_assigned)}  # type: ignore[arg-type]
        if forms <= {"none", "zeros"}:
            continue
        return (f"forward is piecewise constant in {name!r} (it uses {name!r} only through comparisons, steps or "
                f"casts: derivative 0 almost everywhere) and backward returns a gradient for it: a surrogate "
                "gradient")
    return None


def _element_at(value: ast.expr | None, position: int) -> ast.expr | None:
    if value is None:
        return None
    elements = value.elts if isinstance(value, ast.Tuple) else [value]
    if any(isinstance(e, ast.Starred) for e in elements) or position >= len(elements):
        return None
    return elements[position]


_RANDOM = frozenset({
    "rand", "randn", "rand_like", "randn_like", "randint", "randint_like", "randperm", "multinomial", "bernoulli",
    "normal", "poisson", "bernoulli_", "normal_", "uniform_", "exponential_", "geometric_", "cauchy_",
    "log_normal_", "random_", "sample", "rsample", "gumbel_softmax",
})


def _first_random_call(method: MethodSpec | None, lines: Sequence[str]) -> tuple[str, int] | None:
    """The first call of ``method`` that draws random numbers: its name and line, or None."""
    tree = method_ast(method, lines) if method is not None else None
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name in _RANDOM:
                return name, method.position.line + node.lineno - 1  # type: ignore[union-attr]
    return None


def sampled_gradient(spec: FunctionSpec, lines: Sequence[str]) -> str | None:
    """Why backward's gradient is a random sample (it draws random numbers), or None."""
    found = _first_random_call(spec.backward_method, lines)
    if found is None:
        return None
    name, line = found
    return (f"backward draws random numbers ({name}, line {line}): its gradient is a sample, not the "
            "derivative of forward (a sampled gradient)")


def random_forward(spec: FunctionSpec, lines: Sequence[str]) -> str | None:
    """Why forward's output may be a random sample (forward draws random numbers), or None.

    gradcheck can't judge such a Function (its test skips when forward's outputs
    differ under two seeds), but the gradient contract still holds for it
    (spikingjelly's ``poisson_pass``: a Bernoulli spike forward, the gradient passed
    straight through).
    """
    found = _first_random_call(spec.method("forward"), lines)
    return None if found is None else f"forward draws random numbers ({found[0]}, line {found[1]})"
