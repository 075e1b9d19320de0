"""The pre-commit hook, through the real ``pre-commit try-repo``, without the network.

pre-commit installs the hook into a virtualenv of its own with pip; pip is given a
wheelhouse packed from the distributions installed here (``wheelhouse.py``) and no
index, so the test needs no network and fails, never skips, when pip would need one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import wheelhouse

REPO = Path(__file__).resolve().parents[2]
BUGGY = (REPO / "examples" / "buggy" / "custom_kernels.py").read_text()
CLEAN = (REPO / "examples" / "clean" / "fused_ops.py").read_text()


# One worker runs both (CI: --dist loadgroup): each worker would build the wheelhouse and
# the hook's environment again.
pytestmark = pytest.mark.xdist_group("precommit_hook_environment")


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def offline(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment pre-commit runs in: pip reads the local wheelhouse only; one pre-commit cache
    for the module, so the hook's environment is built once."""
    home = tmp_path_factory.mktemp("precommit")
    wheelhouse.build(home / "wheels")
    env = {
        **os.environ,
        "PRE_COMMIT_HOME": str(home / "cache"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(home / "wheels"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "VIRTUALENV_NO_PERIODIC_UPDATE": "1",
    }
    env.pop("VIRTUAL_ENV", None)
    return env


@pytest.mark.slow
def test_precommit_try_repo_fails_on_buggy_and_passes_on_clean(tmp_path: Path, offline: dict[str, str]) -> None:
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
    env = offline

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
def test_precommit_skips_files_the_project_excludes(tmp_path: Path, offline: dict[str, str]) -> None:
    """The hook passes --force-exclude: of two staged files with the same bug, vendor/x.py (which
    pyproject.toml excludes) is not checked and x.py fails the commit.

    One ``try-repo``: each builds the hook's environment anew (about 15 s of CPU, on each of CI's
    interpreters). A run where only excluded files are named passes: test_ruff_conventions.py."""
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
    (project / "x.py").write_text(BUGGY)
    git("add", "pyproject.toml", "vendor/x.py", "x.py", cwd=project)
    # No --files: the hook runs on what is staged, as at `git commit`.
    outside = subprocess.run(
        [pre_commit, "try-repo", str(REPO), "autograd-lint"],
        cwd=project, capture_output=True, text=True, timeout=600, env=offline,
    )
    assert outside.returncode == 1, outside.stdout + outside.stderr
    assert "x.py:" in outside.stdout and "AGL001" in outside.stdout
    assert "vendor/x.py" not in outside.stdout
