"""The result cache of ``check``: a warm run prints what a fresh run prints, after edits to
the file itself and to the files its result depends on (a base class in another file, a
custom op's registrations, the ``apply`` calls of a Function in other files), under
concurrent runs and with a damaged store.

Output is compared byte for byte with ``--no-cache`` runs of the real command line; which
files a run analysed again is read from discovery's rounds in-process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograd_lint.lint.commands import check as check_command
from autograd_lint.model import discovery
from autograd_lint.model.result_cache import DIRECTORY, ResultCache
from autograd_lint.settings import Settings
from cli_process import run_cli

BASE = (
    "import torch\n\n\nclass Base(torch.autograd.Function):\n"
    "    @staticmethod\n    def forward(ctx, x, y):\n        return x * y\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g, g\n"
)
# Derived inherits Base.forward: its one-gradient backward is wrong while forward takes two inputs.
DERIVED = (
    "from base import Base\n\n\nclass Derived(Base):\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g\n"
)
OPS = (
    "import torch\nfrom torch import Tensor\n\n\n"
    "@torch.library.custom_op('pkg::scale', mutates_args=())\n"
    "def scale(x: Tensor) -> Tensor:\n    return x * 2\n"
)
# Scale's backward returns one gradient: wrong only where apply passes the defaulted factor.
SCALE = (
    "import torch\n\n\nclass Scale(torch.autograd.Function):\n"
    "    @staticmethod\n    def forward(ctx, x, factor=2.0):\n        ctx.factor = factor\n        return x * factor\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g * ctx.factor\n"
)
CALLER = "from scale import Scale\n\n\ndef halve(x):\n    return Scale.apply(x)\n"
FAKE = "import torch\n\n\n@torch.library.register_fake('pkg::scale')\ndef _(x):\n    return torch.empty_like(x)\n"


def check(*args: str, cwd: Path) -> tuple[int, str, str]:
    done = run_cli(["check", "--select", "ALL", *args], cwd=cwd, timeout=300)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "base.py").write_text(BASE)
    (tmp_path / "derived.py").write_text(DERIVED)
    (tmp_path / "ops.py").write_text(OPS)
    (tmp_path / "fake.py").write_text(FAKE)
    for index in range(10):  # enough files for the rounds to run on worker processes
        (tmp_path / f"plain{index}.py").write_text(f"x = {index}\n")
    return tmp_path


def same_as_fresh(tree: Path, *args: str) -> tuple[int, str, str]:
    """A run with the cache, checked against a run without it; the cached run's output."""
    fresh = check("--no-cache", *args, cwd=tree)
    cached = check(*args, cwd=tree)
    assert cached == fresh
    return cached


def test_a_warm_run_prints_what_a_fresh_run_prints(tree: Path) -> None:
    first = same_as_fresh(tree, ".")
    assert "derived.py:7:9: AGL001" in first[1]
    assert check(".", cwd=tree) == first  # from the cache
    assert check("--jobs", "1", ".", cwd=tree) == first
    cache = tree / DIRECTORY
    assert (cache / ".gitignore").read_text().splitlines()[-1] == "*"
    assert (cache / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    # git sees nothing of it.
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=tree, capture_output=True, text=True)
    assert DIRECTORY not in status.stdout and "base.py" in status.stdout


def test_no_cache_neither_reads_nor_writes_it(tree: Path) -> None:
    check("--no-cache", ".", cwd=tree)
    assert not (tree / DIRECTORY).exists()


def test_an_edit_of_another_files_base_class_changes_the_dependent_result(tree: Path) -> None:
    before = same_as_fresh(tree, ".")
    assert "derived.py:7:9: AGL001" in before[1]
    # Base.forward now takes one input: Derived's one gradient is right.
    (tree / "base.py").write_text(BASE.replace("forward(ctx, x, y)", "forward(ctx, x)").replace("g, g", "g"))
    after = same_as_fresh(tree, ".")
    assert "AGL001" not in after[1]
    # And back: the first result again, from the cache.
    (tree / "base.py").write_text(BASE)
    assert same_as_fresh(tree, ".") == before
    # Base renamed: Derived is no Function any more.
    (tree / "base.py").write_text(BASE.replace("class Base(", "class Other(") + "\nBase = object\n")
    renamed = same_as_fresh(tree, ".")
    assert "derived.py" not in renamed[1]


