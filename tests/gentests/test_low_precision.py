"""Declared low-precision kernels: compared with a reference, not with gradcheck.

``GeluMul`` stands for a fused kernel (Triton, CUDA) that refuses float64: its
forward raises on float64 as such a kernel does, so gradcheck can't check it.
Declared with its dtype and a plain-PyTorch reference, its generated test runs
the reference in float64 (the truth) and in the kernel's dtype, and requires the
kernel's outputs and gradients to be within k times the reference's own error.
The same kernel with a common backward bug (the tanh term's derivative left out)
fails, saying by how much; the correct one passes in float32 and bfloat16.
"""

from __future__ import annotations

import pytest

from gentests_support import gen_tests, outcomes_by_class
from pytest_process import run_pytest

pytest.importorskip("torch")

KERNEL = '''\
import math

import torch

SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def reference(a, b):
    return torch.nn.functional.gelu(a, approximate="tanh") * b


{declaration}
class GeluMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        if a.dtype == torch.float64:
            raise TypeError("the kernel supports float32, float16 and bfloat16 only")
        ctx.save_for_backward(a, b)
        x = a.float()
        inner = SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)
        return (0.5 * x * (1 + torch.tanh(inner)) * b.float()).to(a.dtype)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        x, g = a.float(), grad.float()
        t = torch.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x ** 3))
        gelu = 0.5 * x * (1 + t)
        d_inner = SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x ** 2)  # wrong: d_inner = SQRT_2_OVER_PI
        d_gelu = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * d_inner
        return (g * b.float() * d_gelu).to(a.dtype), (g * gelu).to(b.dtype)


def gelu_mul(a, b):
    return GeluMul.apply(a, b)
'''


def _generate(pytester: pytest.Pytester, declaration: str, wrong: bool = False,
              pyproject: str = "") -> tuple[int, str, str]:
    source = KERNEL.format(declaration=declaration)
    if wrong:
        source = source.replace("d_inner = SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x ** 2)  # wrong: ", "")
    pytester.makepyfile(kernel=source)
    if pyproject:
        pytester.makefile(".toml", pyproject=pyproject)
    generated = gen_tests(pytester.path, "kernel.py", "--out", "gen")
    return generated.returncode, generated.stderr, (pytester.path / "gen" / "test_gradcheck_kernel.py").read_text()


def _outcomes(pytester: pytest.Pytester) -> tuple[dict, pytest.RunResult]:
    result = run_pytest(pytester, "gen", "-p", "no:cacheprovider", "--junitxml=report.xml")
    return {name: dict(counts) for name, counts in outcomes_by_class(pytester.path / "report.xml").items()}, result


def test_undeclared_the_float64_gradcheck_cannot_run_the_kernel(pytester: pytest.Pytester) -> None:
    code, stderr, generated = _generate(pytester, "")
    assert code == 0, stderr
    assert "check_gradcheck(subject.GeluMul, case)" in generated
    outcomes, _ = _outcomes(pytester)
    assert "passed" not in outcomes["TestGeluMul"]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_declared_the_kernel_is_compared_with_its_reference_and_passes(pytester: pytest.Pytester, dtype: str) -> None:
    reference = 'lambda a, b: torch.nn.functional.gelu(a, approximate="tanh") * b'
    code, stderr, generated = _generate(pytester, f"# autograd-lint: low-precision dtype={dtype} reference={reference}")
    assert code == 0, stderr
    assert (f"check_low_precision(subject.GeluMul, case, reference={reference}, "
            f"dtype='{dtype}', device='cpu', k=3.0)") in generated
    assert "check_gradcheck" not in generated
    outcomes, result = _outcomes(pytester)
    assert outcomes == {"TestGeluMul": {"passed": 1}}, result.stdout.str()


def test_a_wrong_backward_fails_and_the_message_says_by_how_much(pytester: pytest.Pytester) -> None:
    code, stderr, _ = _generate(pytester, "# autograd-lint: low-precision dtype=float32 reference=kernel.reference",
                                wrong=True)
    assert code == 0, stderr
    outcomes, result = _outcomes(pytester)
    assert outcomes == {"TestGeluMul": {"failed": 1}}
    text = result.stdout.str()
    assert "GeluMul: the gradient of input #0 in float32 on cpu differs from its float64 reference reference by" in text
    assert "times the reference's own error: a wrong result, not rounding" in text
    assert "reproduce with: pytest 'gen/test_gradcheck_kernel.py::TestGeluMul::test_low_precision[" in text


def test_declared_in_the_configuration_with_a_device_this_machine_may_lack(pytester: pytest.Pytester) -> None:
    pyproject = ('[tool.autograd-lint]\n'
                 'low-precision = {"kernel.GeluMul" = "dtype=float16 device=cuda k=2 reference=kernel.reference"}\n')
    code, stderr, generated = _generate(pytester, "", pyproject=pyproject)
    assert code == 0, stderr
    assert ("check_low_precision(subject.GeluMul, case, reference=load_reference(\"kernel.reference\"), "
            "dtype='float16', device='cuda', k=2.0)") in generated
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        outcomes, result = _outcomes(pytester)
        assert outcomes == {"TestGeluMul": {"skipped": 1}}, result.stdout.str()


@pytest.mark.parametrize(("declaration", "error"), [
    ("# autograd-lint: low-precision reference=kernel.reference",
     "kernel.py:12: low-precision needs dtype= one of float32, float16, bfloat16"),
    ("# autograd-lint: low-precision dtype=float64 reference=kernel.reference",
     "kernel.py:12: low-precision needs dtype= one of float32, float16, bfloat16, not 'float64'"),
    ("# autograd-lint: low-precision dtype=float32",
     "kernel.py:12: low-precision needs reference= (last): a function taking apply's arguments, as a dotted "
     "name or an expression"),
    ("# autograd-lint: low-precision dtype=float32 k=0.5 reference=kernel.reference",
     "kernel.py:12: low-precision k='0.5' is not a number >= 1"),
    ("# autograd-lint: low-precision dtype=float32 device=tpu reference=kernel.reference",
     "kernel.py:12: low-precision device 'tpu' is not cpu, cuda, cuda:N, xpu or mps"),
    ("# autograd-lint: low-precision dtype=float32 reference=lambda a, b:",
     "kernel.py:12: low-precision reference is not a Python expression: invalid syntax"),
])
def test_a_bad_declaration_is_one_line_and_the_gradcheck_tests_are_generated(
        pytester: pytest.Pytester, declaration: str, error: str) -> None:
    code, stderr, generated = _generate(pytester, declaration)
    assert code == 2
    assert stderr.splitlines() == [error]
    assert "check_gradcheck(subject.GeluMul, case)" in generated
