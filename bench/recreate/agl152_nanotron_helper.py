"""AGL152 on nanotron ring_attention_lucidrain.py:655 (AllGatherFunction), its helper's shape.

Run: python bench/recreate/agl152_nanotron_helper.py eager  (torch 2.13.0, CPU).  Measured:
with the sizes passed in or computed (sizes=None), fullgraph=True raises
`Unsupported: Data-dependent branching` in the helper first; without fullgraph it runs.
"""
import sys

import torch
def has_only_one_value(t):
    return (t == t[0]).all()
def helper(t, sizes=None):
    if sizes is None:
        sizes = torch.stack([torch.tensor(t.shape[0]), torch.tensor(t.shape[0])])
    if has_only_one_value(sizes):
        return torch.cat([t, t]), sizes
    return torch.cat([t, t]), sizes
class AG(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, sizes):
        x, batch_sizes = helper(x, sizes)
        ctx.batch_sizes = batch_sizes.tolist()
        ctx.dim = dim
        return x, batch_sizes
    @staticmethod
    def backward(ctx, g, _):
        return g.split(ctx.batch_sizes, dim=ctx.dim)[0], None, None
for sizes in (torch.tensor([3, 3]), None):
    for fg in (True, False):
        torch._dynamo.reset()
        x = torch.randn(3, 2, requires_grad=True)
        try:
            out, _ = torch.compile(lambda x, s: AG.apply(x, 0, s), backend=sys.argv[1], fullgraph=fg)(x, sizes)
            out.sum().backward()
            print(sys.argv[1], "sizes given" if sizes is not None else "sizes None", "fullgraph", fg, "OK")
        except Exception as e:
            print(sys.argv[1], "sizes given" if sizes is not None else "sizes None", "fullgraph", fg, "RAISES", type(e).__name__, str(e).splitlines()[0][:150])
