"""Calls of torch's CUDA-only autograd.Functions, for ``pytest --autograd-record --autograd-record-torch``.

The CUDA counterpart of ``bench/gentests_torch_driver.py``, run on a machine with
a GPU (no GPU is on CI: every test here is skipped without CUDA).  It reaches
the Functions that CPU runs can't, through their public entry points, with small
inputs written here (torch's own tests of them, ``test/distributed/test_data_parallel.py``,
``test/inductor/test_flex_attention.py`` and the quack tests, are not in the wheel):

* ``torch.nn.parallel``: ``replicate`` (``Broadcast``; its backward applies
  ``ReduceAddCoalesced``), ``scatter`` (``Scatter``) and ``gather`` (``Gather``),
  on the one device ``cuda:0``, as ``DataParallel`` calls them;
* ``flex_attention`` in eager on CUDA (``FlexAttentionAutogradOp``; its backward
  refuses CPU);
* quack's ``rmsnorm`` (``torch._vendor.quack``, where the installed torch vendors it).

Usage (docs/accuracy.md, "torch's CUDA-only Functions")::

    python bench/gentests_torch_recorded.py --driver bench/gentests_torch_cuda_driver.py --work /tmp/cudarec
"""

from __future__ import annotations

import importlib.util
import warnings

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _differentiate(output):
    tensors = [t for t in torch.utils._pytree.tree_leaves(output)
               if isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point()]
    if tensors:
        torch.autograd.backward([t.sum() for t in tensors])


def test_data_parallel_functions():
    """driver input: replicate / scatter / gather on cuda:0, as DataParallel does."""
    from torch.nn.parallel import replicate
    from torch.nn.parallel.scatter_gather import gather, scatter
    module = torch.nn.Linear(4, 3).to("cuda", torch.float64)
    replicas = replicate(module, [0])  # Broadcast of the parameters; ReduceAddCoalesced in backward
    x = torch.randn(6, 4, dtype=torch.float64, device="cuda", requires_grad=True)
    (chunk,) = scatter(x, [0])  # Scatter
    _differentiate(gather([replicas[0](chunk)], 0))  # Gather
    _differentiate(gather([replicas[0](chunk.detach())], "cpu"))  # Gather to the CPU


def test_flex_attention_eager_cuda():
    """driver input: flex_attention in eager on CUDA, with and without a score_mod."""
    from torch.nn.attention.flex_attention import flex_attention
    q, k, v = (torch.randn(1, 2, 16, 16, dtype=torch.float32, device="cuda", requires_grad=True)
               for _ in range(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _differentiate(flex_attention(q, k, v))
        _differentiate(flex_attention(q, k, v, score_mod=lambda score, b, h, i, j: score * 0.5))


@pytest.mark.skipif(importlib.util.find_spec("torch._vendor.quack") is None,
                    reason="this torch does not vendor quack")
def test_quack_rmsnorm():
    """driver input: quack's rmsnorm (a CuTe DSL kernel) on a small bfloat16 batch."""
    from torch._vendor.quack.rmsnorm import rmsnorm
    x = torch.randn(8, 256, dtype=torch.bfloat16, device="cuda", requires_grad=True)
    weight = torch.ones(256, dtype=torch.float32, device="cuda", requires_grad=True)
    _differentiate(rmsnorm(x, weight))
