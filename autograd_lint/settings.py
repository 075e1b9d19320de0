"""The settings one run uses: which rules, which files, which extra Function bases.

Front ends build a :class:`Settings` from their own options (the CLI from its
flags and ``[tool.autograd-lint]``, flake8 from its option manager); the
analysis reads nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_EXCLUDES = (
    ".git",
    ".hg",
    ".svn",
    ".venv",
    "venv",
    ".tox",
    ".nox",
    ".eggs",
    "*.egg-info",
    "build",
    "dist",
    "__pycache__",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    "node_modules",
    "site-packages",
)


@dataclass(frozen=True)
class Settings:
    """Options for one run.  Rule selection uses codes or code prefixes (``AGL0``)."""

    select: tuple[str, ...] = ("AGL",)
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    # (glob, codes) pairs: codes ignored in files matching glob.
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDES
    extend_exclude: tuple[str, ...] = ()
    # Qualified names of a project's own Function base classes.
    extra_bases: frozenset[str] = frozenset()
    # ctx attributes that may hold tensors on purpose (AGL003, AGL032).
    allowed_ctx_tensor_attributes: frozenset[str] = field(default_factory=frozenset)
    # gen-tests: qualified names of surrogate-gradient Functions -> their reference ("" for none).
    surrogate_gradients: tuple[tuple[str, str], ...] = ()
    # gen-tests: qualified names of Functions -> their gradcheck tolerances ("atol=1e-4, rtol=1e-2").
    gradcheck_tolerances: tuple[tuple[str, str], ...] = ()
    # gen-tests: qualified names of low-precision kernels -> "dtype=... device=... k=... reference=...".
    low_precision: tuple[tuple[str, str], ...] = ()
    jobs: int | None = None
    # The project runs its code under torch.compile: the compile-compatibility rules
    # (those with ``on_when_compiling``) are on without being selected by code.
    uses_compile: bool = False
    # Where `check` keeps its result cache (None: .autograd_lint_cache in the project's directory).
    cache_dir: str | None = None
