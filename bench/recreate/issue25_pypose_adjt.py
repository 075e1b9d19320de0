"""pypose 0.9.5: the gradient of AdjT for SE3 and Sim3 with respect to the tangent vector is wrong (issue 25).

Run with a venv that has pypose 0.9.5 and torch 2.13.0:
    python bench/recreate/issue25_pypose_adjt.py
``SE3_AdjTXa.forward`` computes Adj(X^-1) a, and its backward returns Adj(X) g as
the gradient of ``a``: the vector-Jacobian product of a -> Adj(X^-1) a is
Adj(X^-1)^T g, which equals Adj(X) g only where Adj(X) is orthogonal (SO3, RxSO3),
not for SE3 and Sim3, whose adjoint has a translation block.  ``a`` is a plain
tangent vector (no tangent-space convention is involved: its gradient must be the
derivative).  Prints, per group, gradcheck of AdjT with respect to ``a`` at a valid
group element, through the public LieTensor method and through the Function:
SO3 and RxSO3 hold, SE3 and Sim3 FAIL (torch 2.13.0, CPU).
"""
import pypose as pp
import torch
from pypose.lietensor import operation

torch.manual_seed(0)
for group, make, tangent in (("SO3", pp.randn_SO3, 3), ("RxSO3", pp.randn_RxSO3, 4),
                             ("SE3", pp.randn_SE3, 6), ("Sim3", pp.randn_Sim3, 7)):
    X = make(2, dtype=torch.float64)
    a = torch.randn(2, tangent, dtype=torch.float64, requires_grad=True)
    public = torch.autograd.gradcheck(lambda a: X.AdjT(a).tensor(), (a,), raise_exception=False)
    function = getattr(operation, f"{group}_AdjTXa")
    direct = torch.autograd.gradcheck(lambda a: function.apply(X.tensor(), a), (a,), raise_exception=False)
    print(f"{group}: X.AdjT(a) gradcheck in a {'holds' if public else 'FAILS'}; "
          f"{group}_AdjTXa.apply {'holds' if direct else 'FAILS'}")
