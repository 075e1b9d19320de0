"""``[tool.autograd-lint]`` in pyproject.toml, ``--config`` and ``--isolated``: the real command."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autograd_lint.rules import rule_by_code
from cli_process import run_cli

MUL = textwrap.dedent(
    """
    import torch

    class Mul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            return grad * b
    """
).lstrip()
# The same bug in a class whose base comes from a package outside the run.
OWN_BASE = MUL.replace("import torch", "from mypkg.autograd import Base").replace("torch.autograd.Function", "Base")
CTX_TENSOR = textwrap.dedent(
    """
    import torch

    class Exp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = torch.exp(x)
            ctx.y = y
            return y

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.y
    """
).lstrip()


def check(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(["check", *args], cwd=cwd, timeout=120)


def codes(result: subprocess.CompletedProcess[str]) -> set[tuple[str, str]]:
    """(path, code) of every finding in text output."""
    found = set()
    for line in result.stdout.splitlines()[:-1]:
        path, _, _, rest = line.split(":", 3)
        found.add((Path(path).as_posix().removeprefix("./"), rest.split()[0]))
    return found


def configure(directory: Path, table: str) -> None:
    header = "[project]\nname = 'x'\n\n[tool.autograd-lint]\n"
    (directory / "pyproject.toml").write_text(header + textwrap.dedent(table))


def test_select_and_ignore_from_config_and_the_flags_on_top(tmp_path: Path) -> None:
    (tmp_path / "mul.py").write_text(MUL)
    configure(tmp_path, 'ignore = ["AGL001"]\n')
    assert check("mul.py", cwd=tmp_path).returncode == 0
    configure(tmp_path, 'select = ["AGL002"]\n')
    assert check("mul.py", cwd=tmp_path).returncode == 0
    # --select replaces the configured select; --extend-select adds to it.
    assert check("--select", "AGL001", "mul.py", cwd=tmp_path).returncode == 1
    assert check("--extend-select", "AGL001", "mul.py", cwd=tmp_path).returncode == 1
    configure(tmp_path, 'select = ["AGL"]\nextend-select = ["AGL001"]\n')
    # --ignore adds to the configured ignore (empty here), so AGL001 goes.
    assert check("--ignore", "AGL00", "mul.py", cwd=tmp_path).returncode == 1
    assert check("--ignore", "AGL001", "mul.py", cwd=tmp_path).returncode == 0


def test_discovery_walks_up_from_the_checked_paths_past_tables_it_lacks(tmp_path: Path) -> None:
    project = tmp_path / "project"
    package = project / "src" / "pkg"
    package.mkdir(parents=True)
    (package / "mul.py").write_text(MUL)
    configure(project, 'ignore = ["AGL001"]\n')
    # A closer pyproject.toml without the table is passed over, as ruff does.
    (project / "src" / "pyproject.toml").write_text("[project]\nname = 'inner'\n")
    assert check("src", cwd=project).returncode == 0
    assert check(".", cwd=package).returncode == 0
    # From outside the project, the paths (not the working directory) decide.
    assert check("project/src/pkg/mul.py", cwd=tmp_path).returncode == 0
    assert check("--isolated", "project/src", cwd=tmp_path).returncode == 1


def test_per_file_ignores(tmp_path: Path) -> None:
    for folder in ("src", "tests"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "mul.py").write_text(MUL)
    configure(tmp_path, '[tool.autograd-lint.per-file-ignores]\n"tests/*.py" = ["AGL0"]\n')
    result = check(cwd=tmp_path)
    assert result.returncode == 1
    assert codes(result) == {("src/mul.py", "AGL001")}


def test_exclude_replaces_the_defaults_and_extend_exclude_adds(tmp_path: Path) -> None:
    for folder in ("src", "build", "vendored"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "mul.py").write_text(MUL)
    configure(tmp_path, 'extend-exclude = ["vendored"]\n')
    assert {path for path, _ in codes(check(cwd=tmp_path))} == {"src/mul.py"}
    configure(tmp_path, 'exclude = ["vendored"]\n')
    assert {path for path, _ in codes(check(cwd=tmp_path))} == {"src/mul.py", "build/mul.py"}
    # --exclude on the command line adds to both.
    assert {path for path, _ in codes(check("--exclude", "src", cwd=tmp_path))} == {"build/mul.py"}


def test_extra_function_bases(tmp_path: Path) -> None:
    (tmp_path / "ops.py").write_text(OWN_BASE)
    assert check("ops.py", cwd=tmp_path).returncode == 0
    configure(tmp_path, 'extra-function-bases = ["mypkg.autograd.Base"]\n')
    result = check("ops.py", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert codes(result) == {("ops.py", "AGL001")}


@pytest.mark.skipif(rule_by_code("AGL003") is None, reason="needs AGL003")
def test_allowed_ctx_tensor_attributes(tmp_path: Path) -> None:
    (tmp_path / "exp.py").write_text(CTX_TENSOR)
    assert codes(check("--select", "AGL003", "exp.py", cwd=tmp_path)) == {("exp.py", "AGL003")}
    configure(tmp_path, 'allowed-ctx-tensor-attributes = ["y"]\n')
    assert check("--select", "AGL003", "exp.py", cwd=tmp_path).returncode == 0


def test_config_flag_and_isolated(tmp_path: Path) -> None:
    (tmp_path / "mul.py").write_text(MUL)
    configure(tmp_path, "selct = []\n")  # broken: only read when not overridden
    (tmp_path / "quiet.toml").write_text('[tool.autograd-lint]\nignore = ["AGL"]\n')
    assert check("--config", "quiet.toml", "mul.py", cwd=tmp_path).returncode == 0
    assert check("--isolated", "mul.py", cwd=tmp_path).returncode == 1
    both = check("--isolated", "--config", "quiet.toml", "mul.py", cwd=tmp_path)
    assert both.returncode == 2 and "not allowed with" in both.stderr
    missing = check("--config", "nowhere.toml", "mul.py", cwd=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.strip() == "error: nowhere.toml: cannot be read (No such file or directory)"
    (tmp_path / "empty.toml").write_text("[tool.other]\n")
    no_table = check("--config", "empty.toml", "mul.py", cwd=tmp_path)
    assert no_table.returncode == 2
    assert no_table.stderr.strip() == "error: empty.toml: has no [tool.autograd-lint] table"


BAD_CONFIGS = {
    "unknown key": ("selct = ['AGL']\n", "[tool.autograd-lint] unknown key 'selct' (did you mean 'select'?)"),
    "not a list": ("select = 'AGL001'\n", "[tool.autograd-lint] select: expected a list of strings, got 'AGL001'"),
    "not a code": (
        "ignore = ['E501']\n",
        "[tool.autograd-lint] ignore: 'E501' is not a rule code or prefix (AGL001, AGL0, AGL or ALL)",
    ),
    "per-file not a table": (
        "per-file-ignores = ['tests/*']\n",
        "[tool.autograd-lint] per-file-ignores: expected a table of glob = [codes], got ['tests/*']",
    ),
    "per-file bad code": (
        "per-file-ignores = {'tests/*' = ['X1']}\n",
        "[tool.autograd-lint] per-file-ignores 'tests/*': 'X1' is not a rule code or prefix",
    ),
    "bad base": (
        "extra-function-bases = ['mypkg..Base']\n",
        "[tool.autograd-lint] extra-function-bases: 'mypkg..Base' is not a qualified name",
    ),
    "bad attribute": (
        "allowed-ctx-tensor-attributes = ['1st']\n",
        "[tool.autograd-lint] allowed-ctx-tensor-attributes: '1st' is not an attribute name",
    ),
    "exclude not strings": ("exclude = [1]\n", "[tool.autograd-lint] exclude: expected a list of strings, got [1]"),
    "invalid toml": ("select = [\n", "invalid TOML"),
}


@pytest.mark.parametrize("name", sorted(BAD_CONFIGS))
def test_bad_configuration_is_one_line_naming_the_key_and_exit_2(tmp_path: Path, name: str) -> None:
    table, message = BAD_CONFIGS[name]
    (tmp_path / "mul.py").write_text(MUL)
    configure(tmp_path, table)
    result = check("mul.py", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("error: pyproject.toml: "), result.stderr
    assert message in result.stderr


def test_bad_code_on_the_command_line_is_a_usage_error(tmp_path: Path) -> None:
    result = check("--select", "E501", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == "error: --select: 'E501' is not a rule code or prefix (AGL001, AGL0, AGL or ALL)\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--select", "AGL999"), "error: --select: 'AGL999' selects no rule (no rule code starts with it)\n"),
        (("--select", "AGL099"), "error: --select: 'AGL099' selects no rule (no rule code starts with it)\n"),
        (("--ignore", "AGL9"), "error: --ignore: 'AGL9' selects no rule (no rule code starts with it)\n"),
        (("--extend-select", "AGL0,AGL2000"), "error: --extend-select: 'AGL2000' is not a rule code or prefix (AGL001, AGL0, AGL or ALL)\n"),
    ],
)
def test_a_code_that_selects_no_rule_is_a_usage_error(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    (tmp_path / "mul.py").write_text("x = 1\n")
    result = check(*args, "mul.py", cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", message)


def test_a_configured_code_that_selects_no_rule_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.autograd-lint]\nignore = ["AGL999"]\n')
    (tmp_path / "mul.py").write_text("x = 1\n")
    result = check("mul.py", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "error: pyproject.toml: [tool.autograd-lint] ignore: 'AGL999' selects no rule (no rule code starts with it)\n"
    )


def test_every_selector_of_a_rule_and_all_are_accepted(tmp_path: Path) -> None:
    from autograd_lint.config import rule_codes, selectors
    from autograd_lint.rules import all_rules

    assert rule_codes() == {rule.code for rule in all_rules()}
    assert selectors(["ALL", "agl", "AGL1", "AGL15", "AGL155"], "x") == ("ALL", "AGL", "AGL1", "AGL15", "AGL155")


def test_a_pyproject_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_bytes(b'[tool.autograd-lint]\nselect = ["AGL"]\n# caf\xe9\n')
    (tmp_path / "mul.py").write_text("x = 1\n")
    result = check("mul.py", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "error: pyproject.toml: not UTF-8 (byte 0xe9 at offset 43)\n"
    linted = flake8("--select", "AGL", "mul.py", cwd=tmp_path)
    assert linted.returncode == 1 and "Traceback" not in linted.stdout + linted.stderr
    assert "pyproject.toml: not UTF-8 (byte 0xe9 at offset 43)" in linted.stdout  # flake8 prints it there


def flake8(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flake8", "--select", "AGL", *args],
        cwd=cwd, capture_output=True, text=True, timeout=120,
    )


def test_flake8_project_options_from_flags_flake8_config_and_pyproject(tmp_path: Path) -> None:
    pytest.importorskip("flake8")
    (tmp_path / "ops.py").write_text(OWN_BASE)
    assert flake8("ops.py", cwd=tmp_path).stdout == ""
    reported = (
        "ops.py:12:9: AGL001 Mul.backward returns 1 gradient, but forward takes 2 inputs: backward raises "
        "`returned an incorrect number of gradients (expected 2, got 1)`\n"
    )
    on_command_line = flake8("--agl-extra-function-bases", "other.Base,mypkg.autograd.Base", "ops.py", cwd=tmp_path)
    assert on_command_line.stdout == reported, on_command_line.stderr
    (tmp_path / "setup.cfg").write_text(
        "[flake8]\nagl-extra-function-bases =\n    other.Base,\n    mypkg.autograd.Base\n"
    )
    assert flake8("ops.py", cwd=tmp_path).stdout == reported
    (tmp_path / "setup.cfg").unlink()
    configure(tmp_path, 'extra-function-bases = ["mypkg.autograd.Base"]\n')
    assert flake8("ops.py", cwd=tmp_path).stdout == reported
    # A flake8 option, when given, replaces what pyproject.toml says.
    assert flake8("--agl-extra-function-bases", "other.Base", "ops.py", cwd=tmp_path).stdout == ""
    # flake8's own selection and noqa still decide what shows.
    assert flake8("--extend-ignore", "AGL001", "ops.py", cwd=tmp_path).stdout == ""
    (tmp_path / "ops.py").write_text(OWN_BASE.replace("grad * b\n", "grad * b  # noqa: AGL001\n"))
    assert flake8("ops.py", cwd=tmp_path).stdout == ""


@pytest.mark.skipif(rule_by_code("AGL003") is None, reason="needs AGL003")
def test_flake8_allowed_ctx_tensor_attributes(tmp_path: Path) -> None:
    pytest.importorskip("flake8")
    (tmp_path / "exp.py").write_text(CTX_TENSOR)
    assert "AGL003" in flake8("exp.py", cwd=tmp_path).stdout
    assert flake8("--agl-allowed-ctx-tensor-attributes", "y", "exp.py", cwd=tmp_path).stdout == ""
    configure(tmp_path, 'allowed-ctx-tensor-attributes = ["y"]\n')
    assert flake8("exp.py", cwd=tmp_path).stdout == ""


def test_flake8_bad_configuration_is_one_clear_error(tmp_path: Path) -> None:
    pytest.importorskip("flake8")
    (tmp_path / "ops.py").write_text(OWN_BASE)
    configure(tmp_path, "extra-function-bases = 'mypkg.autograd.Base'\n")
    result = flake8("ops.py", cwd=tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stdout + result.stderr
    assert (
        "pyproject.toml: [tool.autograd-lint] extra-function-bases: expected a list of strings, "
        "got 'mypkg.autograd.Base'" in result.stdout
    )
    (tmp_path / "pyproject.toml").unlink()
    bad_flag = flake8("--agl-allowed-ctx-tensor-attributes", "a-b", "ops.py", cwd=tmp_path)
    assert "--agl-allowed-ctx-tensor-attributes: 'a-b' is not an attribute name" in bad_flag.stdout
