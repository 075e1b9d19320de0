"""AGL152: which .item()/.tolist() in forward fail under torch.compile(fullgraph=True).

Run: python bench/recreate/agl152_inputs.py eager  (or inductor).  On torch 2.13.0 (CPU):
read straight off an input (`t.item()` as a scale or kept on ctx) compiles; a value
computed in forward (`t.int().tolist()`, `x.sum().item()`, `(t * 2).sum().item()`)
raises PendingUnbackedSymbolNotFound, with both backends.
"""
import sys, torch
def mk(body_fwd):
    ns = {"torch": torch}
    src = f'''
class F(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, t):
{body_fwd}
    @staticmethod
    def backward(ctx, g):
        return g * 2, None
'''
    exec(src, ns); return ns["F"]
cases = {
 "input scale item": "        s = t.item()\n        return x * s",
 "input item on ctx": "        ctx.s = t.item()\n        return x * 2",
 "input int tolist ctx": "        ctx.l = t.int().tolist()\n        return x * 2",
 "x-derived item scale": "        s = x.sum().item()\n        return x * s",
 "x-derived int tolist ctx": "        ctx.k = len((x > 0).int().tolist())\n        return x * 2",
 "t-derived item ctx": "        ctx.s = (t * 2).sum().item()\n        return x * 2",
}
backend = sys.argv[1]
for name, body in cases.items():
    F = mk(body)
    torch._dynamo.reset()
    f = torch.compile(lambda x, t: F.apply(x, t).sin(), backend=backend, fullgraph=True)
    try:
        f(torch.randn(4, requires_grad=True), torch.tensor([2.0, 3.0]) if "tolist" in name else torch.tensor(2.0)).sum().backward()
        print(backend, name, "OK")
    except Exception as e:
        print(backend, name, "RAISES", type(e).__name__, str(e).splitlines()[0][:120])
