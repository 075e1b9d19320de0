"""``check --write-baseline`` / ``--baseline`` on a tree of files, run as users run it."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

from autograd_lint import __version__
from autograd_lint.lint.baseline import FORMAT, VERSION, Fingerprint, fingerprint, read_baseline, write_baseline
from autograd_lint.rules.base import Diagnostic, Severity
from cli_process import run_cli

FILES = 60
FUNCTIONS = textwrap.dedent(
    """
    import torch


    class Mul{n}(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            return grad * b


    class Scale{n}(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return [grad * 2]
    """
).lstrip()


# A Function added later, with a bug of its own (AGL016).
NEW_FUNCTION = (
    "\n\nclass Extra(torch.autograd.Function):\n"
    "    @staticmethod\n    def forward(ctx, x):\n        return x * 3\n\n"
    "    @staticmethod\n    def backward(ctx, grad):\n        return [grad * 3]\n"
)


def check(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(["check", *args], cwd=cwd, input=stdin, timeout=300)


def make_tree(root: Path, files: int = FILES) -> list[Path]:
    paths = []
    for n in range(files):
        package = root / "src" / f"pkg{n % 6}"
        package.mkdir(parents=True, exist_ok=True)
        path = package / f"ops{n}.py"
        path.write_text(FUNCTIONS.format(n=n))
        paths.append(path)
    return paths


def test_baseline_survives_shifted_lines_and_reports_new_bugs(tmp_path: Path) -> None:
    paths = make_tree(tmp_path)
    before = check("src", cwd=tmp_path)
    assert before.returncode == 1 and f"Found {2 * FILES} problems in {FILES} files" in before.stdout

    written = check("src", "--write-baseline", "autograd-lint-baseline.json", cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    assert written.stdout == "" and f"Wrote {2 * FILES} findings" in written.stderr
    document = json.loads((tmp_path / "autograd-lint-baseline.json").read_text())
    assert document["format"] == "autograd-lint-baseline" and document["version"] == 1
    assert {"path": "src/pkg0/ops0.py", "code": "AGL001", "scope": "Mul0.backward", "snippet": "return grad * b",
            "count": 1} in document["entries"]

    # An unrelated edit that moves every line of every file, and reindents nothing.
    for path in paths:
        path.write_text('"""Kernels."""\n\nfrom __future__ import annotations\n\n' + path.read_text())
    quiet = check("src", "--baseline", "autograd-lint-baseline.json", cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert "All checks passed" in quiet.stdout and quiet.stderr == ""

    # A new bug, and a second copy of a baselined one in the same scope, are reported.
    paths[7].write_text(paths[7].read_text() + NEW_FUNCTION)
    paths[9].write_text(paths[9].read_text().replace("return [grad * 2]", "if grad is None:\n            return [grad * 2]\n        return [grad * 2]"))
    loud = check("src", "--baseline", "autograd-lint-baseline.json", cwd=tmp_path)
    assert loud.returncode == 1
    reported = [line.split(": ")[0].rsplit(":", 2)[0] + " " + line.split()[1] for line in loud.stdout.splitlines()[:-1]]
    assert reported == [f"{Path('src/pkg1/ops7.py')} AGL016", f"{Path('src/pkg3/ops9.py')} AGL016"], loud.stdout
    assert "Extra.backward returns a list" in loud.stdout


def test_stale_entries_are_named_and_do_not_fail(tmp_path: Path) -> None:
    paths = make_tree(tmp_path, files=3)
    assert check("src", "--write-baseline", "baseline.json", cwd=tmp_path).returncode == 0
    paths[0].write_text(paths[0].read_text().replace("return grad * b\n", "return grad * b, grad * a\n"))
    paths[1].unlink()
    result = check("src", "--baseline", "baseline.json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    stale = [line for line in result.stderr.splitlines() if "stale entry" in line]
    assert stale == [
        "warning: baseline.json: stale entry (no such finding any more): src/pkg0/ops0.py: AGL001 in Mul0.backward: "
        "return grad * b",
        "warning: baseline.json: stale entry (no such finding any more): src/pkg1/ops1.py: AGL001 in Mul1.backward: "
        "return grad * b",
        "warning: baseline.json: stale entry (no such finding any more): src/pkg1/ops1.py: AGL016 in Scale1.backward: "
        "return [grad * 2]",
    ]
    # Checking one file leaves the entries of other files that exist alone.
    one = check("src/pkg2/ops2.py", "--baseline", "baseline.json", cwd=tmp_path)
    assert one.returncode == 0 and "ops0.py" not in one.stderr and "ops1.py" in one.stderr


def test_baseline_is_found_relative_to_its_own_directory(tmp_path: Path) -> None:
    make_tree(tmp_path, files=8)
    assert check("src", "--write-baseline", "baseline.json", cwd=tmp_path).returncode == 0
    inside = check(".", "--baseline", "../../baseline.json", cwd=tmp_path / "src" / "pkg0")
    assert inside.returncode == 0, inside.stdout + inside.stderr


def test_bad_baseline_is_one_line_and_exit_2(tmp_path: Path) -> None:
    make_tree(tmp_path, files=2)
    cases = {
        "missing.json": None,
        "garbage.json": "{not json",
        "other.json": '{"entries": []}',
        "future.json": '{"format": "autograd-lint-baseline", "version": 99, "entries": []}',
        "entry.json": '{"format": "autograd-lint-baseline", "version": 1, "entries": [{"path": 1}]}',
    }
    problems = {
        "missing.json": "cannot be read",
        "garbage.json": "not a baseline file (invalid JSON",
        "other.json": "not a baseline file",
        "future.json": "baseline version 99 is not supported",
        "entry.json": "entry 0",
    }
    for name, text in cases.items():
        if text is not None:
            (tmp_path / name).write_text(text)
        result = check("src", "--baseline", name, cwd=tmp_path)
        assert result.returncode == 2, (name, result.stderr)
        assert result.stdout == ""
        assert result.stderr.splitlines() == [result.stderr.strip()], result.stderr
        assert result.stderr.startswith(f"error: {name}: {problems[name]}"), result.stderr


def test_baseline_on_stdin_uses_the_stdin_filename(tmp_path: Path) -> None:
    paths = make_tree(tmp_path, files=4)
    assert check("src", "--write-baseline", "baseline.json", cwd=tmp_path).returncode == 0
    buffer = "# edited\n" + paths[3].read_text()
    same = check("-", "--stdin-filename", "src/pkg3/ops3.py", "--baseline", "baseline.json", cwd=tmp_path, stdin=buffer)
    assert same.returncode == 0, same.stdout + same.stderr
    other = check("-", "--stdin-filename", "src/pkg3/new.py", "--baseline", "baseline.json", cwd=tmp_path, stdin=buffer)
    assert other.returncode == 1 and other.stdout.count("src/pkg3/new.py:") == 2


def test_a_finding_on_line_1_is_fingerprinted_by_its_text(tmp_path: Path) -> None:
    found = Diagnostic(str(tmp_path / "ops.py"), 1, 0, "AGL110", "no register_fake", Severity.ERROR)
    assert fingerprint(found, ["mul = custom_op('demo::mul', _mul)\n"], tmp_path).snippet != ""


def test_an_entry_without_a_count_stands_for_one_finding(tmp_path: Path) -> None:
    entry = {"path": "ops.py", "code": "AGL001", "scope": "Mul.backward", "snippet": "return grad * b"}
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps({"format": FORMAT, "version": VERSION, "entries": [entry]}))
    assert read_baseline(str(path)) == {Fingerprint("ops.py", "AGL001", "Mul.backward", "return grad * b"): 1}


def test_the_baseline_file_is_the_same_text_every_time(tmp_path: Path) -> None:
    """The baseline is committed beside the code: its text (two-space indent, entries sorted,
    one trailing newline) is pinned, so writing it again from the same findings changes no byte."""
    source = tmp_path / "ops.py"
    lines = FUNCTIONS.format(n=0).splitlines(True)
    source.write_text("".join(lines))
    found = [
        Diagnostic(str(source), 23, 8, "AGL016", "returns a list", Severity.WARNING),
        Diagnostic(str(source), 13, 8, "AGL001", "one gradient", Severity.ERROR),
        Diagnostic(str(source), 13, 8, "AGL001", "one gradient", Severity.ERROR),
    ]
    path = tmp_path / "baseline.json"
    assert write_baseline(str(path), found, lambda _: lines) == 3
    assert path.read_text() == textwrap.dedent(
        f"""\
        {{
          "format": "{FORMAT}",
          "version": {VERSION},
          "generated-by": "autograd-lint {__version__}",
          "entries": [
            {{
              "path": "ops.py",
              "code": "AGL001",
              "scope": "Mul0.backward",
              "snippet": "return grad * b",
              "count": 2
            }},
            {{
              "path": "ops.py",
              "code": "AGL016",
              "scope": "Scale0.backward",
              "snippet": "return [grad * 2]",
              "count": 1
            }}
          ]
        }}
        """
    )
    first = path.read_bytes()
    write_baseline(str(path), list(reversed(found)), lambda _: lines)
    assert path.read_bytes() == first


def test_a_file_that_fails_to_parse_keeps_its_entries(tmp_path: Path) -> None:
    """Only a file read in full can show an entry stale: a syntax error half-way through an edit
    must not call that file's entries stale (writing the baseline again would drop them)."""
    paths = make_tree(tmp_path, files=2)
    assert check("src", "--write-baseline", "baseline.json", cwd=tmp_path).returncode == 0
    paths[0].write_text(paths[0].read_text().replace("return grad * b\n", "return grad * b)\n"))
    result = check("src", "--baseline", "baseline.json", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "ops0.py" in errors[0] and "syntax error" in errors[0], result.stderr
    assert "stale" not in result.stderr and "--write-baseline" not in result.stderr, result.stderr
