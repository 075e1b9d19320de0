"""The kinds issue 23 names as missed, as small realistic cases (2-3 spellings each), and
what ``autograd-lint check --select ALL`` reports on each (session 6 checklist; the table in
docs/accuracy.md, "Session 6").

Usage: python bench/issue23_checklist.py OUT   (writes OUT/<case>/..., one tree per case,
outside the repository, and prints the codes reported on each, AGL030/AGL110/AGL153 aside:
those fire on most cases and are not what a case is about).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

# Reported on most cases for reasons of their own (needs_input_grad unused, no fake kernel, classmethod).
NOISE = {"AGL030", "AGL110", "AGL153"}
cases: dict[str, dict[str, str]] = {}
H = "import torch\nimport torch.nn.functional as F\nimport torch.distributed as dist\nfrom torch.autograd import Function\n\n"
def c(name: str, text: str | None, extra: dict[str, str] | None = None) -> None:
    cases[name] = {"case.py": H + textwrap.dedent(text)} if extra is None else {k: textwrap.dedent(v) for k, v in extra.items()}

# 1 AGL009 rebinding before save
c("a1_rebind_quantize", """
def quantize(t, bits):
    s = t.abs().max() / (2 ** (bits - 1) - 1)
    return torch.round(t / s) * s

class QLinear(Function):
    @staticmethod
    def forward(ctx, x, w, bits):
        x = quantize(x, bits)
        w = quantize(w, bits)
        ctx.save_for_backward(x, w)
        return x @ w.t()

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w, g.t() @ x, None
""")
c("a2_rebind_scale", """
class ScaledMM(Function):
    @staticmethod
    def forward(ctx, x, w, scale):
        x = x * scale
        ctx.save_for_backward(x, w)
        ctx.scale = scale
        return x @ w

    @staticmethod
    def backward(ctx, grad_out):
        x, w = ctx.saved_tensors
        return grad_out @ w.t() * ctx.scale, x.t() @ grad_out, None
