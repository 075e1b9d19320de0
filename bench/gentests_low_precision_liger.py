"""gen-tests' low-precision check on a real Triton kernel library: Liger-Kernel, on a CUDA GPU.

Liger's Functions run Triton kernels on CUDA tensors: gradcheck (float64) cannot
check them.  This script declares four of them low-precision kernels
(``[tool.autograd-lint] low-precision``, float32 on cuda) with plain-PyTorch
references written here, records their inputs from a small driver test run with
``pytest --autograd-record``, generates the tests and runs them; then plants a
bug (a 1% error in one gradient of ``LigerGELUMulFunction``) in a copy of the
source and runs the same generated tests on it, which must fail.

    python bench/gentests_low_precision_liger.py --liger <Liger-Kernel checkout> --workdir /tmp/liger-lp

Liger-Kernel is linkedin/Liger-Kernel at the commit pinned for liger-kernel in
bench/accuracy_repos.txt (its Python files only; nothing of it is committed
here).  Needs torch with CUDA, Triton, and autograd-lint installed.  Prints one
line per phase and exits 1 when an outcome is not the expected one.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

FUNCTIONS = {
    "liger_kernel.ops.swiglu.LigerSiLUMulFunction": "liger_reference.silu_mul",
    "liger_kernel.ops.geglu.LigerGELUMulFunction": "liger_reference.gelu_mul",
    "liger_kernel.ops.layer_norm.LigerLayerNormFunction": "liger_reference.layer_norm",
    "liger_kernel.ops.rms_norm.LigerRMSNormFunction": "liger_reference.rms_norm",
}
SOURCES = ("swiglu.py", "geglu.py", "layer_norm.py", "rms_norm.py")

REFERENCE = '''\
"""Plain-PyTorch references taking the Liger Functions' apply arguments."""

import torch


def silu_mul(a, b, gate_multiplier=1.0, down_multiplier=1.0):
    return torch.nn.functional.silu(a * gate_multiplier) * b * down_multiplier


def gelu_mul(a, b):
    return torch.nn.functional.gelu(a, approximate="tanh") * b


def layer_norm(x, w, b, eps):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], w, b, eps)


def rms_norm(x, w, eps, offset=0.0, casting_mode="llama", in_place=True, row_mode=None):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (offset + w)
'''

DRIVER = '''\
import torch

from liger_kernel.ops.geglu import LigerGELUMulFunction
from liger_kernel.ops.layer_norm import LigerLayerNormFunction
from liger_kernel.ops.rms_norm import LigerRMSNormFunction
from liger_kernel.ops.swiglu import LigerSiLUMulFunction


def leaf(*shape):
    return torch.randn(*shape, device="cuda", requires_grad=True)


def test_drive():
    torch.manual_seed(0)
    LigerSiLUMulFunction.apply(leaf(4, 96), leaf(4, 96)).sum().backward()
    LigerGELUMulFunction.apply(leaf(4, 96), leaf(4, 96)).sum().backward()
    LigerLayerNormFunction.apply(leaf(4, 96), leaf(96), leaf(96), 1e-5).sum().backward()
    LigerRMSNormFunction.apply(leaf(4, 96), leaf(96), 1e-6, 0.0, "llama", False).sum().backward()
'''


def run(command: list[str], cwd: Path, env_path: Path) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, "PYTHONPATH": f"{env_path}{os.pathsep}{cwd}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def summary(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    return lines[-1] if lines else result.stderr.strip()[-500:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--liger", type=Path, required=True, help="a Liger-Kernel checkout (holding src/)")
    parser.add_argument("--workdir", type=Path, required=True)
    args = parser.parse_args()
    work = args.workdir.resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    source = work / "liger" / "src"
    shutil.copytree(args.liger.resolve() / "src", source)
    (work / "liger_reference.py").write_text(REFERENCE)
    (work / "test_drive.py").write_text(DRIVER)
    entries = "\n".join(f'"{name}" = "dtype=float32 device=cuda reference={ref}"' for name, ref in FUNCTIONS.items())
    (work / "pyproject.toml").write_text(f"[tool.autograd-lint.low-precision]\n{entries}\n")
    ops = [str(source / "liger_kernel" / "ops" / name) for name in SOURCES]
    python = sys.executable
    failures = 0

    recorded = run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_drive.py", "--autograd-record"],
                   work, source)
    print("record:", summary(recorded))
    generated = run([python, "-m", "autograd_lint", "gen-tests", *ops, "--out", "gen",
                     "--config", "pyproject.toml"], work, source)
    print("gen-tests:", generated.returncode, generated.stdout.strip().splitlines()[-1:] or generated.stderr)
    print(textwrap.indent(generated.stderr.strip(), "  "))
    low = [line.strip() for path in sorted((work / "gen").glob("*.py"))
           for line in path.read_text().splitlines() if "check_low_precision(" in line]
    print(f"low-precision tests generated: {len(low)}")
    for line in low:
        print("  " + line)
    right = run([python, "-m", "pytest", "gen", "-p", "no:cacheprovider", "-q", "-rA"], work, source)
    print("generated tests, Liger as published:", summary(right))
    print(textwrap.indent("\n".join(line for line in right.stdout.splitlines()
                                    if line.startswith(("PASSED", "FAILED", "SKIPPED", "ERROR"))), "  "))
    failures += right.returncode != 0

    geglu = source / "liger_kernel" / "ops" / "geglu.py"
    text = geglu.read_text()
    planted = text.replace("        a, b = geglu_backward(a, b, dc)\n        return a, b\n",
                           "        a, b = geglu_backward(a, b, dc)\n        return a, b * 1.01\n")
    assert planted != text, "the planted bug's anchor is not in geglu.py"
    geglu.write_text(planted)
    wrong = run([python, "-m", "pytest", "gen", "-p", "no:cacheprovider", "-q", "-k", "GELUMul"], work, source)
    print("generated tests, a 1% error planted in LigerGELUMulFunction's gradient of b:", summary(wrong))
    print(textwrap.indent("\n".join(line for line in wrong.stdout.splitlines()
                                    if "differs from its float64 reference" in line or "times the reference" in line),
                          "  "))
    failures += wrong.returncode == 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
