"""Fuzzing autograd-lint: inputs to feed it, and what every run must keep true.

Shared by the fast fuzz test (``tests/robustness/test_fuzz.py``) and the long run
(``bench/fuzz.py``).  Inputs are real Function files mutated the ways files get
damaged or written on other systems, and generated programs (hypothesmith) put
at module level and inside a Function's ``forward``.  The properties:

* analysing one file raises nothing but a one-line ``SourceError``, never an
  internal error, and never any error for a file that CPython compiles;
* ``--fix`` output compiles and a second fix changes nothing;
* a run over many files reports one line per bad file and every finding that
  the files give on their own (``check_run``).
"""

from __future__ import annotations

import ast
import os
import random
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from autograd_lint.lint.engine import check_analysis, module_needs
from autograd_lint.lint.fix import fix_source
from autograd_lint.model.analysis import analyze
from autograd_lint.model.locate import mentions_function
from autograd_lint.model.custom_ops import mentions_custom_op
from autograd_lint.model.guard import run_guarded
from autograd_lint.model.source import SourceError, SourceFile, decode_source
from autograd_lint.settings import Settings

SETTINGS = Settings(select=("ALL",))

FUNCTION = textwrap.dedent(
    """\
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
)
# What FUNCTION must give in any run: its line and code.
SENTINEL_FINDING = ":13:9: AGL001 "
# How deep the code that this interpreter compiles is analysed, where that is less deep:
# Python 3.12 has a C recursion limit fixed when it was built (about 1,500 calls through
# C; sys.setrecursionlimit does not move it), and libcst's code generation calls through
# C once per nesting level (``self._codegen_impl(state, **kwargs)``).  On 3.12.1 an
# expression nested deeper than about 700 levels, which 3.12 compiles to about 2,990,
# is one error line, "too deeply nested to analyse".  3.10, 3.11 and 3.13 analyse
# every depth the fuzz gives them (3.13's C limit is 10,000).
ANALYSED_DEPTH = 700 if sys.version_info[:2] == (3, 12) else None


def rule_examples() -> list[str]:
    """The rules' own VALID and INVALID examples: small real-shaped Function files."""
    from autograd_lint.rules import all_rules

    sources = []
    for rule in all_rules():
        for example in (*rule.VALID, *rule.INVALID):
            if example.parses_here:  # newer syntax would only be a syntax error here
                sources.append(example.source)
    return sources


# ---------------------------------------------------------------- mutations


def _lines(text: str) -> list[str]:
    return text.split("\n")


def truncate(text: str, rng: random.Random) -> bytes:
    return text[: rng.randrange(len(text) + 1)].encode()


def delete_lines(text: str, rng: random.Random) -> bytes:
    lines = _lines(text)
    for _ in range(rng.randint(1, 3)):
        if lines:
            del lines[rng.randrange(len(lines))]
    return "\n".join(lines).encode()


def duplicate_lines(text: str, rng: random.Random) -> bytes:
    lines = _lines(text)
    for _ in range(rng.randint(1, 3)):
        index = rng.randrange(len(lines))
        lines.insert(index, lines[index])
    return "\n".join(lines).encode()


def mixed_endings(text: str, rng: random.Random) -> bytes:
    return "".join(line + rng.choice(["\n", "\r\n", "\r"]) for line in _lines(text)).encode()


def cr_only(text: str, rng: random.Random) -> bytes:
    return text.replace("\n", "\r").encode()


def crlf(text: str, rng: random.Random) -> bytes:
    return text.replace("\n", "\r\n").encode()


def bom(text: str, rng: random.Random) -> bytes:
    return b"\xef\xbb\xbf" + text.encode()


def nul(text: str, rng: random.Random) -> bytes:
    data = text.encode()
    at = rng.randrange(len(data) + 1)
    return data[:at] + b"\x00" + data[at:]


def invalid_utf8(text: str, rng: random.Random) -> bytes:
    data = text.encode()
    at = rng.randrange(len(data) + 1)
    return data[:at] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80"]) + data[at:]


def tabs(text: str, rng: random.Random) -> bytes:
    lines = _lines(text)
    every = rng.random() < 0.5
    changed = [
        re.sub("^((?:    )+)", lambda m: "\t" * (len(m.group(1)) // 4), line) if every or rng.random() < 0.3 else line
        for line in lines
    ]
    return "\n".join(changed).encode()


# Characters that str.splitlines() splits at and Python does not.
_NOT_LINE_BREAKS = ["\x0c", "\u2028", "\u2029", "\x85", "\x0b", "\x1c", "\x1d", "\x1e"]


def odd_characters(text: str, rng: random.Random) -> bytes:
    """Form feeds and other characters that are not line breaks, in comments and indentation."""
    lines = _lines(text)
    for _ in range(rng.randint(1, 4)):
        index = rng.randrange(len(lines))
        char = rng.choice(_NOT_LINE_BREAKS)
        where = rng.random()
        if where < 0.4:
            lines.insert(index, f"# page {char} break")
        elif where < 0.7:
            lines[index] = lines[index] + f"  # {char}tail"
        elif where < 0.85:
            lines[index] = "\x0c" + lines[index]
        else:
            lines.insert(index, char)
    return "\n".join(lines).encode()


def long_line(text: str, rng: random.Random) -> bytes:
    lines = _lines(text)
    index = rng.randrange(len(lines))
    size = rng.choice([5_000, 50_000, 200_000])
    filler = rng.choice(["# " + "x" * size, "_ = " + " + ".join(["1"] * (size // 4)), "_ = '" + "y" * size + "'"])
    indent = re.match(r"[ \t]*", lines[index]).group(0)  # type: ignore[union-attr]
    lines.insert(index, indent + filler)
    return "\n".join(lines).encode()


def _deep_expression(rng: random.Random) -> str:
    depth = rng.choice([100, 199, 200, 600, 1_000, 2_900, 3_100, 10_000])
    shape = rng.choice(["sum", "attr", "call", "unary", "list", "ifexp", "subscript"])
    if shape == "sum":
        return " + ".join(["x"] * depth)
    if shape == "attr":
        return "x" + ".t" * depth
    if shape == "call":
        return "f(" * depth + "x" + ")" * depth
    if shape == "unary":
        return "-" * depth + "x"
    if shape == "list":
        return "[" * depth + "x" + "]" * depth
    if shape == "ifexp":
        return "x if y else " * depth + "z"
    return "x" + "[0]" * depth


def deep_nesting(text: str, rng: random.Random) -> bytes:
    """A deep expression after a ``return`` or an assignment, or deeply nested blocks."""
    lines = _lines(text)
    if rng.random() < 0.8:
        targets = [i for i, line in enumerate(lines) if line.strip().startswith(("return ", "ctx.", "a, b ="))]
        index = rng.choice(targets) if targets else rng.randrange(len(lines))
        indent = re.match(r"[ \t]*", lines[index]).group(0)  # type: ignore[union-attr]
        lines.insert(index, f"{indent}_deep = {_deep_expression(rng)}")
    else:
        depth = rng.choice([20, 99, 101])
        index = rng.randrange(len(lines))
        indent = re.match(r"[ \t]*", lines[index]).group(0)  # type: ignore[union-attr]
        block = [f"{indent}{'    ' * level}if x:" for level in range(depth)]
        block.append(f"{indent}{'    ' * depth}pass")
        lines[index:index] = block
    return "\n".join(lines).encode()


MUTATIONS = [
    truncate,
    delete_lines,
    duplicate_lines,
    mixed_endings,
    cr_only,
    crlf,
    bom,
    nul,
    invalid_utf8,
    tabs,
    odd_characters,
    long_line,
    deep_nesting,
]


def mutate(text: str, rng: random.Random) -> tuple[str, bytes]:
    """One or two mutations of ``text``: their names, and the bytes."""
    names = []
    data = text.encode()
    for _ in range(rng.choice([1, 1, 2])):
        mutation = rng.choice(MUTATIONS)
        names.append(mutation.__name__)
        try:
            current = data.decode()
        except UnicodeDecodeError:
            break
        data = mutation(current, rng)
    return "+".join(names), data


def embed(program: str, where: str) -> str:
    """A generated ``program`` at module level after a Function, or inside its ``forward``."""
    if where == "module":
        return FUNCTION + "\n" + program
    body = textwrap.indent(program, " " * 8) if program.strip() else "        pass\n"
    return FUNCTION.replace("        ctx.save_for_backward(a, b)\n", body.rstrip("\n") + "\n        ctx.save_for_backward(a, b)\n")


# ---------------------------------------------------------------- properties


class PropertyFailure(AssertionError):
    """A fuzzed input broke one of the properties; the message says which."""


def python_compiles(data: bytes) -> bool:
    """Whether CPython, as ``python file.py`` would, compiles ``data``."""
    data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")  # universal newlines, as python reads files
    try:
        compile(data, "<fuzz>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError, UnicodeDecodeError):
        return False
    return True


@dataclass
class FileOutcome:
    """What analysing one file alone gave: its findings as printed, or its one error line."""

    findings: list[str]
    error: str | None


def check_file(data: bytes, path: str = "fuzzed.py", fix: bool = True) -> FileOutcome:
    """Analyse (and fix) one file in this process; raise :class:`PropertyFailure` on a broken property."""
    compiles = python_compiles(data)

    def work() -> list[str]:
        source = SourceFile(path, decode_source(data, path), "fuzzed")
        # The run's needs, not every need: what a directory run parses of a file depends on them.
        diagnostics = check_analysis(analyze(source, {}, SETTINGS, module_needs(SETTINGS)), SETTINGS)
        if fix and diagnostics:
            _check_fix(source)
        return [f"{d.line}:{d.column + 1}: {d.code}" for d in diagnostics]

    try:
        findings = run_guarded(path, "fuzzing", work)
    except SourceError as error:
        line = str(error)
        too_deep_here = "recursion limit" in line and _deeper_than_analysed(data)  # 3.12 only
        if "\n" in line or "internal error" in line or ("recursion limit" in line and not too_deep_here):
            raise PropertyFailure(f"bad error line: {line!r}") from None
        if compiles and not too_deep_here:
            raise PropertyFailure(f"Python compiles this file but it was reported: {line}") from None
        return FileOutcome([], line)
    return FileOutcome(findings, None)


def _deeper_than_analysed(data: bytes) -> bool:
    """Whether ``data`` nests deeper than this interpreter analyses (:data:`ANALYSED_DEPTH`)."""
    if ANALYSED_DEPTH is None:
        return False
    try:
        tree = compile(data, "<fuzz>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError, UnicodeDecodeError):
        return False
    deepest = 0
    stack = [(tree, 0)]
    while stack:  # not recursive: the tree is as deep as the code
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest > ANALYSED_DEPTH


def _check_fix(source: SourceFile) -> None:
    fixed = fix_source(source, {}, SETTINGS, unsafe=True)
    for error in fixed.errors:
        if "internal error" in error.problem or "does not parse" in error.problem:
            raise PropertyFailure(f"fix failed: {error}")
    if not fixed.changed:
        return
    try:
        compile(fixed.text, source.path, "exec", dont_inherit=True)
    except SyntaxError as error:
        raise PropertyFailure(f"--fix output does not compile: {error}") from None
    again = fix_source(SourceFile(source.path, fixed.text, source.module), {}, SETTINGS, unsafe=True)
    if again.changed:
        raise PropertyFailure("--fix is not idempotent: a second fix changed the file")


def check_run(files: dict[str, bytes], directory: Path, timeout: float) -> None:
    """Write ``files`` and the sentinel Function into ``directory``, run ``autograd-lint check`` on it.

    Checks: no traceback, no hang, one error line per bad file, and every
    finding each file gives alone (the sentinel's included) is printed.
    """
    directory.mkdir(parents=True, exist_ok=True)
    expected: dict[str, FileOutcome] = {}
    for name, data in files.items():
        path = str(directory / name)
        (directory / name).write_bytes(data)
        expected[name] = check_file(data, path, fix=False)
        try:
            text = decode_source(data, path)
            # The run's gate: a file that can hold a Function or a custom op is analysed.
            gated = not (mentions_function(path, text) or mentions_custom_op(text))
        except SourceError:
            gated = False  # the run reads the file before the gate: it reports it
        if gated:  # a file found by walking a directory is only analysed past the gate
            expected[name] = FileOutcome([], None)
    (directory / "sentinel.py").write_text(FUNCTION)
    try:
        result = subprocess.run(
            # AGL110 and AGL116 conclude that a registration is absent from the whole run, so
            # they can't be compared with a file checked alone.
            [sys.executable, "-m", "autograd_lint", "check", "--select", "ALL", "--ignore", "AGL110,AGL116",
             "--jobs", "2", str(directory)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
    except subprocess.TimeoutExpired:
        raise PropertyFailure(f"check over {directory} ran longer than {timeout} s") from None
    if "Traceback" in result.stderr or result.returncode not in (1, 2):
        raise PropertyFailure(f"exit {result.returncode}, stderr: {result.stderr[-2000:]}")
    if str(directory / "sentinel.py") + SENTINEL_FINDING not in result.stdout:
        raise PropertyFailure("the sentinel's finding was not printed")
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    reported = [line[len("error: ") :].split(":", 1)[0] for line in error_lines]
    bad = sorted(str(directory / n) for n, outcome in expected.items() if outcome.error is not None)
    if sorted(reported) != bad:
        raise PropertyFailure(f"error lines {sorted(reported)} but bad files {bad}")
    for name, outcome in expected.items():
        prefix = f"{directory / name}:"
        printed = [line[len(prefix) :] for line in result.stdout.splitlines() if line.startswith(prefix)]
        printed = [":".join(line.split(":")[:2]) + ": " + line.split()[1] for line in printed]
        if sorted(printed) != sorted(outcome.findings):
            raise PropertyFailure(f"{name}: run printed {printed}, the file alone gives {outcome.findings}")
