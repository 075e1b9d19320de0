"""pytorch-wavelets 1.3.0: ScatLayerj1_rot_f's backward is right only for symmetric filters, by design
(issue 25: a false failure of gen-tests on searched filters, not a bug of the package).

Run with a venv that has pytorch-wavelets 1.3.0 and torch 2.13.0:
    python bench/recreate/issue25_wavelets_scat_symmetric_filters.py
backward filters the output gradient with the analysis filters themselves ("Don't need to
do time reverse as these filters are symmetric", scatternet/lowlevel.py), which is the
adjoint of forward's filtering only when each filter equals its time reversal.  Every
filter bank the library builds (``ScatLayer(biort=...)``, ``prep_filt`` of the biorthogonal
filters) is symmetric.  On torch 2.13.0 (CPU) this prints, for modes 0, 1, 2 (zero,
symmetric, periodization): random 5/7-tap filters False, the same made symmetric True,
the library's near_sym_b_bp filters True; ScatLayerj1_f (same shortcut) alike.
"""
import torch
from pytorch_wavelets.dtcwt.coeffs import biort as _biort
from pytorch_wavelets.dtcwt.lowlevel import prep_filt
from pytorch_wavelets.scatternet.lowlevel import ScatLayerj1_f, ScatLayerj1_rot_f

torch.manual_seed(0)


def filt(length: int, symmetric: bool) -> torch.Tensor:
    h = torch.randn(length, dtype=torch.float64)
    return ((h + h.flip(0)) / 2 if symmetric else h).reshape(1, 1, length, 1)


def holds(function, x, *args) -> bool:
    return torch.autograd.gradcheck(lambda x: function.apply(x, *args), (x,), raise_exception=False,
                                    fast_mode=True)


x = torch.randn(1, 2, 8, 8, dtype=torch.float64, requires_grad=True)
for mode in (0, 1, 2):
    for symmetric in (False, True):
        h0, h1, h2 = filt(5, symmetric), filt(7, symmetric), filt(7, symmetric)
        print(f"mode {mode}, {'symmetric' if symmetric else 'random'} filters: ScatLayerj1_rot_f "
              f"{holds(ScatLayerj1_rot_f, x, h0, h1, h2, mode, 1e-2, False)}, ScatLayerj1_f "
              f"{holds(ScatLayerj1_f, x, h0, h1, mode, 1e-2, False)}")
h0o, _, h1o, _, h2o, _ = _biort("near_sym_b_bp")
real = [prep_filt(h, 1).double() for h in (h0o, h1o, h2o)]
print("near_sym_b_bp filters symmetric:", all(torch.equal(f, f.flip(2)) for f in real))
for mode in (0, 1, 2):
    print(f"mode {mode}, near_sym_b_bp filters: ScatLayerj1_rot_f {holds(ScatLayerj1_rot_f, x, *real, mode, 1e-2, False)}")