""")
c("a3_rebind_normalize", """
class CosSim(Function):
    @staticmethod
    def forward(ctx, a, b):
        a = F.normalize(a, dim=-1)
        b = F.normalize(b, dim=-1)
        ctx.save_for_backward(a, b)
        return a @ b.t()

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g @ b, g.t() @ a
""")
# 2 classmethod ctx AGL005
c("b1_classmethod_twice", """
class Mul(Function):
    @classmethod
    def forward(cls, ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @classmethod
    def backward(cls, ctx, g):
        a, _ = ctx.saved_tensors
        _, b = ctx.saved_tensors
        return g * b, g * a
""")
c("b2_classmethod_loop", """
class Mul(Function):
    @classmethod
    def forward(cls, ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @classmethod
    def backward(cls, ctx, grad_output):
        grads = []
        for i in range(2):
            grads.append(grad_output * ctx.saved_tensors[1 - i])
        return tuple(grads)
""")
# 3 collectives
c("c1_allreduce_input", """
class AllReduceFwd(Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, g):
        return g, None
""")
c("c2_allreduce_grad", """
class CopyToTP(Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        torch.distributed.all_reduce(grad_output, group=ctx.group)
        return grad_output, None
""")
c("c3_allreduce_async_grad", """
class CopyToTP(Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x) * 1

    @staticmethod
    def backward(ctx, grad_output):
        handle = dist.all_reduce(grad_output, op=dist.ReduceOp.SUM, group=ctx.group, async_op=True)
        handle.wait()
        return grad_output, None
""")
c("c4_broadcast_input", """
class Bcast(Function):
    @staticmethod
    def forward(ctx, tensor, src):
        ctx.src = src
        dist.broadcast(tensor, src)
        return tensor

    @staticmethod
    def backward(ctx, g):
        dist.reduce(g, ctx.src)
        return g, None
""")
# 4 setattr ctx
c("d1_setattr_input", """
class Lin(Function):
    @staticmethod
    def forward(ctx, x, weight):
        setattr(ctx, "weight", weight)
        ctx.save_for_backward(x)
        return x @ weight.t()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g @ ctx.weight, g.t() @ x
""")
c("d2_setattr_loop_nofalse", """
class Lin(Function):
    @staticmethod
    def forward(ctx, x, weight, alpha, beta):
        for name, value in (("alpha", alpha), ("beta", beta)):
            setattr(ctx, name, value)
        ctx.save_for_backward(x, weight)
        return (x @ weight.t()) * alpha + beta

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        g = g * ctx.alpha
        return g @ weight, g.t() @ x, None, None
""")
c("d3_setattr_misspelt_read", """
class Lin(Function):
    @staticmethod
    def forward(ctx, x, weight, scale):
        setattr(ctx, "scale", scale)
        ctx.save_for_backward(x, weight)
        return (x @ weight.t()) * scale

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        g = g * ctx.scael
        return g @ weight, g.t() @ x, None
""")
# 5 gradients from helper / (None,None)+grads
c("e1_helper_tuple_short", """
def _linear_grads(g, x, w):
    return g @ w, g.t() @ x

class Lin(Function):
    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        return x @ w.t() + b

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return _linear_grads(g, x, w)
""")
c("e2_none_plus_helper", """
def _grads(g, x, w):
    return g @ w, g.t() @ x

class Lin(Function):
    @staticmethod
    def forward(ctx, group, chunks, x, w):
        ctx.save_for_backward(x, w)
        return x @ w.t()

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return (None,) + _grads(g, x, w)
""")
c("e3_none_plus_local", """
class Lin(Function):
    @staticmethod
    def forward(ctx, group, chunks, x, w):
        ctx.save_for_backward(x, w)
        return x @ w.t()

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        grads = (g @ w, g.t() @ x)
        return (None, None, None) + grads
""")
# 6 early return before save
c("f1_early_empty", """
class Sq(Function):
    @staticmethod
    def forward(ctx, x):
        if x.numel() == 0:
            return x.new_empty(x.shape)
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g
""")
c("f2_early_flag", """
class Sq(Function):
    @staticmethod
    def forward(ctx, x, fast):
        y = x * x
        if fast:
            return y
        ctx.save_for_backward(x)
        return y

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g, None
""")
c("f3_early_attr", """
class Sq(Function):
    @staticmethod
    def forward(ctx, x, skip):
        if skip:
            return x.clone()
        ctx.x_shape = x.shape
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return (2 * x * g).view(ctx.x_shape), None
""")
# 7 guarded grads returned unguarded
c("g1_guarded_unbound", """
class Lin(Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w.t()

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        if ctx.needs_input_grad[0]:
            grad_x = g @ w
        if ctx.needs_input_grad[1]:
            grad_w = g.t() @ x
        return grad_x, grad_w
""")
c("g2_guarded_unpacked", """
class Lin(Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w.t()

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        need_x, need_w = ctx.needs_input_grad
        if need_x:
            dx = g @ w
        if need_w:
            dw = g.t() @ x
        return dx, dw
""")
c("g3_guarded_requires_grad", """
class Lin(Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w.t()

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        grad_x = g @ w
        if w.requires_grad:
            grad_w = g.t() @ x
        return grad_x, grad_w
""")
# 8 None grad for differentiably used input
c("h1_none_bias", """
class LinearFn(Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return x @ weight.t() + bias

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        return g @ weight, g.t() @ x, None

class MyLinear(torch.nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(o, i))
        self.bias = torch.nn.Parameter(torch.zeros(o))

    def forward(self, x):
        return LinearFn.apply(x, self.weight, self.bias)
""")
c("h2_none_bias_annot", """
class LinearFn(Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor):
        ctx.save_for_backward(x, weight)
        return torch.addmm(bias, x, weight.t())

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        return g @ weight, g.t() @ x, None
""")
# 9 in-place through detach/data/views
c("i1_detach_apply", """
class Binarize(Function):
    @staticmethod
    def forward(ctx, x):
        mask = x.detach().clamp_(0, 1)
        return mask.round()

    @staticmethod
    def backward(ctx, g):
        return g
""")
c("i2_data_inplace", """
class Clip(Function):
    @staticmethod
    def forward(ctx, x, lo, hi):
        x.data.clamp_(lo, hi)
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2, None, None
""")
c("i3_view_inplace", """
class ZeroFirst(Function):
    @staticmethod
    def forward(ctx, x):
        flat = x.view(-1)
        flat[0] = 0
        return x * 3

    @staticmethod
    def backward(ctx, g):
        return g * 3
""")
c("i4_detach_alias_var", """
class Sign(Function):
    @staticmethod
    def forward(ctx, x):
        y = x.detach()
        y.sign_()
        return y.clone()

    @staticmethod
    def backward(ctx, g):
        return g
""")
# 10 custom ops
c("j1_register_autograd_star_none", None, {"case.py": """
import torch

@torch.library.custom_op("mylib::scale_add", mutates_args=())
def scale_add(x: torch.Tensor, y: torch.Tensor, alpha: float, beta: float, gamma: float) -> torch.Tensor:
    return x * alpha + y * beta + gamma

def _setup(ctx, inputs, output):
    ctx.alpha = inputs[2]

def _backward(ctx, grad):
    return grad * ctx.alpha, *((None,) * 2)

torch.library.register_autograd("mylib::scale_add", _backward, setup_context=_setup)
"""})
c("j1b_register_autograd_method_form", None, {"case.py": """
import torch

@torch.library.custom_op("mylib::scale_add", mutates_args=())
def scale_add(x: torch.Tensor, y: torch.Tensor, alpha: float, beta: float, gamma: float) -> torch.Tensor:
    return x * alpha + y * beta + gamma

def _setup(ctx, inputs, output):
    ctx.alpha = inputs[2]

def _backward(ctx, grad):
    return grad * ctx.alpha, *((None,) * 2)

scale_add.register_autograd(_backward, setup_context=_setup)
"""})
c("j2_op_imported", None, {"ops.py": """
import torch

@torch.library.custom_op("mylib::mul3", mutates_args=())
def mul3(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    return x * y * z
""", "autograd_reg.py": """
import torch
from ops import mul3

def _setup(ctx, inputs, output):
    x, y, z = inputs
    ctx.save_for_backward(x, y, z)

def _backward(ctx, grad):
    x, y, z = ctx.saved_tensors
    return grad * y * z, grad * x * z

mul3.register_autograd(_backward, setup_context=_setup)
"""})
c("j3_save_star_inputs", None, {"case.py": """
import torch

@torch.library.custom_op("mylib::roll_mul", mutates_args=())
def roll_mul(x: torch.Tensor, w: torch.Tensor, shifts: int) -> torch.Tensor:
    return torch.roll(x, shifts) * w

def _setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)

def _backward(ctx, grad):
    x, w, shifts = ctx.saved_tensors
    return torch.roll(grad * w, -shifts), torch.roll(x, shifts) * grad, None

roll_mul.register_autograd(_backward, setup_context=_setup)
"""})
c("j4_tensor_for_int", None, {"case.py": """
import torch

@torch.library.custom_op("mylib::shift", mutates_args=())
def shift(x: torch.Tensor, k: int) -> torch.Tensor:
    return torch.roll(x, k)

def _setup(ctx, inputs, output):
    ctx.k = inputs[1]

def _backward(ctx, grad):
    g = torch.roll(grad, -ctx.k)
    return g, torch.zeros_like(g)

shift.register_autograd(_backward, setup_context=_setup)
"""})
c("j5_misspelt_ctx", None, {"case.py": """
import torch

@torch.library.custom_op("mylib::scale", mutates_args=())
def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x * factor

def _setup(ctx, inputs, output):
    _, ctx.factor = inputs

def _backward(ctx, grad):
    return grad * ctx.facter, None

torch.library.register_autograd("mylib::scale", _backward, setup_context=_setup)
"""})
c("j5b_misspelt_ctx_plain", None, {"case.py": """
import torch

@torch.library.custom_op("mylib::scale", mutates_args=())
def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x * factor

def setup_context(ctx, inputs, output):
    x, factor = inputs
    ctx.factor = factor

def backward(ctx, grad):
    return grad * ctx.facter, None

scale.register_autograd(backward, setup_context=setup_context)
"""})
# 11 AGL001 cross-file apply, no __init__
c("k1_apply_other_file_noinit", None, {"fn.py": """
import torch

class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, factor=2.0):
        ctx.factor = factor
        return x * factor

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.factor
""", "use.py": """
from fn import Scale

def halve(x):
    return Scale.apply(x, 0.5)
"""})
c("k2_apply_other_file_pkg_noinit", None, {"pkg/fn.py": """
import torch

class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, factor=2.0):
        ctx.factor = factor
        return x * factor

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.factor
""", "pkg/use.py": """
from pkg.fn import Scale

def halve(x):
    return Scale.apply(x, 0.5)
""", "pkg/use2.py": """
from .fn import Scale

def third(x):
    return Scale.apply(x, 1 / 3)
"""})
# 12 cross-file base, no __init__
c("l1_base_other_file_noinit", None, {'losses/base.py': 'import torch\n\nclass ChunkedLossBase(torch.autograd.Function):\n    @staticmethod\n    def backward(ctx, grad_output):\n        grad_x, = ctx.saved_tensors\n        return grad_x * grad_output, None, ctx.weight.new_ones(ctx.weight.shape) * grad_output * ctx.weight\n', 'losses/dpo.py': '\nimport torch\nfrom losses.base import ChunkedLossBase\n\nclass DPOLoss(ChunkedLossBase):\n    @staticmethod\n    def forward(ctx, x, target, weight):\n        gx = torch.ones_like(x)\n        ctx.save_for_backward(gx)\n        ctx.weight = weight\n        return (x @ weight.t()).sum()\n', 'losses/orpo.py': '\nimport torch\nfrom .base import ChunkedLossBase\n\nclass ORPOLoss(ChunkedLossBase):\n    @staticmethod\n    def forward(ctx, x, target, weight):\n        gx = torch.ones_like(x)\n        ctx.save_for_backward(gx)\n        ctx.weight = weight\n        return (x @ weight.t()).sum()\n'})
c("l2_base_src_layout", None, {'src/mylib/base.py': '\nimport torch\n\nclass ChunkedLossBase(torch.autograd.Function):\n    @staticmethod\n    def backward(ctx, grad_output):\n        grad_x, grad_w = ctx.saved_tensors\n        return grad_x * grad_output, None, grad_w * grad_output\n', 'src/mylib/dpo.py': '\nimport torch\nfrom mylib.base import ChunkedLossBase\n\nclass DPOLoss(ChunkedLossBase):\n    @staticmethod\n    def forward(ctx, x, target, weight, beta):\n        gx = torch.ones_like(x)\n        gw = torch.ones_like(weight)\n        ctx.save_for_backward(gx, gw)\n        return (x @ weight.t()).sum() * beta\n'})


def main() -> None:
    out = Path(sys.argv[1])
    shutil.rmtree(out, ignore_errors=True)
    for name, files in cases.items():
        for file, text in files.items():
            path = out / name / file
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    tool = Path(sys.executable).parent / "autograd-lint"
    for name in cases:
        found = subprocess.run(
            [str(tool), "check", "--isolated", "--no-cache", "--select", "ALL", "--exit-zero", "--output-format", "json", str(out / name)],
            capture_output=True, text=True, check=True,
        )
        codes = sorted({d["code"] for d in json.loads(found.stdout)["diagnostics"]} - NOISE)
        print(f"{name}: {' '.join(codes) or '-'}")


if __name__ == "__main__":
    main()