def test_a_registration_removed_in_another_file_changes_the_ops_file(tree: Path) -> None:
    before = same_as_fresh(tree, ".")
    assert "AGL110" not in before[1]
    (tree / "fake.py").write_text("x = 1\n")
    after = same_as_fresh(tree, ".")
    assert any(line.startswith("./ops.py:") and " AGL110 " in line for line in after[1].splitlines())
    (tree / "fake.py").write_text(FAKE)
    assert same_as_fresh(tree, ".") == before


def test_an_edit_of_an_apply_call_in_another_file_changes_the_dependent_result(tree: Path) -> None:
    (tree / "scale.py").write_text(SCALE)
    (tree / "caller.py").write_text(CALLER)
    before = same_as_fresh(tree, ".")
    assert "scale.py" not in before[1]  # apply passes x alone: one gradient is right
    (tree / "caller.py").write_text(CALLER.replace("apply(x)", "apply(x, 0.5)"))
    passed = same_as_fresh(tree, ".")
    assert "scale.py:12:9: AGL001" in passed[1] and "Scale.apply in ./caller.py:5 passes 2 inputs" in passed[1]
    # The call moves: the message names its new line.
    (tree / "caller.py").write_text("\n" + CALLER.replace("apply(x)", "apply(x, 0.5)"))
    moved = same_as_fresh(tree, ".")
    assert "./caller.py:6 passes 2 inputs" in moved[1]
    # Calls that can't be counted decide nothing: silent again.
    (tree / "caller.py").write_text(CALLER.replace("apply(x)", "apply(*x)"))
    assert "scale.py" not in same_as_fresh(tree, ".")[1]
    # Back to one input, then to two again: each result as a fresh run gives it, from the cache.
    (tree / "caller.py").write_text(CALLER)
    assert same_as_fresh(tree, ".") == before
    (tree / "caller.py").write_text(CALLER.replace("apply(x)", "apply(x, 0.5)"))
    assert same_as_fresh(tree, ".") == passed
    assert check(".", cwd=tree) == passed


def test_an_apply_call_in_another_file_reaches_a_custom_op_file(tree: Path) -> None:
    # A file with custom ops has its rules run in the last round: the count reaches it there.
    (tree / "ops.py").write_text(OPS + "\n\n" + SCALE.replace("import torch\n", ""))
    (tree / "caller.py").write_text(CALLER.replace("from scale", "from ops"))
    before = same_as_fresh(tree, ".")
    assert "ops.py" not in before[1]
    (tree / "caller.py").write_text(CALLER.replace("from scale", "from ops").replace("apply(x)", "apply(x, 0.5)"))
    after = same_as_fresh(tree, ".")
    assert "./ops.py:" in after[1] and "AGL001" in after[1] and "caller.py:5 passes 2 inputs" in after[1]
    (tree / "caller.py").write_text(CALLER.replace("from scale", "from ops"))
    assert same_as_fresh(tree, ".") == before


def test_a_new_package_init_changes_module_names(tree: Path) -> None:
    package = tree / "pkg"
    package.mkdir()
    (package / "base.py").write_text(BASE)
    (package / "derived.py").write_text(DERIVED.replace("from base import", "from pkg.base import"))
    before = same_as_fresh(tree, ".")
    (package / "__init__.py").write_text("")
    same_as_fresh(tree, ".")
    (package / "__init__.py").unlink()
    assert same_as_fresh(tree, ".") == before


def test_single_files_and_settings_have_their_own_entries(tree: Path) -> None:
    same_as_fresh(tree, "derived.py")  # named alone: no base known, so no finding
    same_as_fresh(tree, "derived.py", "base.py")
    same_as_fresh(tree, "--ignore", "AGL001", ".")
    same_as_fresh(tree, "--output-format", "json", ".")
    (tree / "pyproject.toml").write_text('[tool.autograd-lint]\nignore = ["AGL0"]\n')
    same_as_fresh(tree, ".")


