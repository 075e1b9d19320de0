"""Valid code that real files contain: deep expressions, odd line boundaries (issue 13).

Each file holds the same bug (AGL001: one gradient for two inputs), so each must
be reported at its own line, in one run next to a file that can't be parsed.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from fuzz_support import ANALYSED_DEPTH, FUNCTION, SENTINEL_FINDING

from autograd_lint.lint.fix import fix_file
from autograd_lint.model.source import split_lines
from autograd_lint.settings import Settings


def _with_return(expression: str) -> str:
    return FUNCTION.replace("return a * b\n", f"return {expression}\n")


ATTRIBUTES = 2_000
CASES = {
    # name: (text, line of the AGL001 finding)
    "deep_sum.py": (_with_return(" + ".join(["a * b"] * 600)), 13),
    "deep_calls.py": (_with_return("f(" * 199 + "a" + ")" * 199), 13),
    "deep_attributes.py": (_with_return("a" + ".t" * ATTRIBUTES), 13),
    "u2028_above.py": (FUNCTION.replace("import torch\n", "import torch\n# see\u2028below\n"), 14),
    "form_feed_above.py": (FUNCTION.replace("import torch\n", "import torch\n\x0c\n# page two\n"), 15),
    "form_feed_before_class.py": (FUNCTION.replace("\nclass Mul", "\n\x0cclass Mul"), 13),
    "u2028_in_class.py": (
        FUNCTION.replace("    @staticmethod\n    def backward", "    # note\u2028more\n    @staticmethod\n    def backward"),
        14,
    ),
    "nel_in_string.py": (FUNCTION.replace("ctx.save_for_backward(a, b)", "ctx.save_for_backward(a, b)  # a\x85b"), 13),
}
# A mark_dirty after a line holding U+2028 was once cut off, and AGL008 reported falsely.
DIRTY = (
    "import torch\n\n\nclass AddOne(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, x, flag):\n        x.add_(1)\n        if flag:\n"
    "            return x  # fast path\u2028no copy\n        ctx.mark_dirty(x)\n        return x\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g, None\n"
)


def check(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autograd_lint", "check", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_deep_code_and_line_boundaries_are_analysed_in_a_run_that_goes_on(tmp_path: Path) -> None:
    for name, (text, _) in CASES.items():
        (tmp_path / name).write_text(text, encoding="utf-8", newline="")
        compile(text, name, "exec")  # every case is valid Python
    (tmp_path / "cr_only.py").write_bytes(FUNCTION.replace("\n", "\r").encode())
    (tmp_path / "crlf.py").write_bytes(FUNCTION.replace("\n", "\r\n").encode())
    (tmp_path / "dirty.py").write_text(DIRTY, encoding="utf-8", newline="")
    # Not valid: CPython stops at 200 nested parentheses.
    (tmp_path / "calls_1000.py").write_text(_with_return("f(" * 1000 + "a" + ")" * 1000))
    result = check("--select", "ALL", "--jobs", "2", ".", cwd=tmp_path)
    assert "Traceback" not in result.stderr
    errors = result.stderr.splitlines()
    assert errors[0].startswith("error: ./calls_1000.py:8: syntax error: too many nested parentheses")
    too_deep = ANALYSED_DEPTH is not None and ATTRIBUTES > ANALYSED_DEPTH
    if too_deep:  # Python 3.12: see fuzz_support.ANALYSED_DEPTH
        assert errors[1:] == [
            "error: ./deep_attributes.py: too deeply nested to analyse (recursion limit reached while building the model)"
        ]
    else:
        assert len(errors) == 1
    assert result.returncode == 2
    findings = {line.split(":")[0]: line for line in result.stdout.splitlines() if ": AGL" in line}
    for name, (_, line) in CASES.items():
        if not (too_deep and name == "deep_attributes.py"):
            assert f"./{name}:{line}:9: AGL001 " in result.stdout, name
    assert "./cr_only.py" + SENTINEL_FINDING in result.stdout
    assert "./crlf.py" + SENTINEL_FINDING in result.stdout
    assert "./dirty.py" not in findings


def test_a_cr_only_file_gets_what_flake8_reports(tmp_path: Path) -> None:
    (tmp_path / "cr_only.py").write_bytes(FUNCTION.replace("\n", "\r").encode())
    flake8 = subprocess.run(
        [sys.executable, "-m", "flake8", "--select", "AGL", "cr_only.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    cli = check("cr_only.py", cwd=tmp_path)
    flake8_lines = [line.removeprefix("./") for line in flake8.stdout.splitlines()]
    assert flake8_lines == [line for line in cli.stdout.splitlines() if ": AGL" in line]
    assert flake8_lines and flake8_lines[0].startswith("cr_only.py:13:9: AGL001")


FIXABLE_CR = (
    "import torch\r\r\rclass Neg(torch.autograd.Function):\r    @staticmethod\r"
    "    def forward(ctx, x):\r        return -x\r\r    @staticmethod\r"
    "    def backward(ctx, grad):\r        return [-grad]\r"
)


def test_fix_keeps_a_cr_only_file_cr_only_and_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "pair.py"
    path.write_bytes(FIXABLE_CR.encode())
    settings = Settings(select=("AGL016",))
    first = fix_file(str(path), {}, settings, unsafe=True, write=True)
    assert first.changed and not first.errors
    data = path.read_bytes()
    assert b"\n" not in data and b"return (-grad,)\r" in data
    compile(data, "pair.py", "exec")
    second = fix_file(str(path), {}, settings, unsafe=True, write=True)
    assert not second.changed and path.read_bytes() == data


def test_lines_are_pythons_lines() -> None:
    text = "a = 1  # \u2028 \x0c \x85 \x1c\nb = '\u2029'\r\nc\n"
    assert split_lines(text) == ("a = 1  # \u2028 \x0c \x85 \x1c\n", "b = '\u2029'\r\n", "c\n")
    assert len(text.splitlines()) == 8  # what str.splitlines() gets wrong


def test_undecodable_bytes_in_a_comment_are_read_as_python_reads_them(tmp_path: Path) -> None:
    # Found by the long fuzz run: CPython compiles (and imports) a file whose bytes
    # that are not UTF-8 all sit in comments, so it must be analysed, not reported.
    data = FUNCTION.replace("import torch\n", "import torch\n# timings: 0.12\xc3 s\n").encode("latin-1")
    data = data.replace(b"return grad * b\n", b"return grad * b  # \xed\xa0\n")
    compile(data, "comment_bytes.py", "exec")
    (tmp_path / "comment_bytes.py").write_bytes(data)
    result = check("comment_bytes.py", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (1, "")
    assert result.stdout.startswith("comment_bytes.py:14:9: AGL001 ")
    # A rewrite would change those bytes: --fix and --add-noqa refuse, with one line.
    fixed = check("--add-noqa", "comment_bytes.py", cwd=tmp_path)
    assert fixed.returncode == 2 and "Traceback" not in fixed.stderr
    assert fixed.stderr.splitlines() == [
        "error: comment_bytes.py:2: not rewritten: byte 0xc3 at offset 28 is not utf-8 (Python skips it in a comment)",
        "Added noqa comments to 0 lines.",
    ]
    assert (tmp_path / "comment_bytes.py").read_bytes() == data


def test_a_coding_comment_below_the_first_two_lines_of_a_cr_only_file_is_no_cookie(tmp_path: Path) -> None:
    # Found by the long fuzz run: tokenize.detect_encoding reads up to "\n", so it
    # took the whole CR-only file for line one and this comment for its cookie.
    text = FUNCTION.replace("class Mul", "# the coding: you see here is prose\nclass Mul").replace("\n", "\r")
    compile(text.encode(), "cr_cookie.py", "exec")
    (tmp_path / "cr_cookie.py").write_bytes(text.encode())
    result = check("cr_cookie.py", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (1, "")
    assert result.stdout.startswith("cr_cookie.py:14:9: AGL001 ")



def test_backslash_lines_libcst_rejects_are_analysed_at_their_own_positions(tmp_path: Path) -> None:
    # Found by the long fuzz run: libcst's parser rejects a line holding only a
    # backslash continuation at the start of a block; CPython compiles it.  It is read
    # as spaces for analysis (Python's tree, positions included, is the same), never for a fix.
    block_start = FUNCTION.replace("(ctx, a, b):\n", "(ctx, a, b):\n        \\\n")
    final = FUNCTION.replace("\n", "\r\n") + "x = 1 \\\r\n"
    in_string = block_start.replace("import torch\n", 'import torch\nDOC = """\n\\\n"""\n')
    files = {"block_start.py": block_start, "final.py": final, "in_string.py": in_string}
    # ``python final.py`` and ``import final`` refuse a backslash continuing the last line
    # into the end of the file: they read the file with universal newlines.  ``compile()``
    # of the text as it is accepted it up to 3.11, and the file was analysed.
    for name, text in files.items():
        if name != "final.py":
            compile(text, name, "exec")
        (tmp_path / name).write_bytes(text.encode())
    run = subprocess.run([sys.executable, "final.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "SyntaxError" in run.stderr
    result = check(*files, cwd=tmp_path)
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: final.py:14: syntax error: ")
    printed = [line.split(" AGL001 ")[0] + " AGL001 " for line in result.stdout.splitlines()[:2]]
    assert printed == ["block_start.py:14:9: AGL001 ", "in_string.py:17:9: AGL001 "]
    # --fix can't write from a rewritten text: one line, and the file is left as it was.
    fixable = block_start.replace("ctx.saved_tensors", "ctx.saved_variables")  # AGL027 has a safe fix
    (tmp_path / "fixable.py").write_bytes(fixable.encode())
    fixed = check("--fix", "fixable.py", cwd=tmp_path)
    assert fixed.returncode == 2 and "Traceback" not in fixed.stderr
    assert len(fixed.stderr.splitlines()) == 1 and "fixable.py: not fixed: libcst cannot parse it" in fixed.stderr
    assert (tmp_path / "fixable.py").read_bytes() == fixable.encode()


def test_a_form_feed_starting_a_line_inside_a_block_is_analysed_at_python_s_columns(tmp_path: Path) -> None:
    # Found by this session's fuzz run (2 of the first 900 mutations): CPython counts a
    # line's indentation from its last form feed; libcst's tokenizer rejects such a
    # line inside a block ("no matching outer block for dedent").
    # libcst gave the second file's finding one column short of Python's (and flake8's).
    files = {
        "indented.py": FUNCTION.replace(
            "        return grad * b\n", "        if grad is None:\n\x0c            raise ValueError\n        return grad * b\n"
        ),
        "same_indent.py": FUNCTION.replace("        return grad * b\n", "\x0c        return grad * b\n"),
    }
    expected = []
    for name, text in files.items():
        tree = compile(text, name, "exec", flags=ast.PyCF_ONLY_AST)
        ret = [node for node in ast.walk(tree) if isinstance(node, ast.Return)][-1]
        expected.append(f"{name}:{ret.lineno}:{ret.col_offset + 1}: AGL001 ")
        (tmp_path / name).write_bytes(text.encode())
    result = check(*files, cwd=tmp_path)
    assert (result.returncode, result.stderr) == (1, "")
    assert [line.split(" AGL001 ")[0] + " AGL001 " for line in result.stdout.splitlines()[:2]] == expected
