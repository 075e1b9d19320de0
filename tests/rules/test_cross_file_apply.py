"""AGL001 with ``apply`` calls in other files of the run (issue 23 item 5): decided once
every file is read, silent wherever the calls can't decide."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograd_lint.lint.engine import check_analysis, check_source
from autograd_lint.model.apply_sites import ApplySite, apply_sites
from autograd_lint.model.discovery import run
from autograd_lint.model.imports import ImportMap
from autograd_lint.model.source import SourceFile
from autograd_lint.settings import Settings

OPS = """\
import torch

class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, factor=2.0):
        ctx.factor = factor
        return x * factor

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.factor
"""


def agl001(root: Path, files: dict[str, str], jobs: int = 1) -> list[tuple[str, int, str]]:
    """AGL001's findings of ``autograd-lint check``'s run over ``root`` holding ``files``."""
    for name, text in {"pkg/__init__.py": "", "pkg/ops.py": OPS, **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    settings = Settings(select=("AGL001",), jobs=jobs)
    found = run([str(root)], settings, check_analysis)
    return sorted((Path(d.path).name, d.line, d.message) for r in found.results for d in r.result or ())


def test_a_call_in_another_file_that_passes_the_default_is_reported(tmp_path: Path) -> None:
    found = agl001(tmp_path, {"pkg/functional.py": "from pkg.ops import Scale\n\ndef halve(x):\n    return Scale.apply(x, 0.5)\n"})
    assert len(found) == 1
    name, line, message = found[0]
    assert (name, line) == ("ops.py", 11)
    assert "Scale.apply in " in message and "functional.py:4 passes 2 inputs" in message
    assert "(expected 2, got 1)" in message


@pytest.mark.parametrize(
    "caller",
    [
        "from . import ops\n\ndef halve(x):\n    return ops.Scale.apply(x, 0.5)\n",  # a module, relative import
        "import pkg.ops\n\ndef halve(x):\n    return pkg.ops.Scale.apply(x, 0.5)\n",  # a dotted import
        "from pkg.ops import Scale as S\n\ndef halve(x):\n    return S.apply(x, 0.5)\n",  # an alias of the import
    ],
)
def test_the_function_is_followed_through_imports(tmp_path: Path, caller: str) -> None:
    (found,) = agl001(tmp_path, {"pkg/functional.py": caller})
    assert found[:2] == ("ops.py", 11)


def test_a_file_with_custom_ops_learns_the_counts_in_its_last_round(tmp_path: Path) -> None:
    ops = OPS + (
        "\n@torch.library.custom_op('pkg::twice', mutates_args=())\n"
        "def twice(x: torch.Tensor) -> torch.Tensor:\n    return x * 2\n"
    )
    caller = "from pkg.ops import Scale\n\ndef halve(x):\n    return Scale.apply(x, 0.5)\n"
    (found,) = agl001(tmp_path, {"pkg/ops.py": ops, "pkg/functional.py": caller})
    assert found[:2] == ("ops.py", 11)


def test_workers_decide_the_same(tmp_path: Path) -> None:
    plain = {f"pkg/plain{i}.py": f"x = {i}\n" for i in range(10)}  # enough files for workers
    files = {"pkg/functional.py": "from pkg.ops import Scale\n\ndef halve(x):\n    return Scale.apply(x, 0.5)\n", **plain}
    assert agl001(tmp_path, files, jobs=2) == agl001(tmp_path, files, jobs=1) != []


@pytest.mark.parametrize(
    "files",
    [
        # One call passes the default, one does not: the calls disagree.
        {
            "pkg/a.py": "from pkg.ops import Scale\n\ndef halve(x):\n    return Scale.apply(x, 0.5)\n",
            "pkg/b.py": "from pkg.ops import Scale\n\ndef same(x):\n    return Scale.apply(x)\n",
        },
        # `*args` at the call site: the count is unknown.
        {"pkg/a.py": "from pkg.ops import Scale\n\ndef call(*args):\n    return Scale.apply(*args)\n"},
        # apply taken as a value: its calls can't be counted.
        {
            "pkg/a.py": "from pkg.ops import Scale\n\nscale = Scale.apply\n\ndef halve(x):\n    return Scale.apply(x, 0.5)\n",
        },
        # Every call passes only what backward returns a gradient for.
        {"pkg/a.py": "from pkg.ops import Scale\n\ndef same(x):\n    return Scale.apply(x)\n"},
        # A call passing more than forward takes raises in forward: backward never runs.
        {"pkg/a.py": "from pkg.ops import Scale\n\ndef odd(x):\n    return Scale.apply(x, 0.5, 1)\n"},
        # A name that is not the Function (imported from elsewhere) is not its call, and may be it.
        {"pkg/a.py": "from other.ops import Scale\n\ndef halve(x):\n    return Scale.apply(x, 0.5)\n"},
        # A re-export the run can't follow may name this Function, with another count.
        {
            "pkg/__init__.py": "from pkg.ops import *\n",
            "pkg/a.py": "from pkg.ops import Scale\n\ndef halve(x):\n    return Scale.apply(x, 0.5)\n",
            "pkg/b.py": "from pkg import Scale\n\ndef same(x):\n    return Scale.apply(x)\n",
        },
        # The Function's own module calls apply: its own calls decide (here, one input).
        {
            "pkg/ops.py": OPS + "\ndef same(x):\n    return Scale.apply(x)\n",
            "pkg/a.py": "from pkg.ops import Scale\n\ndef halve(x):\n    return Scale.apply(x, 0.5)\n",
        },
    ],
    ids=["disagree", "star-args", "apply-as-value", "agree-on-fewer", "too-many", "other-scale", "re-export", "own-module-calls"],
)
def test_silent_where_the_calls_cannot_decide(tmp_path: Path, files: dict[str, str]) -> None:
    assert agl001(tmp_path, files) == []


def test_one_file_at_a_time_is_silent() -> None:
    # flake8, stdin and editors see one file: the run's calls are unknown.
    checked = check_source(SourceFile("ops.py", OPS, "pkg.ops"), Settings(select=("AGL001",)))
    assert checked.diagnostics == []


def test_apply_sites_lists_imported_names_only() -> None:
    text = (
        "from pkg.ops import Scale\nimport pkg\n\nclass Local: ...\n\n"
        "Scale.apply(x, 1)\npkg.ops.Other.apply(x)\nLocal.apply(x)\nScale.apply(x, k=1)\nf = Scale.apply\n"
    )
    sites = apply_sites(text, ImportMap.from_text(text, "pkg.use"))
    assert sites == (
        ApplySite("pkg.ops.Scale", 2, 6),
        ApplySite("pkg.ops.Other", 1, 7),
        ApplySite("pkg.ops.Scale", None, 9),
        ApplySite("pkg.ops.Scale", None, 10),
    )
