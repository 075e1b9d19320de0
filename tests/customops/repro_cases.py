"""The behaviours of the design note's custom-op repro scripts, as pairs of modules.

Each :class:`Repro` holds a bad module (the repro script's failing case, ops at
module level so that gen-tests can import them) and a good one (the fix), the rule
that must flag the bad one, and whether the generated tests must fail on it.
Copied from ``custom-ops-repro/`` (torch 2.13, CPU); the tests never read that
directory.
"""

from __future__ import annotations

from dataclasses import dataclass

HEADER = "import numpy as np\nimport torch\nfrom torch import Tensor\n\n"


@dataclass(frozen=True)
class Repro:
    name: str
    code: str  # the rule that flags the bad module
    bad: str
    good: str
    # Whether the generated suite fails on the bad module (False: the lint alone catches it).
    generated_fails: bool = True


def _op(namespace: str, body: str) -> str:
    return HEADER + body.replace("NS", namespace)


REPROS = [
    Repro(  # customop_trailing_defaults.py
        "trailing_defaults", "AGL101",
        _op("rt1b", '''
@torch.library.custom_op("NS::op", mutates_args=())
def op(x: Tensor, a: float = 1.0, b: bool = False, c: int = 0) -> Tensor:
    return x * a

@op.register_fake
def _(x, a=1.0, b=False, c=0):
    return torch.empty_like(x)

def sc(ctx, inputs, output):
    ctx.a = inputs[1]

def bw(ctx, g):
    return g * ctx.a, None

op.register_autograd(bw, setup_context=sc)
'''),
        _op("rt1g", '''
@torch.library.custom_op("NS::op", mutates_args=())
def op(x: Tensor, a: float = 1.0, b: bool = False, c: int = 0) -> Tensor:
    return x * a

@op.register_fake
def _(x, a=1.0, b=False, c=0):
    return torch.empty_like(x)

def sc(ctx, inputs, output):
    ctx.a = inputs[1]

def bw(ctx, g):
    return g * ctx.a, None, None, None

op.register_autograd(bw, setup_context=sc)
'''),
    ),
    Repro(  # customop_setup_context.py: renamed parameters
        "setup_context_names", "AGL102",
        _op("rt2b", '''
@torch.library.custom_op("NS::a", mutates_args=())
def a(x: Tensor, y: float) -> Tensor:
    return x * y

@a.register_fake
def _(x, y):
    return torch.empty_like(x)

def sc(ctx, args, out):
    ctx.y = args[1]

a.register_autograd(lambda ctx, g: (g * ctx.y, None), setup_context=sc)
'''),
        _op("rt2g", '''
@torch.library.custom_op("NS::a", mutates_args=())
def a(x: Tensor, y: float) -> Tensor:
    return x * y

@a.register_fake
def _(x, y):
    return torch.empty_like(x)

def sc(ctx, inputs, output):
    ctx.y = inputs[1]

a.register_autograd(lambda ctx, g: (g * ctx.y, None), setup_context=sc)
'''),
    ),
    Repro(  # customop_basic.py case 1: unpacking 1 of 2
        "setup_context_unpacking", "AGL103",
        _op("rt3b", '''
@torch.library.custom_op("NS::mul1", mutates_args=())
def mul1(x: Tensor, y: float) -> Tensor:
    return x * y

@mul1.register_fake
def _(x, y):
    return torch.empty_like(x)

def setup_context(ctx, inputs, output):
    y, = inputs
    ctx.y = y

def backward(ctx, grad):
    return grad * ctx.y, None

mul1.register_autograd(backward, setup_context=setup_context)
'''),
        _op("rt3g", '''
@torch.library.custom_op("NS::mul1", mutates_args=())
def mul1(x: Tensor, y: float) -> Tensor:
    return x * y

@mul1.register_fake
def _(x, y):
    return torch.empty_like(x)

def setup_context(ctx, inputs, output):
    x, y = inputs
    ctx.y = y

def backward(ctx, grad):
    return grad * ctx.y, None

mul1.register_autograd(backward, setup_context=setup_context)
'''),
    ),
    Repro(  # customop_basic.py case 3 / customop_compile.py: mutates_args misses `out`
        "undeclared_mutation", "AGL104",
        _op("rt4b", '''
@torch.library.custom_op("NS::bad_mut", mutates_args=())
def bad_mut(x: Tensor, out: Tensor) -> None:
    out.copy_(x.sin())

@bad_mut.register_fake
def _(x, out):
    return None
'''),
        _op("rt4g", '''
@torch.library.custom_op("NS::bad_mut", mutates_args=("out",))
def bad_mut(x: Tensor, out: Tensor) -> None:
    out.copy_(x.sin())

@bad_mut.register_fake
def _(x, out):
    return None
'''),
    ),
    Repro(  # customop_basic.py case 8: mutates_args typo
        "mutates_args_typo", "AGL105",
        _op("rt5b", '''
@torch.library.custom_op("NS::typo", mutates_args=("outt",))
def typo(x: Tensor, out: Tensor) -> None:
    out.copy_(x)
'''),
        _op("rt5g", '''
@torch.library.custom_op("NS::typo", mutates_args=("out",))
def typo(x: Tensor, out: Tensor) -> None:
    out.copy_(x)
'''),
    ),
    Repro(  # customop_basic.py case 4b: returns a view of its input
        "returns_view", "AGL106",
        _op("rt6b", '''
@torch.library.custom_op("NS::view", mutates_args=())
def view(x: Tensor) -> Tensor:
    return x.view(-1)

@view.register_fake
def _(x):
    return x.new_empty(x.numel())
'''),
        _op("rt6g", '''
@torch.library.custom_op("NS::view", mutates_args=())
def view(x: Tensor) -> Tensor:
    return x.reshape(-1).clone()

@view.register_fake
def _(x):
    return x.new_empty(x.numel())
'''),
    ),
    Repro(  # customop_basic.py case 6: register_autograd on a mutable op
        "autograd_on_mutable", "AGL107",
        _op("rt7b", '''
@torch.library.custom_op("NS::mut3", mutates_args=("x",))
def mut3(x: Tensor) -> None:
    x.add_(1)

mut3.register_autograd(lambda ctx, g: g)
'''),
        _op("rt7g", '''
@torch.library.custom_op("NS::mut3", mutates_args=("x",))
def mut3(x: Tensor) -> None:
    x.add_(1)
'''),
    ),
    Repro(  # customop_basic.py case 9: keyword-only Tensor
        "keyword_only_tensor", "AGL108",
        _op("rt8b", '''
@torch.library.custom_op("NS::kwt", mutates_args=())
def kwt(x: Tensor, *, w: Tensor) -> Tensor:
    return x * w
'''),
        _op("rt8g", '''
@torch.library.custom_op("NS::kwt", mutates_args=())
def kwt(x: Tensor, w: Tensor) -> Tensor:
    return x * w

@kwt.register_fake
def _(x, w):
    return torch.empty_like(x)
'''),
    ),
    Repro(  # customop_basic.py case 7: missing annotation
        "missing_annotation", "AGL109",
        _op("rt9b", '''
@torch.library.custom_op("NS::noann", mutates_args=())
def noann(x, y: float) -> Tensor:
    return x * y
'''),
        _op("rt9g", '''
@torch.library.custom_op("NS::noann", mutates_args=())
def noann(x: Tensor, y: float) -> Tensor:
    return x * y

@noann.register_fake
def _(x, y):
    return torch.empty_like(x)
'''),
    ),
    Repro(  # customop_basic.py case 10: no fake under compile (eager is right: a lint finding only)
        "missing_fake", "AGL110",
        _op("rt10b", '''
@torch.library.custom_op("NS::nofake", mutates_args=())
def nofake(x: Tensor) -> Tensor:
    return x.sin()
'''),
        _op("rt10g", '''
@torch.library.custom_op("NS::nofake", mutates_args=())
def nofake(x: Tensor) -> Tensor:
    return x.sin()

@nofake.register_fake
def _(x):
    return torch.empty_like(x)
'''),
        generated_fails=False,
    ),
    Repro(  # customop_fake.py: the fake calls .numpy()
        "fake_numpy", "AGL111",
        _op("rt11b", '''
@torch.library.custom_op("NS::b", mutates_args=())
def b(x: Tensor) -> Tensor:
    return x * 2

@b.register_fake
def _(x):
    n = x.numpy().shape[0]
    return x.new_empty(n)
'''),
        _op("rt11g", '''
@torch.library.custom_op("NS::b", mutates_args=())
def b(x: Tensor) -> Tensor:
    return x * 2

@b.register_fake
def _(x):
    return torch.empty_like(x)
'''),
    ),
    Repro(  # customop_fake.py: the fake takes fewer parameters
        "fake_arity", "AGL112",
        _op("rt12b", '''
@torch.library.custom_op("NS::a", mutates_args=())
def a(x: Tensor, s: float) -> Tensor:
    return x * s

@a.register_fake
def _(x):
    return torch.empty_like(x)
'''),
        _op("rt12g", '''
@torch.library.custom_op("NS::a", mutates_args=())
def a(x: Tensor, s: float) -> Tensor:
    return x * s

@a.register_fake
def _(x, s):
    return torch.empty_like(x)
'''),
    ),
    Repro(  # customop_fake.py: the fake drops the dtype
        "fake_dtype", "AGL113",
        _op("rt13b", '''
@torch.library.custom_op("NS::c", mutates_args=())
def c(x: Tensor) -> Tensor:
    return x * 2

@c.register_fake
def _(x):
    return torch.empty(x.shape)
'''),
        _op("rt13g", '''
@torch.library.custom_op("NS::c", mutates_args=())
def c(x: Tensor) -> Tensor:
    return x * 2

@c.register_fake
def _(x):
    return torch.empty_like(x)
'''),
    ),
    Repro(  # customop_compile.py: NumPy in the registered backward
        "numpy_backward", "AGL114",
        _op("rt14b", '''
@torch.library.custom_op("NS::npsin", mutates_args=())
def npsin(x: Tensor) -> Tensor:
    return torch.from_numpy(np.sin(x.detach().numpy()))

@npsin.register_fake
def _(x):
    return torch.empty_like(x)

def setup_context(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])

def backward(ctx, g):
    x, = ctx.saved_tensors
    return g * torch.from_numpy(np.cos(x.detach().numpy()))

npsin.register_autograd(backward, setup_context=setup_context)
'''),
        _op("rt14g", '''
@torch.library.custom_op("NS::npsin", mutates_args=())
def npsin(x: Tensor) -> Tensor:
    return torch.from_numpy(np.sin(x.detach().numpy()))

@npsin.register_fake
def _(x):
    return torch.empty_like(x)

def setup_context(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])

def backward(ctx, g):
    x, = ctx.saved_tensors
    return g * torch.cos(x)

npsin.register_autograd(backward, setup_context=setup_context)
'''),
    ),
    Repro(  # customop_setup_context.py: save_for_backward(*inputs) with a float
        "save_star_inputs", "AGL115",
        _op("rt15b", '''
@torch.library.custom_op("NS::h", mutates_args=())
def h(x: Tensor, y: float) -> Tensor:
    return x * y

@h.register_fake
def _(x, y):
    return torch.empty_like(x)

def sc8(ctx, inputs, output):
    ctx.save_for_backward(*inputs)
    ctx.y = inputs[1]

h.register_autograd(lambda ctx, g: (g * ctx.y, None), setup_context=sc8)
'''),
        _op("rt15g", '''
@torch.library.custom_op("NS::h", mutates_args=())
def h(x: Tensor, y: float) -> Tensor:
    return x * y

@h.register_fake
def _(x, y):
    return torch.empty_like(x)

def sc8(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])
    ctx.y = inputs[1]

h.register_autograd(lambda ctx, g: (g * ctx.y, None), setup_context=sc8)
'''),
    ),
    Repro(  # customop_setup_context.py: gradient for an int input
        "grad_for_int", "AGL115",
        _op("rt15c", '''
@torch.library.custom_op("NS::d", mutates_args=())
def d(x: Tensor, n: int) -> Tensor:
    return x * n

@d.register_fake
def _(x, n):
    return torch.empty_like(x)

def sc4(ctx, inputs, output):
    ctx.n = inputs[1]

d.register_autograd(lambda ctx, g: (g * ctx.n, g), setup_context=sc4)
'''),
        _op("rt15d", '''
@torch.library.custom_op("NS::d", mutates_args=())
def d(x: Tensor, n: int) -> Tensor:
    return x * n

@d.register_fake
def _(x, n):
    return torch.empty_like(x)

def sc4(ctx, inputs, output):
    ctx.n = inputs[1]

d.register_autograd(lambda ctx, g: (g * ctx.n, None), setup_context=sc4)
'''),
    ),
    Repro(  # design note C16: a Function applied inside an op without register_autograd (lint only:
        # the generated opcheck checks such an op without requires_grad, where it is right)
        "function_apply_in_op", "AGL116",
        _op("rt16b", '''
class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2

@torch.library.custom_op("NS::double", mutates_args=())
def double(x: Tensor) -> Tensor:
    return Double.apply(x)

@double.register_fake
def _(x):
    return torch.empty_like(x)
'''),
        _op("rt16g", '''
@torch.library.custom_op("NS::double", mutates_args=())
def double(x: Tensor) -> Tensor:
    return x * 2

@double.register_fake
def _(x):
    return torch.empty_like(x)

double.register_autograd(lambda ctx, g: g * 2)
'''),
        generated_fails=False,
    ),
    Repro(  # ctx_attr_typo.py
        "ctx_attribute_typo", "AGL031",  # an autograd.Function: AGL031 (AGL117 is for registered backwards)
        HEADER + '''
class F(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lambd: float):
        ctx.lamda = lambd
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return -ctx.lambd * g, None
''',
        HEADER + '''
class F(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lambd: float):
        ctx.lambd = lambd
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return 2 * g, None
''',
    ),
]
