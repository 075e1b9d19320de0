"""Discovery's rounds: the same findings whether files run in this process, on workers,
with the custom-op files' analyses kept for the last round or parsed again there."""

from __future__ import annotations

import gc
import os
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

from autograd_lint.lint.engine import check_analysis
from autograd_lint.model import custom_ops, discovery
from autograd_lint.model.analysis import FileAnalysis, analyze
from autograd_lint.model.discovery import run
from autograd_lint.model.source import SourceFile
from autograd_lint.settings import Settings

SETTINGS = Settings(select=("ALL",))


def write_package(root: Path) -> None:
    package = root / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "ops.py").write_text(
        "import torch\nfrom torch import Tensor\n\n"
        "@torch.library.custom_op('pkg::scale', mutates_args=())\n"
        "def scale(x: Tensor, a: float = 1.0) -> Tensor:\n    return x * a\n\n"
        "@torch.library.custom_op('pkg::shift', mutates_args=())\n"
        "def shift(x: Tensor) -> Tensor:\n    return x + 1\n"
    )
    (package / "registrations.py").write_text(
        "import torch\nfrom pkg.ops import scale\n\n"
        "@torch.library.register_fake('pkg::scale')\ndef _(x, a=1.0, b=False):\n    return torch.empty_like(x)\n\n"
        "def bw(ctx, g):\n    return g\n\nscale.register_autograd(bw)\n"
    )
    (package / "base.py").write_text(
        "import torch\n\nclass Base(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        ctx.x = x\n        return x * 2\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n        return g * 2, None\n"
    )
    # A Function derived from another file's (a second round), in a file with a custom op.
    (package / "derived.py").write_text(
        "import torch\nfrom pkg.base import Base\n\nclass Derived(Base):\n"
        "    @staticmethod\n    def backward(ctx, g):\n        return g\n\n"
        "@torch.library.custom_op('pkg::twice', mutates_args=())\n"
        "def twice(x: torch.Tensor) -> torch.Tensor:\n    return Derived.apply(x)\n"
    )
    for index in range(10):  # enough files for the rounds to run on workers
        (package / f"plain{index}.py").write_text(f"x = {index}\n")


def findings(found: discovery.Run[list]) -> list[tuple[str, int, int, str, str]]:  # type: ignore[type-arg]
    return sorted(
        (Path(d.path).name, d.line, d.column, d.code, d.message) for r in found.results for d in r.result or ()
    )


def registrations(found: discovery.Run[list]) -> dict[str, list[tuple[str, str]]]:  # type: ignore[type-arg]
    return {
        op.display: [(r.kind, Path(r.path).name) for r in op.registrations]
        for r in found.results
        if r.custom_ops
        for op in r.custom_ops.ops
    }


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("rounds")
    write_package(root)
    return root


def test_workers_kept_analyses_and_parsing_again_agree(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    serial = run([str(tree)], Settings(select=("ALL",), jobs=1), check_analysis)
    # AGL116 needs Derived known as a Function: derived.py is analysed again in the last round.
    assert {"AGL101", "AGL116"} <= {code for _, _, _, code, _ in findings(serial)}
    assert registrations(serial)["pkg::scale"] == [("fake", "registrations.py"), ("autograd", "registrations.py")]
    parallel = run([str(tree)], Settings(select=("ALL",), jobs=2), check_analysis)
    monkeypatch.setattr(discovery, "_KEPT_CHARS", 0)  # nothing kept: the last round parses again
    parsed_again = run([str(tree)], Settings(select=("ALL",), jobs=2), check_analysis)
    serial_again = run([str(tree)], Settings(select=("ALL",), jobs=1), check_analysis)
    for other in (parallel, parsed_again, serial_again):
        assert findings(other) == findings(serial)
        assert registrations(other) == registrations(serial)
        assert [f.full_name for f in other.functions] == [f.full_name for f in serial.functions]
    assert not discovery._kept


def test_a_run_puts_the_garbage_collector_thresholds_back(tree: Path) -> None:
    before = gc.get_threshold()
    run([str(tree)], Settings(jobs=1), check_analysis)
    assert gc.get_threshold() == before


def test_the_last_round_reuses_kept_analyses_unless_a_later_function_may_change_them(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    linked: list[str] = []
    original = custom_ops.link_custom_ops

    def link(module, run):  # type: ignore[no-untyped-def]
        linked.append(Path(module.unit.path).name)
        original(module, run)

    # Imported by discovery where it links (a run served by the result cache never imports it).
    monkeypatch.setattr(custom_ops, "link_custom_ops", link)
    run([str(tree)], Settings(select=("ALL",), jobs=1), check_analysis)
    # derived.py derives from a Function found in the first round: analysed again in the
    # second round with it known, and that analysis is the one kept and linked.
    assert sorted(linked) == ["derived.py", "ops.py", "registrations.py"]


def _dies_in_a_worker(analysis: FileAnalysis, settings: Settings) -> None:
    if analysis.source.path.endswith("base.py") and os.getpid() != PARENT:
        os._exit(3)


PARENT = os.getpid()


def test_a_worker_that_dies_ends_the_run_instead_of_hanging(tree: Path) -> None:
    with pytest.raises(BrokenProcessPool):
        run([str(tree)], Settings(jobs=2), _dies_in_a_worker)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("from pkg.base import Base\n", True),
        ("from pkg.base import Base as B\nclass D(B): pass\n", True),
        ("import pkg.base as pb\nclass D(pb.Base): pass\n", True),
        ("import pkg\nclass D(pkg.base.Base): pass\n", True),
        ("import pkg\nclass D(pkg.other.Thing): pass\n", False),  # `base` and `Base` are not written
        ("import torch\nclass Base(torch.autograd.Function): pass\n", False),  # a local class resolves to nothing
        ("# Base, pkg.base\nx = 1\n", False),  # nothing imported
    ],
)
def test_a_kept_analysis_is_reused_unless_a_base_may_name_a_function_found_since(text: str, names: bool) -> None:
    analysis = analyze(SourceFile("m.py", text, "m"), {}, Settings())
    assert discovery._may_name(analysis, ["pkg.base.Base"]) is names


FUNCTION = (
    "import torch\n{imports}\n\nclass {name}({base}):\n    @staticmethod\n    def forward(ctx, x):\n"
    "        return x * 2\n\n    @staticmethod\n    def backward(ctx, g):\n        return g * 2\n"
)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_subclass_of_another_files_function_beside_a_function_of_its_own_is_found(
    tmp_path: Path, jobs: int
) -> None:
    """derived.py is analysed in the first round (it defines ``Own``), when ``Base`` is not
    known yet: ``class Derived(Base)`` is no candidate then and leaves no open reference.
    It was never analysed again, and ``Derived`` was missed."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "base.py").write_text(FUNCTION.format(imports="", name="Base", base="torch.autograd.Function"))
    own = FUNCTION.format(imports="from pkg.base import Base", name="Own", base="torch.autograd.Function")
    (package / "derived.py").write_text(own + "\n\nclass Derived(Base):\n    pass\n")
    found = run([str(tmp_path)], Settings(jobs=jobs), check_analysis)
    assert sorted(f.qualname for f in found.functions) == ["Base", "Derived", "Own"]
