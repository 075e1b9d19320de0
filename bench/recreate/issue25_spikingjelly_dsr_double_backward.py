"""spikingjelly 2.0.0: a double backward through the DSR IF neuron silently loses its term
(found by gen-tests' gradgradcheck on the inputs recorded from spikingjelly's own tests, issue 25).

Run with a venv that has spikingjelly 2.0.0 and torch 2.13.0:
    python bench/recreate/issue25_spikingjelly_dsr_double_backward.py
``DSRIFNode.DSRIFFunction.backward`` computes every gradient inside ``torch.no_grad()``
and is not ``@once_differentiable``: with ``create_graph=True`` (a gradient penalty, a
Hessian-vector product) the gradient it returns has no graph, so the second derivative
through the neuron is dropped without a word, although that gradient depends on the
threshold (``input_grad`` is masked by ``input_rate_coding > v_threshold``, and
``v_threshold_grad`` is linear in the output gradient).  Through the public
``DSRIFNode``: a penalty that is the only loss raises "element 0 of tensors does not require
grad"; added to another term (here a weight decay on the threshold) it silently contributes
nothing: the gradient printed is the decay's alone, 2 * 0.5 = 1.0.
With ``@once_differentiable`` it would raise a clear error instead.  (``DSRLIFFunction``,
computed outside ``no_grad``, has a second derivative.)
"""
import torch
from spikingjelly.activation_based.neuron.dsr import DSRIFNode

torch.manual_seed(0)
node = DSRIFNode(T=4, v_threshold=0.5).double()
x = torch.rand(4, 2, 3, dtype=torch.float64, requires_grad=True)
y = node(x)
weights = torch.randn_like(y)
(gx, gv) = torch.autograd.grad((y * weights).sum(), (x, node.v_threshold), create_graph=True)
print("first-order gradient needs grad (has a graph):", gx.requires_grad, gv.requires_grad)
penalty = gx.pow(2).sum() + gv.pow(2)
try:
    torch.autograd.grad(penalty, node.v_threshold)
except RuntimeError as error:
    print("penalty alone: raises", error)
(total,) = torch.autograd.grad(penalty + node.v_threshold.pow(2), node.v_threshold)
print("penalty + threshold decay, gradient for the threshold:", float(total), "(the decay's alone)")
