"""AGL003's consequence for inputs kept on ctx as a slice of ``*args`` (issue 23 item 4;
the rule does not report this shape yet: see /work/notes/issue-23.s5b.md).

Run: python bench/recreate/args_slice_on_ctx.py  (torch 2.13.0, CPU).  Checks:
1. ``ctx.args = args[:2]`` (torch's ``LinearPerSampleGrad`` shape: forward(ctx, names, op,
   *args), backward building its gradients by ``append``/``extend``): the input, changed in
   place after forward, is read by backward as changed: the weight gradient is silently
   wrong; kept through ``save_for_backward`` instead, backward raises.
2. torch 2.13's own ``LinearPerSampleGrad`` (``call_for_per_sample_grads``): an in-place change
   to the input between forward and backward silently changes ``weight.grad_sample``.
"""
import torch
from torch.nn.utils._per_sample_grad import call_for_per_sample_grads


class Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, names, op, *args):
        ctx.args = args[:2]
        return op(*args[:2])

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.args
        results = [None, None]
        results.append(grad @ w)
        results.extend([grad.t() @ x])
        return tuple(results)


class LinearSaved(torch.autograd.Function):
    @staticmethod
    def forward(ctx, names, op, *args):
        ctx.save_for_backward(*args[:2])
        return op(*args[:2])

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return None, None, grad @ w, grad.t() @ x


def run(function, change):
    x = torch.ones(2, 3, requires_grad=True)
    w = torch.ones(4, 3, requires_grad=True)
    x2 = x * 1  # a non-leaf input, so that changing it in place is allowed
    out = function.apply(None, torch.nn.functional.linear, x2, w)
    if change:
        with torch.no_grad():
            x2.mul_(10)
    out.sum().backward()
    return w.grad[0].tolist()


print("1. right weight gradient row:", run(Linear, change=False))
print("1. ctx.args = args[:2], input changed in place:", run(Linear, change=True))
try:
    print("1. save_for_backward, input changed in place:", run(LinearSaved, change=True))
except RuntimeError as error:
    print("1. save_for_backward, input changed in place: RuntimeError:", str(error)[:90])


def grad_sample(change):
    model = torch.nn.Linear(3, 1, bias=False)
    torch.nn.init.ones_(model.weight)
    x = torch.ones(2, 3, requires_grad=True)
    x2 = x * 1
    out = call_for_per_sample_grads(model)(x2)
    if change:
        with torch.no_grad():
            x2.mul_(10)
    out.sum().backward()
    return model.weight.grad_sample[0].tolist()


print("2. LinearPerSampleGrad grad_sample[0]:", grad_sample(change=False))
print("2. input changed in place before backward:", grad_sample(change=True))
