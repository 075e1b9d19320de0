"""AGL100 and its fix on real repositories (see docs/cli.md, "Unused noqa comments").

Usage:
    python bench/agl100_fix_real.py REPOS NAME [NAME ...]

For each repository NAME extracted under REPOS (the commits pinned in
``bench/accuracy_repos.txt``), in a scratch copy of its Python files:

1. ``check --isolated --add-noqa .`` silences every finding where it is;
2. ``check --isolated --select AGL100 .``: every code just added silences a
   finding, so each AGL100 here is a false positive of the whole-project run;
3. each file given a comment in 1, checked alone (``--select AGL100 FILE``, as
   pre-commit or an editor would): AGL100 findings there are codes that only
   look unused because the other files are not read;
4. ``AGL030`` (a rule that is off by default, so never added in 1) appended to
   every comment of 1 that does not silence it, then ``check --fix --select
   AGL100 .``: the fix must remove those (but the ones on lines it can't judge,
   see AGL100's docs), leave every other code, keep the code outside comments
   byte for byte, and give files that compile.
5. in a fresh copy, ``AGL005, E501`` added to every line that can hold a comment
   in every file that names ``Function`` (merged into comments already there),
   then ``check --fix --select AGL100 .``: compiles, code outside comments byte
   for byte, every ``E501`` kept; ``AGL005`` left only where AGL100 cannot judge
   (or where AGL005 is reported).

Prints one line of figures per repository and a total.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
import tempfile
import tokenize
from pathlib import Path

STALE = "AGL030"
NOQA = re.compile(r"# noqa: (AGL[0-9]+(?:, AGL[0-9]+)*)")


def check(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autograd_lint", "check", "--isolated", *args],
        cwd=cwd, capture_output=True, text=True, timeout=3600,
    )


def code_outside_comments(text: str) -> list[str]:
    columns = {
        token.start[0]: token.start[1]
        for token in tokenize.generate_tokens(io.StringIO(text).readline)
        if token.type == tokenize.COMMENT
    }
    return [line[: columns[n]].rstrip() if n in columns else line for n, line in enumerate(text.splitlines(), 1)]


def measure(source: Path, scratch: Path) -> dict[str, int]:
    shutil.copytree(source, scratch, ignore=lambda d, names: [n for n in names if not (n.endswith(".py") or (Path(d) / n).is_dir())])
    before = {p: p.read_text(encoding="utf-8", errors="surrogateescape") for p in scratch.rglob("*.py")}
    check("--add-noqa", ".", cwd=scratch)
    commented = {p: p.read_text(encoding="utf-8", errors="surrogateescape") for p in before}
    changed = [p for p in before if commented[p] != before[p]]
    added = sum(len(NOQA.findall(commented[p])) - len(NOQA.findall(before[p])) for p in changed)
    whole = check("--select", "AGL100", ".", cwd=scratch).stdout.count(": AGL100 ")
    alone = sum(check("--select", "AGL100", str(p.relative_to(scratch)), cwd=scratch).stdout.count(": AGL100 ") for p in changed)
    stale = 0
    for path in changed:
        text = NOQA.sub(lambda m: m.group(0) if STALE in m.group(1) else f"# noqa: {m.group(1)}, {STALE}", commented[path])
        stale += text.count(f", {STALE}") - commented[path].count(f", {STALE}")
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
    staled = {p: p.read_text(encoding="utf-8", errors="surrogateescape") for p in changed}
    fix = check("--fix", "--select", "AGL100", ".", cwd=scratch)
    broken = identical = intact = kept = 0
    for path in changed:
        after = path.read_text(encoding="utf-8", errors="surrogateescape")
        try:
            compile(after, str(path), "exec")
        except SyntaxError:
            broken += 1
        identical += code_outside_comments(after) == code_outside_comments(staled[path])
        # Only AGL030 went: with the ones left taken out, the file is as --add-noqa wrote it.
        intact += after.replace(f", {STALE}", "") == commented[path]
        kept += after.count(f", {STALE}")
    remaining = check("--select", "AGL100", ".", cwd=scratch).stdout.count(": AGL100 ")
    return {
        "files": len(before), "files commented": len(changed), "codes added": added,
        "AGL100 whole run": whole, "AGL100 file alone": alone, "stale codes": stale,
        "stale kept": kept, "fix exit": fix.returncode, "files only stale codes removed": intact,
        "code identical": identical, "not compiling": broken, "AGL100 after fix": remaining,
    }


def every_slot(source: Path, scratch: Path) -> dict[str, int]:
    from autograd_lint.noqa import add_codes, comment_layout

    shutil.copytree(source, scratch, ignore=lambda d, names: [n for n in names if not (n.endswith(".py") or (Path(d) / n).is_dir())])
    before = {}
    for path in scratch.rglob("*.py"):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        layout = comment_layout(text) if "Function" in text else None
        if layout is None:
            continue
        lines = text.splitlines(keepends=True)
        for index, line in enumerate(lines):
            body = line.rstrip("\r\n")
            if index + 1 not in layout.blocked and body.strip():
                lines[index] = add_codes(body, layout.comment_columns.get(index + 1), ["AGL005", "E501"]) + line[len(body):]
        before[path] = "".join(lines)
        path.write_text(before[path], encoding="utf-8")
    fix = check("--fix", "--select", "AGL100", ".", cwd=scratch)
    broken = identical = e501 = 0
    slots = left = 0
    for path, text in before.items():
        after = path.read_text(encoding="utf-8")
        try:
            compile(after, str(path), "exec")
        except SyntaxError:
            broken += 1
        identical += code_outside_comments(after) == code_outside_comments(text)
        e501 += after.count("E501") == text.count("E501")
        slots += text.count("AGL005")
        left += after.count("AGL005")
    return {
        "slot files": len(before), "slots": slots, "AGL005 left": left, "slot fix exit": fix.returncode,
        "slot code identical": identical, "slot E501 kept": e501, "slot not compiling": broken,
    }


def main() -> None:
    repos, names = Path(sys.argv[1]), sys.argv[2:]
    totals: dict[str, int] = {}
    for name in names:
        with tempfile.TemporaryDirectory() as scratch:
            figures = measure(repos / name, Path(scratch) / name)
            figures |= every_slot(repos / name, Path(scratch) / f"{name}-slots")
        print(name, figures, flush=True)
        for key, value in figures.items():
            totals[key] = totals.get(key, 0) + value
    print("total", totals)


if __name__ == "__main__":
    main()
