"""norse 1.1.0: the sparse adjoint LIF step cannot be differentiated at all (found by gen-tests, issue 25).

Run with a venv that has norse 1.1.0 and torch 2.13.0:
    python bench/recreate/issue25_norse_sparse_adjoint.py
``lif_adjoint_step_sparse`` returns its spikes as a sparse COO tensor, so the
engine hands ``LIFSparseAdjointFunction.backward`` a sparse gradient for them,
whatever the loss: through ``to_dense()``, through ``torch.sparse.sum``, and even
when the spikes are unused (autograd then passes sparse zeros).  backward computes
``output_term[output_term != output_term] = 0.0`` on it, and ``aten::ne`` has no
SparseCPU kernel.  On torch 2.13.0 (CPU) every loss below raises NotImplementedError;
only a hand-made dense gradient, which the engine never passes, gets through.
"""
import torch
from norse.torch.functional.adjoint.lif_adjoint import lif_adjoint_step_sparse
from norse.torch.functional.lif import LIFState

torch.manual_seed(0)
batch, inputs, hidden = 2, 3, 4
x = 10 * torch.randn(batch, inputs, dtype=torch.float64)
input_weights = torch.randn(hidden, inputs, dtype=torch.float64, requires_grad=True)
recurrent_weights = torch.randn(hidden, hidden, dtype=torch.float64, requires_grad=True)
state = LIFState(torch.zeros(batch, hidden, dtype=torch.float64).to_sparse(),
                 torch.rand(batch, hidden, dtype=torch.float64), torch.rand(batch, hidden, dtype=torch.float64))
losses = {
    "spikes.to_dense().sum() + v.sum()": lambda z, s: z.to_dense().sum() + s.v.sum(),
    "torch.sparse.sum(spikes) + v.sum()": lambda z, s: torch.sparse.sum(z) + s.v.sum(),
    "v.sum() (spikes unused)": lambda z, s: s.v.sum(),
}
for name, loss in losses.items():
    spikes, new_state = lif_adjoint_step_sparse(x, state, input_weights, recurrent_weights)
    try:
        loss(spikes, new_state).backward()
        print(f"{name}: backward ran")
    except NotImplementedError as error:
        print(f"{name}: backward raises NotImplementedError: {str(error).splitlines()[0][:80]}")
