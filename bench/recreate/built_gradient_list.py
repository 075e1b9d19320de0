"""AGL001 and AGL003 on gradients that no tuple literal spells (issue 23 item 4).

Run: python bench/recreate/built_gradient_list.py  (torch 2.13.0, CPU).  Measured:
1. ``tuple(results)`` of a list built by appends/extend with 4 or 5 entries for forward's 6
   inputs raises ``RuntimeError: function PerSampleBackward returned an incorrect number of
   gradients (expected 6, got 4)`` (AGL001's wording); with 6 entries it runs.
2. A *list* returned by backward is one value to autograd: ``[g, None]`` for two inputs
   raises ``expected 2, got 1``, so only ``tuple(...)`` gives positions.
3. An input kept on ctx (``ctx.w = w``) whose gradient the built tuple computes, changed
   in place after forward: backward silently uses the new value (x.grad [20, 20, 20]
   where [2, 2, 2] is right), where save_for_backward raises (AGL003's consequence).
"""
import torch


class PerSample(torch.autograd.Function):
    @staticmethod
    def forward(ctx, names, op, x, weight, bias, n_extra=1):
        ctx.save_for_backward(x, weight)
        ctx.n_extra = n_extra
        return op(x, weight, bias)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        results = [None, None]
        if ctx.needs_input_grad[2]:
            results.append(grad @ weight)
        else:
            results.append(None)
        results.extend([None] * ctx.n_extra)
        return tuple(results)


x = torch.randn(3, 2, requires_grad=True)
w, b = torch.randn(4, 2), torch.randn(4)
op = torch.nn.functional.linear
for extra in (1, 2, 3):
    try:
        PerSample.apply(None, op, x, w, b, extra).sum().backward()
        print(f"{2 + 1 + extra} entries: ran")
    except RuntimeError as error:
        print(f"{2 + 1 + extra} entries:", error)


class AsList(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return a * b

    @staticmethod
    def backward(ctx, g):
        return [g, None]


try:
    AsList.apply(torch.ones(2, requires_grad=True), torch.ones(2)).sum().backward()
    print("list: ran")
except RuntimeError as error:
    print("list:", error)


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x)
        ctx.w = w
        return x * w

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        results = [g * ctx.w]
        results.append((g * x).sum())
        return tuple(results)


x = torch.ones(3, requires_grad=True)
w = torch.tensor(2.0, requires_grad=True)
out = Scale.apply(x, w)
with torch.no_grad():
    w.mul_(10)  # an optimizer step between forward and backward, say
out.sum().backward()
print("x.grad after w changed in place:", x.grad.tolist(), "(right: [2.0, 2.0, 2.0])")