def test_a_damaged_store_is_read_as_empty_and_written_again(tree: Path) -> None:
    first = same_as_fresh(tree, ".")
    stores = list((tree / DIRECTORY / "v1").iterdir())  # the per-file store and the run's record
    assert len(stores) == 2
    for store in stores:
        store.write_bytes(b"\x80\x05garbage")
    assert check(".", cwd=tree) == first
    assert check(".", cwd=tree) == first
    assert all(store.read_bytes() != b"\x80\x05garbage" for store in stores)


def test_concurrent_runs_each_print_the_fresh_output(tree: Path) -> None:
    fresh = check("--no-cache", ".", cwd=tree)
    command = [sys.executable, "-m", "autograd_lint", "check", "--select", "ALL", "."]
    runs = [subprocess.Popen(command, cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    for process in runs:
        stdout, stderr = process.communicate(timeout=300)
        assert (process.returncode, stdout, stderr) == fresh
    assert check(".", cwd=tree) == fresh
    assert not [p.name for p in (tree / DIRECTORY / "v1").iterdir() if not p.name.endswith(".pickle")]


def test_cache_dir_setting_is_relative_to_the_configuration(tree: Path) -> None:
    (tree / "pyproject.toml").write_text('[tool.autograd-lint]\ncache-dir = "build/lint-cache"\n')
    (tree / "sub").mkdir()
    same_as_fresh(tree / "sub", "..")
    assert (tree / "build" / "lint-cache" / ".gitignore").exists()
    assert not (tree / DIRECTORY).exists() and not (tree / "sub" / DIRECTORY).exists()


def test_an_unwritable_cache_warns_and_changes_nothing_else(tree: Path) -> None:
    (tree / DIRECTORY).write_text("a file where the cache directory should be\n")  # root can't write there either
    code, stdout, stderr = check(".", cwd=tree)
    fresh = check("--no-cache", ".", cwd=tree)
    assert (code, stdout) == fresh[:2]
    assert stderr.startswith("warning: ") and "the next run is not faster" in stderr
    assert check("-q", ".", cwd=tree)[2] == ""  # -q: the findings, nothing else


def analysed(tree: Path, monkeypatch: pytest.MonkeyPatch, paths: list[Path] | None = None) -> list[str]:
    """The files one cached run (in this process, of ``paths``, else the tree) analysed rather
    than took from the cache."""
    seen: list[str] = []
    real = discovery._Rounds.run
    real_finish = discovery._Rounds.finish

    def spy(self: discovery._Rounds, tasks: list, state: discovery._Round) -> list:  # type: ignore[type-arg]
        seen.extend(Path(task[0]).name for task in tasks)
        return real(self, tasks, state)

    def spy_finish(self: discovery._Rounds, holders: list, targets: dict, state: discovery._Round) -> list:  # type: ignore[type-arg]
        seen.extend(Path(holder.path).name for holder in holders)
        return real_finish(self, holders, targets, state)

    monkeypatch.setattr(discovery._Rounds, "run", spy)
    monkeypatch.setattr(discovery._Rounds, "finish", spy_finish)
    settings = Settings(select=("ALL",), jobs=1)
    cache = discovery.open_cache(str(tree / DIRECTORY), settings, check_command._check_file, check_command._needs)
    discovery.run([str(p) for p in paths or [tree]], settings, check_command._check_file, check_command._needs, cache)
    cache.save()
    monkeypatch.undo()
    return sorted(set(seen))


def test_only_what_changed_and_what_depends_on_it_is_analysed_again(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "plain0.py" in analysed(tree, monkeypatch)
    assert analysed(tree, monkeypatch) == []
    (tree / "plain3.py").write_text("x = 33\n")
    with pytest.MonkeyPatch.context() as clock:  # a run of that file alone, an hour later, writes the store ...
        hour_later = time.time_ns() + 3_600_000_000_000
        clock.setattr(time, "time_ns", lambda: hour_later)
        analysed(tree, monkeypatch, [tree / "plain3.py"])
    assert analysed(tree, monkeypatch) == ["plain3.py"]  # ... and keeps the entries it did not use
    (tree / "base.py").write_text(BASE + "\n# a comment line moves nothing that matters... but the text changed\n")
    assert analysed(tree, monkeypatch) == ["base.py"]
    (tree / "base.py").write_text("\n" + BASE)  # Base's lines move: its spec changes, and Derived's result with it
    assert analysed(tree, monkeypatch) == ["base.py", "derived.py"]
    # A comment beside the registration changes nothing ops.py's result reads of it ...
    (tree / "fake.py").write_text(FAKE.replace("empty_like(x)", "empty_like(x)  # changed"))
    assert analysed(tree, monkeypatch) == ["fake.py"]
    # ... moving the registration does (its place is part of what ops.py reads).
    (tree / "fake.py").write_text("\n" + FAKE)
    assert analysed(tree, monkeypatch) == ["fake.py", "ops.py"]
    # An apply call in another file: the caller, and the Function's file in the round that
    # gives the rules the run's counts; an edit that leaves the counts as they were, the caller only.
    (tree / "scale.py").write_text(SCALE)
    (tree / "caller.py").write_text(CALLER)
    analysed(tree, monkeypatch)  # a new Function: the later rounds' gate names it, every file they read again
    (tree / "caller.py").write_text(CALLER.replace("apply(x)", "apply(x, 0.5)"))
    assert analysed(tree, monkeypatch) == ["caller.py", "scale.py"]
    assert analysed(tree, monkeypatch) == []
    (tree / "caller.py").write_text(CALLER.replace("apply(x)", "apply(x, 0.5)") + "# a comment\n")
    assert analysed(tree, monkeypatch) == ["caller.py"]
    (tree / "caller.py").write_text(CALLER.replace("apply(x)", "apply(x, 0.25)") + "\n\n")
    assert analysed(tree, monkeypatch) == ["caller.py"]
    (tree / "caller.py").write_text("\n" + CALLER.replace("apply(x)", "apply(x, 0.5)"))
    assert analysed(tree, monkeypatch) == ["caller.py", "scale.py"]


def in_process(tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str, bool]:
    """One cached ``check --select ALL .`` in this process: exit code, stdout, stderr, and
    whether it analysed anything (False: the last run's record was replayed)."""
    from autograd_lint.cli import main

    called: list[bool] = []
    real = discovery.run

    def spy(*args: object, **kwargs: object) -> object:
        called.append(True)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.chdir(tree)
    monkeypatch.setattr(discovery, "run", spy)
    capsys.readouterr()
    code = main(["check", "--select", "ALL", "--jobs", "1", "."])
    out, err = capsys.readouterr()
    monkeypatch.undo()
    return code, out, err, bool(called)


def test_an_unchanged_tree_replays_the_last_run_and_any_edit_falls_back(
    tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tree / "plain3.py").write_text("x = 3\n")
    # Signatures are trusted only for files last changed more than _RACY_NS before a run.
    time.sleep(2.2)
    fresh = check("--no-cache", "--jobs", "1", ".", cwd=tree)
    assert in_process(tree, monkeypatch, capsys) == (*fresh, True)
    assert in_process(tree, monkeypatch, capsys) == (*fresh, False)
    # Touched without a change: hashed, the same content, replayed.
    os.utime(tree / "base.py")
    assert in_process(tree, monkeypatch, capsys) == (*fresh, False)
    # An edit that keeps the size and puts the modification time back: the content decides.
    info = os.stat(tree / "plain3.py")
    (tree / "plain3.py").write_text("x = 4\n")
    os.utime(tree / "plain3.py", ns=(info.st_atime_ns, info.st_mtime_ns))
    assert in_process(tree, monkeypatch, capsys)[3] is True
    # An edit that changes the findings: never the stale output.
    (tree / "base.py").write_text(BASE.replace("return g, g", "return g"))
    edited = check("--no-cache", "--jobs", "1", ".", cwd=tree)
    assert edited != fresh
    assert in_process(tree, monkeypatch, capsys) == (*edited, True)
    assert in_process(tree, monkeypatch, capsys) == (*edited, False)
    # A new file, a removed file: another list of files.
    (tree / "plain10.py").write_text("y = 1\n")
    assert in_process(tree, monkeypatch, capsys)[3] is True
    (tree / "plain10.py").unlink()
    assert in_process(tree, monkeypatch, capsys) == (*edited, True)
    # A file walked last, added and removed: the one list is the other's prefix, and a
    # replay would print the last run's findings (the new file's left out, the removed one's kept).
    (tree / "zz_last.py").write_text(BASE.replace("class Base", "class Last").replace("return g, g", "return g"))
    assert in_process(tree, monkeypatch, capsys)[3] is True
    assert in_process(tree, monkeypatch, capsys)[3] is False
    (tree / "zz_last.py").unlink()
    assert in_process(tree, monkeypatch, capsys) == (*edited, True)


def test_a_package_init_above_the_checked_directory_is_part_of_the_run(tree: Path) -> None:
    package = tree / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "base.py").write_text(BASE)
    (package / "derived.py").write_text(DERIVED.replace("from base import", "from pkg.base import"))
    before = same_as_fresh(package, ".")
    assert same_as_fresh(package, ".") == before
    (tree / "__init__.py").write_text("")  # the module names under pkg/ gain a part
    same_as_fresh(package, ".")
    (tree / "__init__.py").unlink()
    assert same_as_fresh(package, ".") == before


def test_formats_and_options_that_shape_the_report_have_their_own_records(tree: Path) -> None:
    for options in (("--output-format", "json"), ("--statistics",), ("-q",), ("--exit-zero",), ("--output-format", "sarif")):
        same_as_fresh(tree, *options, ".")
        same_as_fresh(tree, *options, ".")
    same_as_fresh(tree, "--exit-zero", ".")


def test_an_excluded_package_init_still_names_the_modules(tree: Path) -> None:
    package = tree / "pkg"
    package.mkdir()
    (package / "base.py").write_text(BASE)
    (package / "derived.py").write_text(DERIVED.replace("from base import", "from .base import"))
    before = same_as_fresh(tree, "--exclude", "__init__.py", ".")
    assert same_as_fresh(tree, "--exclude", "__init__.py", ".") == before
    # Not checked and not in the list of files, yet a package: the run's key names it
    # (this tree's report happens to stay the same; the run must still not be replayed blindly).
    (package / "__init__.py").write_text("")
    same_as_fresh(tree, "--exclude", "__init__.py", ".")
    (package / "__init__.py").unlink()
    assert same_as_fresh(tree, "--exclude", "__init__.py", ".") == before


def test_a_digest_is_remembered_only_for_a_file_unchanged_well_before_it_was_hashed(tmp_path: Path) -> None:
    # A file written in the instant it is read may change again without changing its
    # signature: its digest is not kept (read again next run); an older file's is.
    racy, settled = tmp_path / "racy.py", tmp_path / "settled.py"
    racy.write_text("x = 1\n")
    settled.write_text("y = 2\n")
    infos = {path: os.stat(path) for path in (racy, settled)}
    written = {path: max(info.st_mtime_ns, info.st_ctime_ns) for path, info in infos.items()}
    cache = ResultCache(str(tmp_path / DIRECTORY), "context")
    cache.hashed(str(racy), infos[racy], b"racy", written[racy])
    cache.hashed(str(settled), infos[settled], b"settled", written[settled] + 3_000_000_000)
    assert cache.save() is None
    again = ResultCache(str(tmp_path / DIRECTORY), "context")
    assert again.known_content(str(racy), infos[racy]) is None
    assert again.known_content(str(settled), infos[settled]) == b"settled"


def test_a_store_written_by_another_run_meanwhile_is_merged_not_lost(tmp_path: Path) -> None:
    # A run writes its store without reading it again when the file is still the one it
    # read; when another run replaced it meanwhile, that run's entries are kept.
    from autograd_lint.model.result_cache import ResultCache

    earlier = ResultCache(str(tmp_path), "ctx")
    earlier.put(b"k0", (), "from an earlier run", plain=True)
    assert earlier.save() is None
    first, second = ResultCache(str(tmp_path), "ctx"), ResultCache(str(tmp_path), "ctx")  # both read it
    second.put(b"k2", (), "from the second run", plain=True)
    assert second.save() is None
    first.put(b"k1", (), "from the first run", plain=True)
    assert first.save() is None
    merged = ResultCache(str(tmp_path), "ctx")
    assert merged.get(b"k1") == ((), "from the first run") and merged.get(b"k2") == ((), "from the second run")
    merged.put(b"k3", (), "from the third run", plain=True)
    assert merged.save() is None  # the file is still the one it read: written from what it holds
    keys = (b"k0", b"k1", b"k2", b"k3")
    assert {key for key in keys if ResultCache(str(tmp_path), "ctx").get(key)} == set(keys)
