"""Issue 22's attack round: hostile input against every face, as a hostile user would try it.

Each case builds a small tree in a fresh directory, runs the real command in a
subprocess (with a time limit: a hang is a failure), and checks what the docs
promise: no traceback, the documented exit code, one line naming the file and the
reason, every other file still checked, no user file changed unless that is the
command's job.  Prints one row per case and the number of failures; the table is
in docs/robustness.md.

    python bench/attack_round.py            # every case
    python bench/attack_round.py -k fifo    # the cases whose name holds "fifo"

Runs as root on the project's machines; the cases that need an unprivileged user
run their command as ``nobody`` through ``setpriv``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

MUL = """import torch


class Mul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return a * b

    @staticmethod
    def backward(ctx, grad):
        return grad
"""
SCALE = MUL.replace("return grad\n", "return [grad * 2, grad]\n")
FINDING = "AGL001 Mul.backward returns 1 gradient"
TIMEOUT = 120


@dataclass
class Result:
    code: int | None  # None: killed at the time limit
    stdout: str
    stderr: str
    seconds: float


def run(args: list[str], cwd: Path, stdin: bytes | None = None, user: bool = False, env: dict[str, str] | None = None,
        timeout: float = TIMEOUT, command: list[str] | None = None) -> Result:
    argv = command or [sys.executable, "-m", "autograd_lint", *args]
    if user:
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
    start = time.monotonic()
    try:
        done = subprocess.run(argv, cwd=cwd, input=stdin, capture_output=True, timeout=timeout,
                              env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired as expired:
        return Result(None, (expired.stdout or b"").decode(errors="replace"), (expired.stderr or b"").decode(errors="replace"),
                      time.monotonic() - start)
    return Result(done.returncode, done.stdout.decode("utf-8", "backslashreplace"),
                  done.stderr.decode("utf-8", "backslashreplace"), time.monotonic() - start)


def digest(root: Path) -> dict[str, str]:
    """The bytes of every regular file under ``root`` (to see that nothing changed)."""
    found = {}
    for directory, _, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            if os.path.isfile(path) and not os.path.islink(path):
                try:
                    with open(path, "rb") as handle:
                        found[path] = hashlib.sha256(handle.read()).hexdigest()
                except OSError:
                    pass
    return found


def errors(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("error:") or ": " in line]


def expect(result: Result, code: int, error_lines: int | None = None, contains: str = "", finding: bool = False,
           stdout_contains: str = "") -> str | None:
    """Why ``result`` is not what the docs promise; None when it is."""
    if result.code is None:
        return f"hang: killed after {result.seconds:.0f} s"
    if "Traceback" in result.stderr or "Traceback" in result.stdout:
        return "traceback: " + result.stderr.strip().splitlines()[-1][:150]
    if result.code != code:
        return f"exit {result.code}, expected {code}: {result.stderr.strip()[:200]}"
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    if error_lines is not None and len(lines) != error_lines:
        return f"{len(lines)} error lines, expected {error_lines}: {result.stderr.strip()[:300]}"
    if contains and contains not in result.stderr:
        return f"stderr lacks {contains!r}: {result.stderr.strip()[:300]}"
    if finding and FINDING not in result.stdout:
        return f"the other file's finding is missing: {result.stdout[:200]}"
    if stdout_contains and stdout_contains not in result.stdout:
        return f"stdout lacks {stdout_contains!r}: {result.stdout[:200]}"
    return None


# A case: (face, name, what is tried, body(root) -> why it failed or None).
Case = tuple[str, str, str, Callable[[Path], "str | None"]]
CASES: list[Case] = []


def case(face: str, name: str, what: str) -> Callable[[Callable[[Path], str | None]], Callable[[Path], str | None]]:
    def register(body: Callable[[Path], str | None]) -> Callable[[Path], str | None]:
        CASES.append((face, name, what, body))
        return body

    return register


def tree(root: Path, files: dict[str, str | bytes] | None = None) -> None:
    """``ops.py`` (one finding) and ``files`` (relative path -> content) under ``root``."""
    (root / "ops.py").write_text(MUL)
    for name, content in (files or {}).items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def unchanged(root: Path, before: dict[str, str]) -> str | None:
    after = digest(root)
    changed = [p for p in before if before[p] != after.get(p)]
    return f"changed: {changed}" if changed else None


# ---- file-system oddities ------------------------------------------------------------------------


@case("files", "fifo-in-tree", "a FIFO named x.py in the checked tree")
def _(root: Path) -> str | None:
    tree(root)
    os.mkfifo(root / "x.py")
    return expect(run(["check", "."], root), 2, 1, "not a regular file (a FIFO)", finding=True)


@case("files", "fifo-named", "a FIFO named on the command line")
def _(root: Path) -> str | None:
    tree(root)
    os.mkfifo(root / "x.py")
    return expect(run(["check", "x.py", "ops.py"], root), 2, 1, "x.py: not a regular file (a FIFO)", finding=True)


@case("files", "socket-in-tree", "a Unix socket named s.py in the tree")
def _(root: Path) -> str | None:
    tree(root)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(root / "s.py"))
    try:
        return expect(run(["check", "."], root), 2, 1, "s.py", finding=True)
    finally:
        server.close()


@case("files", "device-symlink", "x.py a symlink to /dev/zero (endless) and to /dev/null")
def _(root: Path) -> str | None:
    tree(root)
    os.symlink("/dev/zero", root / "x.py")
    os.symlink("/dev/null", root / "y.py")
    return expect(run(["check", "."], root), 2, 2, "not a regular file (a character device)", finding=True)


@case("files", "dangling-symlink", "a symlink to nothing named x.py in the tree")
def _(root: Path) -> str | None:
    tree(root)
    os.symlink("missing.py", root / "x.py")
    return expect(run(["check", "."], root), 2, 1, "x.py: no such file or directory", finding=True)


@case("files", "symlink-loop", "a directory symlink pointing at its parent, and a file symlink loop")
def _(root: Path) -> str | None:
    tree(root)
    os.symlink(".", root / "loop")
    os.symlink("a.py", root / "b.py")
    os.symlink("b.py", root / "a.py")
    return expect(run(["check", "."], root), 2, 2, "Too many levels of symbolic links", finding=True)


@case("files", "unlistable-dir", "a directory mode 000, checked as another user")
def _(root: Path) -> str | None:
    tree(root, {"sub/more.py": MUL})
    os.chmod(root, 0o777)
    os.chmod(root / "sub", 0o000)
    try:
        return expect(run(["check", "."], root, user=True), 2, 1, "directory cannot be listed", finding=True)
    finally:
        os.chmod(root / "sub", 0o755)


@case("files", "unreadable-file", "a file mode 000, checked as another user")
def _(root: Path) -> str | None:
    tree(root, {"x.py": MUL})
    os.chmod(root, 0o777)
    os.chmod(root / "x.py", 0o000)
    return expect(run(["check", "."], root, user=True), 2, 1, "x.py: cannot be read: Permission denied", finding=True)


@case("files", "path-max", "a directory chain longer than PATH_MAX")
def _(root: Path) -> str | None:
    tree(root)
    fd = os.open(root, os.O_RDONLY)
    for _ in range(25):
        os.mkdir("d" * 250, dir_fd=fd)
        inner = os.open("d" * 250, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    return expect(run(["check", "."], root), 2, 1, "File name too long", finding=True)


@case("files", "twice-named", "one file named three ways: ops.py ./ops.py and its directory")
def _(root: Path) -> str | None:
    tree(root)
    result = run(["check", "ops.py", "./ops.py", str(root)], root)
    problem = expect(result, 1, 0, finding=True)
    return problem or (None if result.stdout.count(FINDING) == 1 else f"reported {result.stdout.count(FINDING)} times")


@case("files", "newline-name", "a file whose name holds a newline and a tab")
def _(root: Path) -> str | None:
    tree(root)
    (root / "a\nb\t.py").write_text(MUL)
    result = run(["check", "."], root)
    return expect(result, 1, 0, stdout_contains=FINDING)


@case("files", "dash-name", "a file named -x.py after --")
def _(root: Path) -> str | None:
    tree(root)
    (root / "-x.py").write_text(MUL)
    return expect(run(["check", "--", "-x.py"], root), 1, 0, stdout_contains="-x.py:")


@case("files", "directory-py", "a directory named pkg.py holding a Function")
def _(root: Path) -> str | None:
    tree(root, {"pkg.py/inner.py": MUL})
    return expect(run(["check", "pkg.py"], root), 1, 0, stdout_contains=FINDING)


@case("files", "empty-and-huge-name", "an empty file, and a file with a 250-character name")
def _(root: Path) -> str | None:
    tree(root, {"empty.py": ""})
    (root / ("n" * 247 + ".py")).write_text(MUL)
    return expect(run(["check", "."], root), 1, 0, finding=True)


@case("files", "file-over-limit", "a 40 MiB .py file (over the reader's 32 MiB)")
def _(root: Path) -> str | None:
    tree(root)
    with open(root / "big.py", "wb") as handle:
        handle.write(b"# Function autograd\n" + b"x = 1\n" * (7 << 20))
    return expect(run(["check", "."], root), 2, 1, "big.py: too large (", finding=True)


@case("files", "list-literal-1m", "forward holding a 1,000,000-element list literal (4.5 GB for libcst)")
def _(root: Path) -> str | None:
    tree(root)
    (root / "big.py").write_text(MUL.replace("return a * b\n", "x = [" + "0," * 1_000_000 + "]\n        return a * b\n"))
    return expect(run(["check", "."], root), 2, 1, "big.py: too large to analyse", finding=True)


# ---- writes --------------------------------------------------------------------------------------


@case("writes", "baseline-onto-source", "--write-baseline ops.py ops.py")
def _(root: Path) -> str | None:
    tree(root)
    before = digest(root)
    return expect(run(["check", "--write-baseline", "ops.py", "ops.py"], root), 2, 1, "not replaced") or unchanged(root, before)


@case("writes", "baseline-onto-pyproject", "--write-baseline pyproject.toml (not JSON)")
def _(root: Path) -> str | None:
    tree(root, {"pyproject.toml": "[project]\nname = 'x'\n"})
    before = digest(root)
    return expect(run(["check", "--write-baseline", "pyproject.toml", "ops.py"], root), 2, 1, "not replaced") or unchanged(root, before)


@case("writes", "baseline-onto-fifo", "--write-baseline naming a FIFO")
def _(root: Path) -> str | None:
    tree(root)
    os.mkfifo(root / "base.json")
    return expect(run(["check", "--write-baseline", "base.json", "ops.py"], root), 2, 1, "base.json")


@case("writes", "baseline-onto-directory", "--write-baseline naming a directory")
def _(root: Path) -> str | None:
    tree(root)
    (root / "base.json").mkdir()
    return expect(run(["check", "--write-baseline", "base.json", "ops.py"], root), 2, 1, "base.json")


@case("writes", "fix-read-only", "--fix on a 0444 file")
def _(root: Path) -> str | None:
    tree(root, {"s.py": SCALE})
    os.chmod(root / "s.py", 0o444)
    before = digest(root)
    return expect(run(["check", "--fix", "s.py"], root), 2, 1, "read-only") or unchanged(root, before)


@case("writes", "fix-hard-link", "--fix on a file with a second hard link")
def _(root: Path) -> str | None:
    (root / "s.py").write_text(SCALE)
    os.link(root / "s.py", root / "t.py")
    before = digest(root)
    return expect(run(["check", "--fix", "s.py"], root), 2, 1, "hard links") or unchanged(root, before)


@case("writes", "fix-other-owner", "--fix as another user on a world-writable file of root's")
def _(root: Path) -> str | None:
    (root / "s.py").write_text(SCALE)
    os.chmod(root, 0o777)
    os.chmod(root / "s.py", 0o666)
    before = digest(root)
    problem = expect(run(["check", "--fix", "s.py"], root, user=True), 2, 1, "belongs to another user")
    return problem or unchanged(root, before) or (None if (root / "s.py").stat().st_uid == 0 else "owner changed")


@case("writes", "fix-read-only-dir", "--fix as another user in a directory it can't write")
def _(root: Path) -> str | None:
    (root / "s.py").write_text(SCALE)
    os.chmod(root / "s.py", 0o666)
    os.chmod(root, 0o755)
    before = digest(root)
    return expect(run(["check", "--fix", "s.py"], root, user=True), 2, 1, "s.py") or unchanged(root, before)


@case("writes", "fix-symlink-to-read-only", "--fix through a symlink to a 0444 file")
def _(root: Path) -> str | None:
    (root / "real.py").write_text(SCALE)
    os.chmod(root / "real.py", 0o444)
    os.symlink("real.py", root / "s.py")
    before = digest(root)
    return expect(run(["check", "--fix", "s.py"], root), 2, 1, "read-only") or unchanged(root, before)


@case("writes", "add-noqa-read-only", "--add-noqa on a 0444 file")
def _(root: Path) -> str | None:
    tree(root)
    os.chmod(root / "ops.py", 0o444)
    before = digest(root)
    return expect(run(["check", "--add-noqa", "ops.py"], root), 2, 1, "read-only") or unchanged(root, before)


@case("writes", "gen-tests-collision", "gen-tests on a/b.py and a_b.py (one output name)")
def _(root: Path) -> str | None:
    tree(root, {"a/b.py": MUL, "a/__init__.py": ""})
    (root / "a_b.py").write_text(MUL)
    result = run(["gen-tests", "a", "a_b.py", "--out", "gen"], root)
    if result.code != 2 or "two outputs, one path" not in result.stderr or result.stdout.count("wrote ") != 1:
        return f"exit {result.code}: {result.stderr[:300]} {result.stdout[:200]}"
    return None


@case("writes", "gen-tests-out-file", "gen-tests --out naming a regular file")
def _(root: Path) -> str | None:
    tree(root, {"gen": "mine\n"})
    before = digest(root)
    return expect(run(["gen-tests", "ops.py", "--out", "gen"], root), 2, 1, "not a directory") or unchanged(root, before)


@case("writes", "gen-tests-edited", "gen-tests over a generated file the user edited")
def _(root: Path) -> str | None:
    tree(root)
    first = run(["gen-tests", "ops.py", "--out", "gen"], root)
    if first.code != 0:
        return f"first run: exit {first.code} {first.stderr[:200]}"
    path = root / "gen" / "test_gradcheck_ops.py"
    path.write_text(path.read_text() + "# mine\n")
    before = digest(root)
    result = run(["gen-tests", "ops.py", "--out", "gen"], root)
    return expect(result, 2, None, "edited since it was generated") or unchanged(root, before)


@case("writes", "recording-onto-source", "pytest --autograd-record=ops.py (recording onto a source file)")
def _(root: Path) -> str | None:
    tree(root, {"test_ops.py": "def test_nothing():\n    pass\n"})
    before = digest(root)
    result = run([], root, command=[sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                    "--autograd-record=ops.py", "test_ops.py"])
    if "Traceback" in result.stdout + result.stderr:
        return "traceback"
    return unchanged(root, before)


# ---- stdin ---------------------------------------------------------------------------------------


@case("stdin", "stdin-fix-cookie", "check - --fix on a latin-1 buffer with a cookie")
def _(root: Path) -> str | None:
    source = b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + SCALE.encode()
    result = subprocess.run([sys.executable, "-m", "autograd_lint", "check", "-", "--stdin-filename", "s.py", "--fix",
                             "--unsafe-fixes"], cwd=root, input=source, capture_output=True, timeout=TIMEOUT)
    ok = result.stdout.startswith(b"# -*- coding: latin-1 -*-\n# caf\xe9\n") and result.returncode in (0, 1)
    return None if ok and b"Traceback" not in result.stderr else f"{result.returncode} {result.stdout[:80]!r}"


@case("stdin", "stdin-fix-cr", "check - --fix on a CR-only buffer with a BOM")
def _(root: Path) -> str | None:
    source = b"\xef\xbb\xbf" + SCALE.replace("\n", "\r").encode()
    result = subprocess.run([sys.executable, "-m", "autograd_lint", "check", "-", "--fix", "--unsafe-fixes"], cwd=root,
                            input=source, capture_output=True, timeout=TIMEOUT)
    ok = result.stdout.startswith(b"\xef\xbb\xbf") and b"\n" not in result.stdout
    return None if ok and b"Traceback" not in result.stderr else f"{result.returncode} {result.stdout[:80]!r}"


@case("stdin", "stdin-deep", "a 2,900-term sum in backward on stdin")
def _(root: Path) -> str | None:
    source = MUL.replace("return grad\n", "return " + " + ".join(["grad"] * 2900) + "\n")
    return expect(run(["check", "-"], root, stdin=source.encode()), 1, 0, stdout_contains=FINDING)


@case("stdin", "stdin-nul-utf16", "stdin holding NUL bytes (a UTF-16 file)")
def _(root: Path) -> str | None:
    return expect(run(["check", "-"], root, stdin=MUL.encode("utf-16")), 2, 1, "NUL byte")


@case("stdin", "stdin-empty", "empty stdin, and stdin closed")
def _(root: Path) -> str | None:
    problem = expect(run(["check", "-"], root, stdin=b""), 0, 0)
    if problem:
        return problem
    closed = subprocess.run([sys.executable, "-m", "autograd_lint", "check", "-"], cwd=root, stdin=subprocess.DEVNULL,
                            capture_output=True, timeout=TIMEOUT)
    return None if closed.returncode == 0 and b"Traceback" not in closed.stderr else f"closed: {closed.returncode}"


@case("stdin", "stdin-huge-nodes", "stdin holding a 1,000,000-element list in forward")
def _(root: Path) -> str | None:
    source = MUL.replace("return a * b\n", "x = [" + "0," * 1_000_000 + "]\n        return a * b\n")
    return expect(run(["check", "-"], root, stdin=source.encode()), 2, 1, "too large to analyse")


# ---- encodings -----------------------------------------------------------------------------------


@case("encodings", "unknown-cookie", "a cookie naming an encoding that does not exist")
def _(root: Path) -> str | None:
    tree(root, {"x.py": "# -*- coding: klingon -*-\n" + MUL})
    return expect(run(["check", "."], root), 2, 1, "x.py", finding=True)


@case("encodings", "bom-and-latin1-cookie", "a UTF-8 BOM with a latin-1 cookie")
def _(root: Path) -> str | None:
    (root / "ops.py").write_text(MUL)
    (root / "x.py").write_bytes(b"\xef\xbb\xbf# -*- coding: latin-1 -*-\n" + MUL.encode())
    return expect(run(["check", "."], root), 2, 1, "x.py", finding=True)


@case("encodings", "ascii-terminal", "PYTHONIOENCODING=ascii with non-ASCII names and messages")
def _(root: Path) -> str | None:
    (root / "ops.py").write_text(MUL.replace("Mul", "Mül"))
    return expect(run(["check", "."], root, env={"PYTHONIOENCODING": "ascii"}), 1, 0, stdout_contains="M\\xfcl")


@case("encodings", "non-utf8-name-all-formats", "a file name that is not UTF-8, in every output format")
def _(root: Path) -> str | None:
    (root / os.fsdecode(b"caf\xe9.py")).write_text(MUL)
    for form in ("text", "json", "sarif", "github"):
        problem = expect(run(["check", "--output-format", form, "."], root), 1, 0)
        if problem:
            return f"{form}: {problem}"
        if form in ("json", "sarif"):
            json.loads(run(["check", "--output-format", form, "."], root).stdout)
    return None


@case("encodings", "latin1-pyproject", "pyproject.toml in latin-1, for check and for flake8")
def _(root: Path) -> str | None:
    tree(root, {"pyproject.toml": b'[tool.autograd-lint]\nselect = ["AGL"]\n# caf\xe9\n'})
    problem = expect(run(["check", "ops.py"], root), 2, 1, "not UTF-8")
    flake8 = run([], root, command=[sys.executable, "-m", "flake8", "--select", "AGL", "ops.py"])
    said = flake8.stdout + flake8.stderr  # flake8 prints its critical errors on stdout
    return problem or (None if "Traceback" not in said and "not UTF-8" in said else said[:200])


# ---- configuration and CLI abuse -----------------------------------------------------------------


@case("cli", "select-typo", "--select AGL999, --ignore AGL9, ignore = [\"AGL099\"] in pyproject")
def _(root: Path) -> str | None:
    tree(root)
    for args in (["--select", "AGL999"], ["--ignore", "AGL9"]):
        problem = expect(run(["check", *args, "ops.py"], root), 2, 1, "selects no rule")
        if problem:
            return problem
    (root / "pyproject.toml").write_text('[tool.autograd-lint]\nignore = ["AGL099"]\n')
    return expect(run(["check", "ops.py"], root), 2, 1, "selects no rule")


@case("cli", "select-all", "--select ALL stays valid")
def _(root: Path) -> str | None:
    tree(root)
    return expect(run(["check", "--select", "ALL", "ops.py"], root), 1, 0, finding=True)


@case("cli", "pyproject-fifo", "pyproject.toml a FIFO; --config naming a FIFO")
def _(root: Path) -> str | None:
    tree(root)
    os.mkfifo(root / "pyproject.toml")
    problem = expect(run(["check", "ops.py"], root), 1, 0, finding=True)
    return problem or expect(run(["check", "--config", "pyproject.toml", "ops.py"], root), 2, 1, "not a regular file")


@case("cli", "pyproject-deep", "pyproject.toml with arrays nested 100,000 deep")
def _(root: Path) -> str | None:
    tree(root, {"pyproject.toml": "[tool.autograd-lint]\nselect = " + "[" * 100_000 + "]" * 100_000 + "\n"})
    return expect(run(["check", "ops.py"], root), 2, 1, "pyproject.toml")


@case("cli", "jobs-odd", "--jobs 0, --jobs -3 and --jobs 500")
def _(root: Path) -> str | None:
    tree(root)
    for jobs in ("0", "-3", "500"):
        result = run(["check", "--jobs", jobs, "."], root)
        if result.code is None or "Traceback" in result.stderr or result.code not in (1, 2):
            return f"--jobs {jobs}: exit {result.code} {result.stderr[-200:]}"
    return None


@case("cli", "empty-path", "an empty string as the path")
def _(root: Path) -> str | None:
    tree(root)
    return expect(run(["check", "", "ops.py"], root), 2, 1, "no such file", finding=True)


@case("cli", "add-noqa-string", "--add-noqa on a line whose string holds \"# noqa: E1\"")
def _(root: Path) -> str | None:
    (root / "ops.py").write_text(MUL.replace("return grad\n", 'return grad if "# noqa: E1" else grad\n'))
    run(["check", "--add-noqa", "ops.py"], root)
    return expect(run(["check", "ops.py"], root), 0, 0)


# ---- side files ----------------------------------------------------------------------------------


@case("side files", "baseline-wrong-types", "a baseline whose entries are numbers; one that is UTF-16")
def _(root: Path) -> str | None:
    tree(root)
    (root / "b.json").write_text(json.dumps({"format": "autograd-lint-baseline", "version": 1, "entries": [1, 2]}))
    (root / "c.json").write_bytes(json.dumps({"entries": []}).encode("utf-16"))
    return (expect(run(["check", "--baseline", "b.json", "ops.py"], root), 2, 1, "b.json")
            or expect(run(["check", "--baseline", "c.json", "ops.py"], root), 2, 1, "c.json"))


@case("side files", "baseline-deep-fifo-dev", "a baseline nested 100,000 deep; a FIFO; /dev/zero")
def _(root: Path) -> str | None:
    tree(root)
    (root / "b.json").write_text("[" * 100_000 + "]" * 100_000)
    os.mkfifo(root / "f.json")
    for name in ("b.json", "f.json", "/dev/zero"):
        problem = expect(run(["check", "--baseline", name, "ops.py"], root), 2, 1, name)
        if problem:
            return f"{name}: {problem}"
    return None


@case("side files", "recording-nan", "a recording holding JSON NaN; one holding \"cases\": \"oops\"")
def _(root: Path) -> str | None:
    tree(root)
    tensor = {"shape": [1], "dtype": "float64", "device": "cpu", "requires_grad": True, "values": [1.0]}
    entry = {"module": "ops", "qualname": "Mul", "path": "ops.py",
             "cases": [{"calls": 1, "args": [{"tensor": tensor}, {"tensor": tensor}]}]}
    (root / "r.json").write_text(json.dumps({"format": 2, "functions": {"ops.Mul": entry}}).replace("1.0", "NaN"))
    nan = run(["gen-tests", "ops.py", "--inputs", "r.json", "--out", "gen"], root)
    if nan.code != 2 or "NaN is not JSON" not in nan.stderr or "nan" in (root / "gen" / "test_gradcheck_ops.py").read_text():
        return f"NaN: {nan.code} {nan.stderr[:200]}"
    entry["cases"] = "oops"
    (root / "r.json").write_text(json.dumps({"format": 2, "functions": {"ops.Mul": entry}}))
    oops = run(["gen-tests", "ops.py", "--inputs", "r.json", "--out", "gen2"], root)
    ok = oops.code == 2 and "r.json: the recorded cases of ops.Mul are malformed" in oops.stderr and "1 search" in oops.stdout
    return None if ok else f"oops: {oops.code} {oops.stderr[:200]}"


@case("side files", "recording-fifo-list", "--inputs naming a FIFO; a recording that is a JSON list")
def _(root: Path) -> str | None:
    tree(root)
    os.mkfifo(root / "r.json")
    (root / "l.json").write_text("[]")
    return (expect(run(["gen-tests", "ops.py", "--inputs", "r.json", "--out", "gen"], root), 2, None, "r.json")
            or expect(run(["gen-tests", "ops.py", "--inputs", "l.json", "--out", "gen"], root), 2, None, "l.json"))


@case("side files", "report-bad-shapes", "pragma --only-unexercised: a list, functions: \"x\", entries of numbers, deep")
def _(root: Path) -> str | None:
    tree(root)
    for number, content in enumerate(['[]', '{"version": 2, "functions": "x"}', '{"version": 2, "functions": [1]}',
                                      "[" * 50_000 + "]" * 50_000]):
        (root / f"r{number}.json").write_text(content)
        problem = expect(run(["pragma", "--only-unexercised", f"r{number}.json", "ops.py"], root), 2, 1, f"r{number}.json")
        if problem:
            return f"r{number}: {problem}"
    return None


# ---- signals -------------------------------------------------------------------------------------


def interrupted(root: Path, args: list[str], sig: int) -> Result:
    process = subprocess.Popen([sys.executable, "-m", "autograd_lint", *args], cwd=root, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    time.sleep(6)  # past the imports (about 2 s on a loaded machine): in the middle of the work
    os.killpg(process.pid, sig)
    out, err = process.communicate(timeout=TIMEOUT)
    return Result(process.returncode, out.decode(errors="replace"), err.decode(errors="replace"), 0)


def many(root: Path, count: int = 300) -> None:
    for number in range(count):
        (root / f"m{number}.py").write_text(MUL.replace("Mul", f"Mul{number}") + "\n" * 2)


@case("signals", "sigint-check", "Ctrl-C (SIGINT to the process group) during a parallel check of 300 files")
def _(root: Path) -> str | None:
    many(root)
    result = interrupted(root, ["check", "--jobs", "2", "."], signal.SIGINT)
    if "Traceback" in result.stderr:
        return "traceback: " + result.stderr[-200:]
    return None if result.code in (130, 1) else f"exit {result.code}"


@case("signals", "sigterm-fix", "SIGTERM during --fix of 300 files: every file old or new")
def _(root: Path) -> str | None:
    many(root)
    for path in root.glob("m*.py"):
        path.write_text(path.read_text().replace("return grad\n", "return [grad, grad]\n"))
    old = {p: p.read_text() for p in root.glob("m*.py")}
    interrupted(root, ["check", "--fix", "--jobs", "2", "."], signal.SIGTERM)
    bad = [p.name for p, text in old.items() if p.read_text() not in (text, text.replace("return [grad, grad]", "return (grad, grad)"))]
    leftovers = [p.name for p in root.iterdir() if p.name.endswith(".tmp")]
    return f"torn: {bad[:3]} leftovers: {leftovers[:3]}" if bad or leftovers else None


@case("signals", "sigpipe", "check | head -1 (the reader closes the pipe)")
def _(root: Path) -> str | None:
    many(root, 60)
    done = subprocess.run(f"{sys.executable} -m autograd_lint check . | head -1", shell=True, cwd=root,
                          capture_output=True, timeout=TIMEOUT)
    return "traceback: " + done.stderr.decode()[-200:] if b"Traceback" in done.stderr or b"Exception" in done.stderr else None


@case("signals", "stdout-closed", "check with stdout closed (>&-)")
def _(root: Path) -> str | None:
    tree(root)
    done = subprocess.run(f"{sys.executable} -m autograd_lint check . >&-", shell=True, cwd=root, capture_output=True,
                          timeout=TIMEOUT)
    return "traceback: " + done.stderr.decode()[-200:] if b"Traceback" in done.stderr else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="run only the cases whose name holds this")
    args = parser.parse_args()
    failures = 0
    chosen = [c for c in CASES if args.k in c[1]]
    print(f"| # | face | case | tried | result | s |\n| ---: | --- | --- | --- | --- | ---: |")
    for number, (face, name, what, body) in enumerate(chosen, 1):
        root = Path(tempfile.mkdtemp(prefix=f"attack-{name}-", dir="/tmp"))
        start = time.monotonic()
        try:
            problem = body(root)
        except Exception as error:  # a bug of the case itself counts as a failure too
            problem = f"case error: {type(error).__name__}: {error}"
        finally:
            for directory, dirs, _ in os.walk(root):
                for sub in dirs:
                    path = os.path.join(directory, sub)
                    try:
                        if not os.path.islink(path):
                            os.chmod(path, 0o755)
                    except OSError:  # a path over PATH_MAX: rmtree works by descriptors
                        pass
            shutil.rmtree(root, ignore_errors=True)
        failures += problem is not None
        outcome = "ok" if problem is None else f"**FAIL**: {problem}"
        print(f"| {number} | {face} | {name} | {what} | {outcome} | {time.monotonic() - start:.1f} |", flush=True)
    print(f"\n{len(chosen)} cases, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
