"""pytorch-wavelets 1.3.0: the 1-D DWT's gradient is wrong for the padded modes (found by gen-tests, issue 25).

Run with a venv that has pytorch-wavelets 1.3.0 and torch 2.13.0:
    python bench/recreate/issue25_wavelets_afb1d.py
AFB1D.backward synthesises with ``sfb1d`` (a transposed convolution, then a crop):
the adjoint of the zero-padded and periodised analysis only.  For 'symmetric',
'periodic' and 'reflect' it leaves out the adjoint of the padding (the folding of
the padded border back onto the signal), so through the public ``DWT1DForward`` the
gradient differs from finite differences whenever the filter is longer than 2 taps
(db2 and up; db1 needs no padding).  On torch 2.13.0 (CPU) this prints, per wavelet
and mode, whether gradcheck holds: db2 symmetric/periodic/reflect False, the rest True.
"""
import torch
from pytorch_wavelets import DWT1DForward

torch.manual_seed(0)
for wave in ("db1", "db2"):
    for mode in ("zero", "periodization", "symmetric", "periodic", "reflect"):
        transform = DWT1DForward(J=1, wave=wave, mode=mode).double()
        x = torch.randn(1, 3, 16, dtype=torch.float64, requires_grad=True)
        holds = torch.autograd.gradcheck(lambda x: transform(x)[0], (x,), raise_exception=False)
        print(f"{wave} {mode}: gradcheck {'holds' if holds else 'FAILS'}")
