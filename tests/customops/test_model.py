"""The custom-op model: every way to define an op and to register on one, within a file and across files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from autograd_lint.lint.engine import check_analysis
from autograd_lint.model.analysis import analyze
from autograd_lint.model.custom_ops import RunCustomOps
from autograd_lint.model.discovery import run
from autograd_lint.model.source import SourceFile
from autograd_lint.rules import all_rules
from autograd_lint.settings import Settings


def ops_of(source: str):  # type: ignore[no-untyped-def]
    found = analyze(SourceFile("m.py", source, "m"), {}, Settings()).custom_ops
    assert found is not None
    return {op.display: op for op in found.ops}, found


@pytest.mark.parametrize(
    "source",
    [
        "import torch\n@torch.library.custom_op('ns::f', mutates_args=())\ndef f(x: torch.Tensor) -> torch.Tensor: ...",
        "import torch.library as L\n@L.custom_op('ns::f', mutates_args=())\ndef f(x: 'Tensor') -> 'Tensor': ...",
        "from torch.library import custom_op as co\n@co('ns::f', mutates_args=())\ndef f(x): ...",
        "from torch import library\n@library.custom_op('ns::f', mutates_args=())\ndef f(x): ...",
        "from torch.library import custom_op\ndef _f(x): ...\nf = custom_op('ns::f', _f, mutates_args=())",
        "from torch.library import custom_op\ndef _f(x): ...\nf = custom_op('ns::f', mutates_args=())(_f)",
        "import torch\nop = torch.library.custom_op\n@op('ns::f', mutates_args=())\ndef f(x): ...",
        "from torch.library import triton_op\n@triton_op('ns::f', mutates_args=())\ndef f(x): ...",
    ],
)
def test_every_definition_form(source: str) -> None:
    ops, _ = ops_of(source)
    assert list(ops) == ["ns::f"] and ops["ns::f"].python_name == "f"


def test_every_registration_form_links_to_its_op() -> None:
    ops, found = ops_of(
        """
import torch
from torch.library import custom_op, register_fake, register_kernel
autograd = torch.library.register_autograd

@custom_op("ns::f", mutates_args=())
def f(x: torch.Tensor) -> torch.Tensor:
    return x.clone()

@f.register_fake
def _(x): return torch.empty_like(x)

@register_kernel("ns::f", "cuda")
def _(x): return x.clone()

def bw(ctx, g): return g
def sc(ctx, inputs, output): pass
autograd("ns::f", bw, setup_context=sc)
f.register_kernel("cpu")(lambda x: x.clone())
torch.library.register_fake(torch.ops.ns.g.default)(lambda x: x)

lib = torch.library.Library("old", "DEF")
lib.define("h(Tensor x) -> Tensor")
torch.library.define("ns2::k", "(Tensor x) -> Tensor")
"""
    )
    kinds = sorted((r.kind, r.function.name if r.function else None) for r in ops["ns::f"].registrations)
    assert kinds == [("autograd", "bw"), ("fake", "_"), ("kernel", "<lambda>"), ("kernel", "_")]
    autograd = ops["ns::f"].registered("autograd")[0]
    assert autograd.setup_context is not None and autograd.setup_context.name == "sc"
    assert [r.target for r in found.foreign] == ["ns::g"]
    assert found.defined_names == {"old::h", "ns2::k"}


def test_registrations_link_across_the_files_of_a_run(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "ops.py").write_text(
        "import torch\nfrom torch import Tensor\n\n"
        "@torch.library.custom_op('pkg::scale', mutates_args=())\n"
        "def scale(x: Tensor, a: float = 1.0, b: bool = False) -> Tensor:\n    return x * a\n"
    )
    (package / "autograd.py").write_text(
        "import torch\nfrom pkg.ops import scale\n\n"
        "@torch.library.register_fake('pkg::scale')\ndef _(x, a=1.0, b=False):\n    return torch.empty_like(x)\n\n"
        "def bw(ctx, g):\n    return g\n\nscale.register_autograd(bw)\n"
    )
    settings = Settings(select=("AGL1",))
    found = run([str(tmp_path)], settings, check_analysis)
    codes = {(Path(d.path).name, d.code) for r in found.results for d in r.result or ()}
    # The fake is in another file (no AGL110); the backward there is checked against the op's signature.
    assert codes == {("autograd.py", "AGL101")}
    op = next(op for r in found.results if r.custom_ops for op in r.custom_ops.ops)
    assert {r.kind for r in op.registrations} == {"fake", "autograd"}


def test_flake8_agrees_with_check_on_each_custom_op_example(tmp_path: Path) -> None:
    """flake8 reads one file at a time; so does this comparison (AGL110 and AGL116 need the run: flake8 is silent)."""
    pytest.importorskip("flake8")
    expected = set()
    names = []
    for rule in all_rules():
        if not 101 <= int(rule.code[3:]) <= 117:
            continue
        for kind, examples in (("invalid", rule.INVALID), ("valid", rule.VALID)):
            for index, example in enumerate(examples):
                if not example.parses_here:
                    continue  # newer syntax: checked on the interpreters that have it
                name = f"{rule.code.lower()}_{kind}_{index}.py"
                (tmp_path / name).write_text(example.source)
                names.append(name)
                settings = Settings(select=tuple(r.code for r in all_rules() if r.enabled_by_default))
                analysis = analyze(SourceFile(name, example.source, name[:-3]), {}, settings, run_ops=RunCustomOps())
                expected |= {
                    (name, d.line, d.column + 1, d.code, d.message)  # flake8 counts columns from 1
                    for d in check_analysis(analysis, settings, honour_noqa=False)
                    if d.code not in ("AGL110", "AGL116")
                }
    flake8 = subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", "--select", "AGL",
         "--format", "%(path)s\t%(row)d\t%(col)d\t%(code)s\t%(text)s", *names],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert flake8.returncode in (0, 1), flake8.stderr
    reported = set()
    for line in flake8.stdout.splitlines():
        path, row, col, code, text = line.split("\t")
        reported.add((path.removeprefix("./"), int(row), int(col), code, text))
    assert expected and reported == expected
