"""``check --fix --select AGL100``: stale ``# noqa`` codes go, and nothing but comments changes."""

from __future__ import annotations

import ast
import io
import subprocess
import textwrap
import tokenize
from pathlib import Path

from autograd_lint.noqa import add_codes, comment_layout
from cli_process import run_cli

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").rglob("*.py"))

SOURCE = textwrap.dedent(
    """
    import torch


    class Mul(torch.autograd.Function):  # noqa: AGL001
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)  # noqa:AGL003,E501
            # noqa: AGL005
            return a * b  # type: ignore  # noqa: AGL001, AGL999  # why: see #12

        @staticmethod
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            return (grad * b,  # noqa: AGL001 legacy kernel
                    grad * a)  # NOQA: agl016, AGL0

    class Neg(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return -x  # noqa

        @staticmethod
        def backward(ctx, grad):
            return grad  # noqa: AGL001, F401
    """
).lstrip()
EXPECTED = textwrap.dedent(
    """
    import torch


    class Mul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)  # noqa:E501
            return a * b  # type: ignore  # why: see #12

        @staticmethod
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            return (grad * b,  # legacy kernel
                    grad * a)

    class Neg(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return -x  # noqa

        @staticmethod
        def backward(ctx, grad):
            return grad  # noqa: F401
    """
).lstrip()


def check(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(["check", *args], cwd=cwd, timeout=300)


def code_outside_comments(text: str) -> list[str]:
    """``text``'s lines with their comments (and the spaces before them) cut off, lines left empty dropped."""
    columns = {
        token.start[0]: token.start[1]
        for token in tokenize.generate_tokens(io.StringIO(text).readline)
        if token.type == tokenize.COMMENT
    }
    lines = []
    for number, line in enumerate(text.splitlines(), 1):
        code = line[: columns[number]].rstrip() if number in columns else line
        if code.strip() or number not in columns:
            lines.append(code)
    return lines


def assert_only_comments_changed(before: str, after: str) -> None:
    compile(after, "fixed.py", "exec")
    assert code_outside_comments(after) == code_outside_comments(before)


def test_fix_removes_only_the_codes_that_silence_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ops.py"
    path.write_text(SOURCE)
    listed = check("--select", "AGL100", "ops.py", cwd=tmp_path)
    assert listed.returncode == 1 and listed.stdout.count(": AGL100 ") == 7, listed.stdout
    fixed = check("--fix", "--select", "AGL100", "ops.py", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert fixed.stdout.splitlines()[-1] == "Fixed 7 problems (0 remaining)."
    assert path.read_text() == EXPECTED
    assert_only_comments_changed(SOURCE, EXPECTED)
    # What remains silences something (or is another tool's): a second fix has nothing to do.
    again = check("--fix", "--select", "AGL100", "ops.py", cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.splitlines()[-1] == "Fixed 0 problems (0 remaining)."
    # A code that does silence a finding stays: the finding is not reported.
    assert "AGL001" not in check("--select", "AGL001", "ops.py", cwd=tmp_path).stdout


def test_stale_codes_after_add_noqa_and_a_repair(tmp_path: Path) -> None:
    """The migration the fix exists for: --add-noqa today, a bug fixed tomorrow, the stale code removed."""
    for example in EXAMPLES:
        (tmp_path / example.name).write_text(example.read_text())
    assert check("--add-noqa=legacy", ".", cwd=tmp_path).returncode == 0
    buggy = tmp_path / "custom_kernels.py"
    silenced = buggy.read_text()
    assert "return grad * b, grad * a  # noqa: AGL001  # legacy" in silenced
    repaired = silenced.replace("return grad * b, grad * a  # noqa", "return grad * b, grad * a, grad  # noqa")
    buggy.write_text(repaired)
    result = check("--fix", "--extend-select", "AGL100", "--exit-non-zero-on-fix", ".", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr  # a file changed; nothing else remains
    assert result.stdout.splitlines()[-1] == "Fixed 1 problem (0 remaining)."
    after = buggy.read_text()
    assert "return grad * b, grad * a, grad  # legacy\n" in after
    assert after.count("# noqa: AGL") == repaired.count("# noqa: AGL") - 1
    assert_only_comments_changed(repaired, after)


def test_every_comment_slot_of_the_examples(tmp_path: Path) -> None:
    """A stale code on every line that can hold a comment: each goes, E501 stays, the code is untouched."""
    originals = {}
    for example in EXAMPLES:
        text = example.read_text()
        layout = comment_layout(text)
        assert layout is not None
        lines = text.splitlines(keepends=True)
        for index, line in enumerate(lines):
            number = index + 1
            body = line.rstrip("\r\n")
            if number in layout.blocked or not body.strip():
                continue
            lines[index] = add_codes(body, layout.comment_columns.get(number), ["AGL005", "E501"]) + line[len(body):]
        originals[example.name] = "".join(lines)
        (tmp_path / example.name).write_text(originals[example.name])
    result = check("--fix", "--select", "AGL100", ".", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    for name, before in originals.items():
        after = (tmp_path / name).read_text()
        assert_only_comments_changed(before, after)
        assert after.count("E501") == before.count("E501")
        # No rule reports AGL005 in the examples: it goes from every line of every Function
        # (lines outside them that name an imported name keep it: see the test below).
        lines = after.splitlines()
        for node in ast.walk(ast.parse(after)):
            if isinstance(node, ast.ClassDef) and any("Function" in ast.unparse(b) for b in node.bases):
                assert not any("AGL005" in line for line in lines[node.lineno - 1 : node.end_lineno]), name
    assert check("--select", "AGL100", ".", cwd=tmp_path).returncode == 0


def test_codes_that_depend_on_files_the_run_does_not_read_are_left(tmp_path: Path) -> None:
    """pre-commit checks the staged files only: a subclass of another file's Function is not
    recognised there, so its noqa codes look unused, but they are not, and must stay."""
    (tmp_path / "base.py").write_text(
        "import torch\n\n\nclass Base(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, a, b):\n        ctx.save_for_backward(a, b)\n        return a * b\n"
    )
    sub = textwrap.dedent(
        """
        import torch

        from base import Base


        class Sub(Base):
            @staticmethod
            def backward(ctx, grad):
                a, b = ctx.saved_tensors
                return grad * b  # noqa: AGL001


        class Own(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, grad):
                return grad * 2  # noqa: AGL001
        """
    ).lstrip()
    (tmp_path / "sub.py").write_text(sub)
    # The whole project: Sub is a Function, its AGL001 is real and silenced; Own's code is stale.
    whole = check("--select", "AGL001,AGL100", ".", cwd=tmp_path)
    assert whole.stdout.splitlines()[:-1] == [
        "./sub.py:20:26: AGL100 `# noqa` lists AGL001, which silences nothing on this line"
    ], whole.stdout
    # sub.py alone (as pre-commit would check it): Sub's code can't be judged, and is kept.
    alone = check("--fix", "--select", "AGL100", "sub.py", cwd=tmp_path)
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert (tmp_path / "sub.py").read_text() == sub.replace("return grad * 2  # noqa: AGL001", "return grad * 2")
