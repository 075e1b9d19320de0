"""AGL008 through a local bound to ``.detach()`` (issue 23 item 4, session 6):
``y = x.detach(); y.sign_()`` in forward writes the caller's tensor.  ``x.data.clamp_(0, 1)``
is measured alongside: it writes it too, but AGL008 leaves ``.data`` alone (the deliberate
way past version checks; the one real instance in the bench trees, torchdiffeq's
``_UncheckedAssign``, says so in a comment).

Run: python bench/recreate/inplace_shared_storage.py  (torch 2.13.0, CPU).  Measured: in
both the caller's tensor is overwritten (later uses see the new values).  An earlier
consumer that saved it (``b = w.exp()`` saves its output ``b``): through ``.data`` its
backward silently uses the new values (w.grad wrong, no error); through ``.detach()`` the
shared version counter moves and that backward raises ``one of the variables needed for
gradient computation has been modified by an inplace operation``.
"""
import torch


class SignDetached(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.detach()
        y.sign_()
        return y.clone()

    @staticmethod
    def backward(ctx, g):
        return g


class ClampData(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.data.clamp_(0, 1)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


for function in (SignDetached, ClampData):
    w = torch.tensor([-1.0, 0.5, 3.0], requires_grad=True)
    a = w * 1
    function.apply(a).sum()
    print(function.__name__, "caller's tensor after forward:", a.tolist(), "(was [-1.0, 0.5, 3.0])")
    w.grad = None
    b = w.exp()
    try:
        (function.apply(b).sum() + b.sum()).backward()
        print(function.__name__, "w.grad through exp:", [round(v, 4) for v in w.grad.tolist()],
              "correct:", [round(v, 4) for v in (3 * w.detach().exp()).tolist()])
    except RuntimeError as error:
        print(function.__name__, "backward raises:", str(error)[:110])
