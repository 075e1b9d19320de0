"""Issue 22: hostile input and odd file systems.  Nothing lost, nothing hangs, every path guarded.

Each test runs the command as a user runs it (a subprocess) and checks the
documented behaviour: one line naming the file and the reason, exit 2, every
other file still checked, no user file changed unless that is the command's job.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Iterator

import pytest

from other_user import as_other_user, autograd_lint, shared_folder

MUL = textwrap.dedent(
    """\
    import torch


    class Mul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, grad):
            return grad
    """
)
MUL_FINDING = "AGL001 Mul.backward returns 1 gradient, but forward takes 2 inputs"
# Fixable: AGL016 turns the list into a tuple.
SCALE = textwrap.dedent(
    """\
    import torch


    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return [grad * 2]
    """
)


def cli(*args: str, cwd: Path, stdin: bytes | None = None, env: dict[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "autograd_lint", *args], cwd=cwd, capture_output=True,
                          input=stdin, timeout=timeout, env={**os.environ, **(env or {})})


def lines(output: bytes) -> list[str]:
    return output.decode("utf-8", "backslashreplace").splitlines()


@pytest.fixture
def shared() -> Iterator[Path]:
    with shared_folder() as folder:
        yield folder


# 1. Only regular files are opened: a FIFO never blocks the run.


def test_a_fifo_in_the_tree_or_named_is_one_line_and_never_blocks(tmp_path: Path) -> None:
    (tmp_path / "ops.py").write_text(MUL)
    os.mkfifo(tmp_path / "pipe.py")
    for paths in (["."], ["pipe.py", "ops.py"]):
        result = cli("check", *paths, cwd=tmp_path, timeout=60)
        assert result.returncode == 2
        assert lines(result.stderr) == [f"error: {'./' if paths == ['.'] else ''}pipe.py: not a regular file (a FIFO); not read"]
        assert MUL_FINDING in result.stdout.decode()


# 2. A directory that can't be listed is reported, not passed over.


def test_a_directory_that_cannot_be_listed_is_reported(shared: Path) -> None:
    (shared / "ops.py").write_text(MUL)
    hidden = shared / "hidden"
    hidden.mkdir()
    (hidden / "more.py").write_text(MUL)
    os.chmod(hidden, 0o000)
    result = autograd_lint(as_other_user(), "check", ".", cwd=shared)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        "error: ./hidden: directory cannot be listed (Permission denied); its files were not checked"
    ]
    assert MUL_FINDING in result.stdout


def test_a_directory_path_over_path_max_is_reported(tmp_path: Path) -> None:
    (tmp_path / "ops.py").write_text(MUL)
    deep = tmp_path / "deep"
    os.mkdir(deep)
    fd = os.open(deep, os.O_RDONLY)
    try:  # build the chain relative to an open directory: its full path is over PATH_MAX
        for _ in range(30):
            os.mkdir("d" * 200, dir_fd=fd)
            inner = os.open("d" * 200, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    result = cli("check", ".", cwd=tmp_path)
    assert result.returncode == 2
    [error] = lines(result.stderr)
    assert error.startswith("error: ./deep/") and "directory cannot be listed (File name too long)" in error
    assert MUL_FINDING in result.stdout.decode()


# 3. The writer refuses what it must not replace.


def test_write_baseline_never_replaces_a_source_file(tmp_path: Path) -> None:
    (tmp_path / "ops.py").write_text(MUL)
    result = cli("check", "--write-baseline", "ops.py", "ops.py", cwd=tmp_path)
    assert result.returncode == 2
    assert lines(result.stderr)[0].startswith("error: ops.py: cannot be written (holds something else than a baseline")
    assert (tmp_path / "ops.py").read_text() == MUL


def test_fix_and_add_noqa_leave_a_read_only_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "ops.py"
    path.write_text(SCALE)
    os.chmod(path, 0o444)
    for option in ("--fix", "--add-noqa"):
        result = cli("check", option, "ops.py", cwd=tmp_path)
        assert result.returncode == 2
        assert "error: ops.py: is read-only (mode 0444); not replaced" in lines(result.stderr)
        assert path.read_text() == SCALE and stat.S_IMODE(path.stat().st_mode) == 0o444


def test_fix_leaves_a_hard_linked_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "ops.py"
    path.write_text(SCALE)
    os.link(path, tmp_path / "other_name.py")
    result = cli("check", "--fix", "ops.py", cwd=tmp_path)
    assert result.returncode == 2
    assert any(line.startswith("error: ops.py: has 2 names (hard links); not replaced") for line in lines(result.stderr))
    assert path.read_text() == SCALE == (tmp_path / "other_name.py").read_text()
    assert path.stat().st_ino == (tmp_path / "other_name.py").stat().st_ino


def test_fix_as_another_user_never_takes_a_file_over(shared: Path) -> None:
    path = shared / "ops.py"
    path.write_text(SCALE)
    os.chmod(path, 0o666)  # writable by everyone, owned by root: a rename would make it nobody's
    result = autograd_lint(as_other_user(), "check", "--fix", "ops.py", cwd=shared)
    assert result.returncode == 2
    assert "error: ops.py: belongs to another user or group; not replaced: the new file would change its owner" in (
        result.stderr.splitlines()
    )
    assert path.read_text() == SCALE and path.stat().st_uid == 0


def test_gen_tests_never_writes_two_modules_to_one_file(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "__init__.py").write_text("")
    (tmp_path / "a" / "b.py").write_text(MUL)
    (tmp_path / "a_b.py").write_text(SCALE)
    result = cli("gen-tests", "a", "a_b.py", "--out", "gen", cwd=tmp_path)
    assert result.returncode == 2
    out = result.stdout.decode()
    assert out.count("wrote gen/test_gradcheck_a_b.py") == 1
    [error] = lines(result.stderr)
    assert error.startswith("gen/test_gradcheck_a_b.py: would also hold the output for ")
    assert "(two outputs, one path)" in error and "'s tests are not generated (rename one of the modules)" in error


def test_gen_tests_out_naming_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "ops.py").write_text(MUL)
    (tmp_path / "gen").write_text("mine\n")
    result = cli("gen-tests", "ops.py", "--out", "gen", cwd=tmp_path)
    assert (result.returncode, lines(result.stderr)) == (
        2, ["error: --out gen: not a directory; the generated test modules go into a directory"]
    )
    assert (tmp_path / "gen").read_text() == "mine\n"


@pytest.mark.parametrize(
    "source",
    [
        b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + SCALE.encode(),
        b"\xef\xbb\xbf" + SCALE.encode(),
        SCALE.replace("\n", "\r").encode(),
        SCALE.replace("\n", "\r\n").encode(),
    ],
    ids=["latin-1 cookie", "BOM", "CR only", "CRLF"],
)
def test_stdin_fix_keeps_the_buffer_s_encoding_and_line_ends(tmp_path: Path, source: bytes) -> None:
    result = cli("check", "-", "--stdin-filename", "ops.py", "--fix", cwd=tmp_path, stdin=source)
    assert result.returncode == 0, result.stderr
    expected = source.replace(b"return [grad * 2]", b"return (grad * 2,)")
    assert result.stdout == expected


# 4. The deep-code protection on every entry point.


def test_deep_code_on_stdin_is_checked_as_a_file_is(tmp_path: Path) -> None:
    deep = MUL.replace("return grad\n", "return " + " + ".join(["grad"] * 600) + "\n")
    (tmp_path / "ops.py").write_text(deep)
    from_file = cli("check", "ops.py", cwd=tmp_path)
    from_stdin = cli("check", "-", "--stdin-filename", "ops.py", cwd=tmp_path, stdin=deep.encode())
    assert from_file.returncode == from_stdin.returncode == 1, from_stdin.stderr
    assert from_stdin.stdout == from_file.stdout and MUL_FINDING in from_stdin.stdout.decode()
    assert from_stdin.stderr == b""


# 7. Side files: one line naming the file.


@pytest.mark.parametrize(
    ("command", "name", "content", "message"),
    [
        (["check", "--baseline", "side.json", "ops.py"], "side.json", "[" * 5000 + "]" * 5000,
         "error: side.json: not a baseline file (nested deeper than 100 levels)"),
        (["check", "--baseline", "side.json", "ops.py"], "side.json", '{"format": NaN}',
         "error: side.json: not a baseline file (invalid JSON: NaN is not JSON)"),
        (["gen-tests", "ops.py", "--out", "gen", "--inputs", "side.json"], "side.json", "[" * 5000 + "]" * 5000,
         "side.json: cannot read recorded inputs: not a recording (nested deeper than 100 levels)"),
        (["pragma", "--only-unexercised", "side.json", "ops.py"], "side.json", "[]",
         "error: side.json: not an autograd-cov report of version 2 (make it again with this autograd-lint)"),
        (["pragma", "--only-unexercised", "side.json", "ops.py"], "side.json", '{"version": 2, "functions": "x"}',
         "error: side.json: not an autograd-cov report: \"functions\" must be a list of objects"),
        (["pragma", "--only-unexercised", "side.json", "ops.py"], "side.json", "{" + '"a":{' * 3000 + "}" * 3001,
         "error: side.json: not an autograd-cov report (nested deeper than 100 levels)"),
    ],
    ids=["baseline deep", "baseline NaN", "recording deep", "report list", "report functions string", "report deep"],
)
def test_a_bad_side_file_is_one_line_naming_it(
    tmp_path: Path, command: list[str], name: str, content: str, message: str
) -> None:
    (tmp_path / "ops.py").write_text(MUL)
    (tmp_path / name).write_text(content)
    result = cli(*command, cwd=tmp_path)
    assert result.returncode == 2
    assert message in lines(result.stderr), result.stderr
    assert b"Traceback" not in result.stderr


def test_sarif_with_a_file_name_that_is_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "caf\xe9.py".encode("latin-1").decode("utf-8", "surrogateescape")).write_text(MUL)
    result = cli("check", "--output-format", "sarif", ".", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    [finding] = json.loads(result.stdout)["runs"][0]["results"]
    assert finding["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "caf%E9.py"


def test_an_ascii_terminal_with_a_non_ascii_function_name(tmp_path: Path) -> None:
    (tmp_path / "ops.py").write_text(MUL.replace("Mul", "Mül"))
    result = cli("check", "ops.py", cwd=tmp_path, env={"PYTHONIOENCODING": "ascii"})
    assert result.returncode == 1, result.stderr
    assert b"AGL001 M\\xfcl.backward returns 1 gradient" in result.stdout


# 8. Recordings with wrong values or types: fall back to search, blame the recording.


def recording(functions: dict[str, object]) -> str:
    return json.dumps({"format": 2, "functions": functions})


def test_a_recording_with_json_nan_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "ops.py").write_text(MUL)
    tensor = {"shape": [2], "dtype": "float64", "device": "cpu", "requires_grad": True, "values": [1.0, 2.0]}
    case = {"calls": 1, "args": [{"tensor": tensor}, {"tensor": tensor}]}
    text = recording({"ops.Mul": {"module": "ops", "qualname": "Mul", "path": "ops.py", "cases": [case]}})
    (tmp_path / "rec.json").write_text(text.replace("2.0", "NaN"))
    result = cli("gen-tests", "ops.py", "--out", "gen", "--inputs", "rec.json", cwd=tmp_path)
    assert result.returncode == 2
    assert lines(result.stderr) == ["rec.json: cannot read recorded inputs: not a recording (invalid JSON: NaN is not JSON)"]
    generated = (tmp_path / "gen" / "test_gradcheck_ops.py").read_text()
    assert "nan" not in generated
    compile(generated, "generated", "exec")


@pytest.mark.parametrize("cases", ["oops", [{"args": "x"}], [{"args": [{"tensor": {"shape": "ab"}}]}],
                                   [{"calls": 1, "args": [{"tensor": {"shape": [1], "dtype": "float64", "device": "cpu",
                                                                      "requires_grad": True, "values": ["x"]}}]}]])
def test_a_malformed_recorded_entry_blames_the_recording_and_searches(tmp_path: Path, cases: object) -> None:
    (tmp_path / "ops.py").write_text(MUL)
    entry = {"module": "ops", "qualname": "Mul", "path": "ops.py", "cases": cases}
    (tmp_path / "rec.json").write_text(recording({"ops.Mul": entry}))
    result = cli("gen-tests", "ops.py", "--out", "gen", "--inputs", "rec.json", cwd=tmp_path)
    assert result.returncode == 2
    [error] = lines(result.stderr)
    assert error.startswith("rec.json: the recorded cases of ops.Mul are malformed (")
    assert error.endswith("); its inputs were searched for instead")
    assert "1 search" in result.stdout.decode()
    assert (tmp_path / "gen" / "test_gradcheck_ops.py").exists()


# 9. noqa: text inside a string does not hide the comment --add-noqa writes.


def test_add_noqa_after_a_string_holding_noqa_text(tmp_path: Path) -> None:
    path = tmp_path / "ops.py"
    path.write_text(MUL.replace("return grad\n", 'return grad if "# noqa: E1" else grad\n'))
    added = cli("check", "--add-noqa", "ops.py", cwd=tmp_path)
    assert added.returncode == 0 and lines(added.stderr) == ["Added noqa comments to 1 line."]
    assert 'return grad if "# noqa: E1" else grad  # noqa: AGL001\n' in path.read_text()
    assert cli("check", "ops.py", cwd=tmp_path).returncode == 0


def test_add_noqa_with_a_form_feed_above_goes_on_the_finding_s_line(tmp_path: Path) -> None:
    path = tmp_path / "ops.py"
    path.write_text(MUL.replace("import torch\n", "import torch  # page\x0cbreak\u2028here\n"))
    assert cli("check", "--add-noqa", "ops.py", cwd=tmp_path).returncode == 0
    assert "        return grad  # noqa: AGL001\n" in path.read_text()
    assert cli("check", "ops.py", cwd=tmp_path).returncode == 0


# 10. One file named twice is one file.


def test_a_file_named_twice_is_checked_once(tmp_path: Path) -> None:
    (tmp_path / "ops.py").write_text(MUL)
    result = cli("check", "ops.py", "./ops.py", ".", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout.decode().count(MUL_FINDING) == 1 and "(1 files, 1 autograd.Functions)" in result.stdout.decode()
    cli("check", "--write-baseline", "base.json", "ops.py", "./ops.py", cwd=tmp_path)
    assert [entry["count"] for entry in json.loads((tmp_path / "base.json").read_text())["entries"]] == [1]
    again = cli("check", "--baseline", "base.json", "ops.py", cwd=tmp_path)
    assert (again.returncode, again.stderr) == (0, b"")


# 13. One file's cost is bounded.


def test_a_file_too_large_to_parse_is_one_line_and_the_others_are_checked(tmp_path: Path) -> None:
    (tmp_path / "ops.py").write_text(MUL)
    huge = MUL.replace("return a * b\n", "x = [" + "0, " * 1_400_000 + "]\n        return a * b\n")
    (tmp_path / "huge.py").write_text(huge)
    result = cli("check", ".", cwd=tmp_path)
    assert result.returncode == 2
    assert lines(result.stderr) == [
        "error: ./huge.py: too large to analyse (4,200,201 characters; the limit is 4,000,000)"
    ]
    assert MUL_FINDING in result.stdout.decode()


def test_too_many_nodes_for_libcst_is_refused_before_its_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    from autograd_lint.lint.engine import check_source
    from autograd_lint.model import guard
    from autograd_lint.model.source import SourceError, SourceFile
    from autograd_lint.settings import Settings

    monkeypatch.setattr(guard, "MAX_PARSED_NODES", 50_000)
    monkeypatch.setattr(guard, "_UNCOUNTED_CHARS", 25_000)
    text = MUL.replace("return a * b\n", "x = [" + "0, " * 60_000 + "]\n        return a * b\n")
    with pytest.raises(SourceError) as raised:
        check_source(SourceFile("big.py", text, "big"), Settings())
    assert str(raised.value) == (
        "big.py: too large to analyse (60,038 syntax nodes in one parse; the limit is 50,000, "
        "about 1.4 GB for libcst's parser)"
    )
