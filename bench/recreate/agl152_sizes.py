"""AGL152: does a number computed in forward that only sizes things fail under fullgraph=True?

Run: python bench/recreate/agl152_sizes.py eager|aot_eager|inductor  (torch 2.13.0, CPU).
Each case is a Function whose forward computes an integer tensor, reads it with
.item()/.tolist(), and uses the number only as a size (of a returned tensor, of a
split in backward) or, for contrast, only keeps it on ctx.

Measured on torch 2.13.0, the same with eager, aot_eager and inductor: the number that
only sizes tensors forward returns (`m = counter.item(); out = torch.zeros(m, 3)`)
compiles and runs; every `.tolist()` of a computed tensor kept on ctx raises
`PendingUnbackedSymbolNotFound`, whether backward splits by it or not and whether the
tensor is returned or not; so does the contrast case (a scale).
"""
import sys

import torch


def mk(fwd, bwd, n_out):
    ns = {"torch": torch}
    src = f"""
class F(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, c):
{fwd}
    @staticmethod
    def backward(ctx, {', '.join('g%d' % i for i in range(n_out))}):
{bwd}
"""
    exec(src, ns)
    return ns["F"]


CASES = {
    # nanotron ring_attention_lucidrain.py AllGatherFunction: sizes computed, kept as a list, split by in backward.
    "tolist sizes a split in backward, tensor returned": (
        "        sizes = c * 2\n        ctx.sizes = sizes.tolist()\n        return x * 2, sizes",
        "        return torch.cat(g0.split(ctx.sizes, dim=0)) * 2, None",
        2,
    ),
    "tolist sizes a split in backward, tensor not returned": (
        "        sizes = c * 2\n        ctx.sizes = sizes.tolist()\n        return x * 2",
        "        return torch.cat(g0.split(ctx.sizes, dim=0)) * 2, None",
        1,
    ),
    "tolist kept on ctx, unused": (
        "        sizes = c * 2\n        ctx.sizes = sizes.tolist()\n        return x * 2",
        "        return g0 * 2, None",
        1,
    ),
    # stable-dreamfusion raymarching.py _march_rays_train: a counter filled in forward sizes returned buffers.
    "item sizes returned buffers filled in place": (
        "        counter = torch.zeros(1, dtype=torch.int32)\n        counter.add_(c.sum())\n"
        "        m = counter.item()\n        out = torch.zeros(m, 3)\n        out.add_(x.sum())\n        return out",
        "        return None, None",
        1,
    ),
    "item scale (contrast)": (
        "        m = (c * 2).sum().item()\n        return x * m",
        "        return g0, None",
        1,
    ),
}

backend = sys.argv[1]
for name, (fwd, bwd, n_out) in CASES.items():
    F = mk(fwd, bwd, n_out)
    torch._dynamo.reset()
    x = torch.randn(6, 3, requires_grad=True)
    c = torch.tensor([1, 2], dtype=torch.int64)

    def call(x, c):
        out = F.apply(x, c)
        return out[0] if isinstance(out, tuple) else out

    try:
        out = torch.compile(call, backend=backend, fullgraph=True)(x, c)
        if out.requires_grad:
            out.sum().backward()
        print(backend, name, "-> OK")
    except Exception as e:
        print(backend, name, "-> RAISES", type(e).__name__, str(e).splitlines()[0][:140])
