"""The pre-commit hook, through the real ``pre-commit try-repo``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUGGY = (REPO / "examples" / "buggy" / "custom_kernels.py").read_text()
CLEAN = (REPO / "examples" / "clean" / "fused_ops.py").read_text()


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.mark.slow
def test_precommit_try_repo_fails_on_buggy_and_passes_on_clean(tmp_path: Path) -> None:
    pre_commit = shutil.which("pre-commit") or str(Path(sys.executable).with_name("pre-commit"))
    if not Path(pre_commit).exists():
        pytest.skip("pre-commit is not installed")
    if not (REPO / ".git").exists():
        pytest.skip("needs the project's git checkout")
    project = tmp_path / "project"
    project.mkdir()
    git("init", "-q", cwd=project)
    (project / "buggy.py").write_text(BUGGY)
    (project / "clean.py").write_text(CLEAN)
    git("add", ".", cwd=project)
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "GIT_CONFIG_NOSYSTEM": "1"}
    env.pop("VIRTUAL_ENV", None)

    def try_repo(path: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [pre_commit, "try-repo", str(REPO), "autograd-lint", "--files", path],
            cwd=project, capture_output=True, text=True, timeout=600, env=env,
        )

    buggy = try_repo("buggy.py")
    assert buggy.returncode == 1, buggy.stdout + buggy.stderr
    assert "AGL001" in buggy.stdout
    clean = try_repo("clean.py")
    assert clean.returncode == 0, clean.stdout + clean.stderr


@pytest.mark.slow
def test_precommit_skips_files_the_project_excludes(tmp_path: Path) -> None:
    """The hook passes --force-exclude: a staged vendor/x.py that pyproject.toml excludes is not
    checked, and the same bug outside vendor/ fails the commit."""
    pre_commit = shutil.which("pre-commit") or str(Path(sys.executable).with_name("pre-commit"))
    if not Path(pre_commit).exists():
        pytest.skip("pre-commit is not installed")
    if not (REPO / ".git").exists():
        pytest.skip("needs the project's git checkout")
    project = tmp_path / "project"
    (project / "vendor").mkdir(parents=True)
    git("init", "-q", cwd=project)
    (project / "pyproject.toml").write_text('[tool.autograd-lint]\nextend-exclude = ["vendor"]\n')
    (project / "vendor" / "x.py").write_text(BUGGY)
    git("add", "pyproject.toml", "vendor/x.py", cwd=project)
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "GIT_CONFIG_NOSYSTEM": "1"}
    env.pop("VIRTUAL_ENV", None)

    def try_repo() -> subprocess.CompletedProcess[str]:
        # No --files: the hook runs on what is staged, as at `git commit`.
        return subprocess.run(
            [pre_commit, "try-repo", str(REPO), "autograd-lint"],
            cwd=project, capture_output=True, text=True, timeout=600, env=env,
        )

    vendored = try_repo()
    assert vendored.returncode == 0, vendored.stdout + vendored.stderr
    assert "AGL001" not in vendored.stdout
    (project / "x.py").write_text(BUGGY)
    git("add", "x.py", cwd=project)
    outside = try_repo()
    assert outside.returncode == 1, outside.stdout + outside.stderr
    assert "x.py:" in outside.stdout and "AGL001" in outside.stdout
    assert "vendor/x.py" not in outside.stdout
