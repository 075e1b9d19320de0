"""The report side of autograd-cov, without torch or a test run: joining counts with the
analyser's Functions, the verdict, the table, the JSON and reading it back, and the lines
other processes saved.  Exact values throughout (these tests are what the mutation bench
runs against ``report.py`` and ``coverage_data.py``: docs/testing.md).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from autograd_lint.coverage import report
from autograd_lint.coverage.discovery_worker import Discovered, DiscoveredOp, OpCode, _from_json, main
from autograd_lint.sidefiles import SideFileError

ROOT = "/project"
OPS = f"{ROOT}/pkg/ops.py"
BASE_KEY = (OPS, "Base")


def counts(**phases: int) -> report.Counts:
    """``phase -> eager -> main -> n``."""
    return {phase: {"eager": {"main": n}} for phase, n in phases.items()}


def discovered(qualname: str, line: int, owner: str | None = None, has_backward: bool = True,
               backward_line: int | None = None) -> Discovered:
    owner_name = owner or qualname
    code = None
    if has_backward and backward_line is not None:
        code = OpCode(OPS, f"{owner_name}.backward", backward_line, backward_line + 2)
    return Discovered(OPS, qualname, line, has_backward, (OPS, owner_name) if has_backward else None, code)


def rows_of_a_project() -> list[report.Row]:
    """Ran (counted), Child (only lines ran elsewhere), Never, Base (applied through SubA only),
    SubA (inherits Base's backward), FwdOnly (no backward), and Stray: run, not found by the analyser."""
    specs = [
        discovered("Ran", 4, backward_line=9),
        discovered("Child", 14, backward_line=19),
        discovered("Never", 24, backward_line=29),
        discovered("Base", 34, backward_line=39),
        discovered("SubA", 44, owner="Base"),
        discovered("FwdOnly", 48, has_backward=False),
    ]
    runs = report.Runs(
        applied={
            (OPS, "Ran"): counts(forward=2, backward=2),
            (OPS, "SubA"): {"forward": {"eager": {"main": 3}, "compiled": {"main": 1}},
                            "backward": {"eager": {"thread": 1, "native": 2}}},
            (OPS, "FwdOnly"): counts(forward=1),
            (f"{ROOT}/other.py", "Stray"): counts(forward=1, backward=1),
            ("/elsewhere/lib.py", "Outside"): counts(forward=1),
        },
        code={
            (OPS, "Ran"): counts(backward=2),
            BASE_KEY: {"backward": {"eager": {"thread": 1, "native": 2}}},
            (f"{ROOT}/other.py", "Stray"): counts(backward=1),
        },
    )
    rows = report.build(runs, specs, [ROOT])
    # What coverage saw: Child's backward body ran (in a child process), Never's did not.
    statements = {OPS: set(range(1, 60))}
    executed = {OPS: {10, 11, 20, 40}}
    report.fill_lines(rows, statements.get, executed.get)
    return rows


def by_name(rows: list[report.Row]) -> dict[str, report.Row]:
    return {row.qualname: row for row in rows}


def test_build_joins_counts_with_the_analyser_s_functions() -> None:
    rows = rows_of_a_project()
    # Sorted by path, then line; the Function outside the roots is left out, the stray one under them kept.
    assert [(r.path, r.line, r.qualname) for r in rows] == [
        (f"{ROOT}/other.py", None, "Stray"),
        (OPS, 4, "Ran"), (OPS, 14, "Child"), (OPS, 24, "Never"), (OPS, 34, "Base"), (OPS, 44, "SubA"),
        (OPS, 48, "FwdOnly"),
    ]
    rows_ = by_name(rows)
    assert rows_["Stray"].has_backward is None and rows_["Stray"].backward_code_runs == 1
    assert rows_["SubA"].backward_defined_in == BASE_KEY and rows_["Base"].backward_defined_in is None
    assert rows_["SubA"].backward_code_runs == 3 and rows_["Base"].backward_code_runs == 3
    assert rows_["Base"].counts == {} and rows_["Base"].code_counts == runs_code_of_base()
    assert rows_["Ran"].counts == counts(forward=2, backward=2) and rows_["Ran"].code_counts == counts(backward=2)
    assert rows_["SubA"].total("forward") == 4
    assert rows_["SubA"].total("forward", "eager") == 3 and rows_["SubA"].total("forward", "compiled") == 1
    assert rows_["SubA"].total("backward", counts=rows_["Base"].code_counts) == 3
    assert rows_["SubA"].threads("backward") == ["thread", "native"]
    assert rows_["Ran"].threads("backward") == ["main"] and rows_["Never"].threads("backward") == []


def test_a_backward_that_ran_once_only_as_a_subclass_s_is_exercised() -> None:
    """Base is never applied itself; the backward it defines ran once, through a subclass."""
    base = report.Row(OPS, "Base", 34, True, backward_code_runs=1)
    assert base.backward_ran and report.unexercised([base]) == []


def runs_code_of_base() -> report.Counts:
    return {"backward": {"eager": {"thread": 1, "native": 2}}}


def test_every_run_is_kept_without_roots() -> None:
    runs = report.Runs({("/elsewhere/lib.py", "Outside"): counts(forward=1)}, {})
    (row,) = report.build(runs, [], [])
    assert (row.path, row.qualname, row.line, row.has_backward) == ("/elsewhere/lib.py", "Outside", None, None)
    assert report.build(runs, [], ["/project"]) == []


def test_lines_of_the_backward_each_function_uses() -> None:
    rows = by_name(rows_of_a_project())
    child = rows["Child"].code_lines["backward"]
    assert (child.path, child.qualname, child.line, child.last_line) == (OPS, "Child.backward", 19, 21)
    assert (child.executed, child.missing) == ([20], [21])
    never = rows["Never"].code_lines["backward"]
    assert (never.executed, never.missing) == ([], [30, 31])
    # SubA has no backward lines of its own entry: Discovered gave none (the owner's are Base's).
    assert "backward" not in rows["SubA"].code_lines
    assert rows["Base"].code_lines["backward"].executed == [40]


def test_the_verdict_follows_the_code_counts_or_the_lines() -> None:
    rows = rows_of_a_project()
    named = by_name(rows)
    assert [(name, named[name].backward_ran) for name in ("Ran", "Child", "Never", "Base", "SubA", "Stray")] == [
        ("Ran", True), ("Child", True), ("Never", False), ("Base", True), ("SubA", True), ("Stray", True),
    ]
    assert named["Child"].backward_lines_ran and named["Ran"].backward_lines_ran
    assert not named["Never"].backward_lines_ran
    # FwdOnly has no backward: it is never "unexercised", and it is not counted in the percent.
    assert [r.qualname for r in report.unexercised(rows)] == ["Never"]
    assert report.exercised_percent(rows) == pytest.approx(100 * 5 / 6)
    assert report.exercised_percent([named["FwdOnly"]]) == 100.0
    assert report.exercised_percent([]) == 100.0
    assert report.exercised_percent([named["Never"]]) == 0.0
    # A count of the class applied is enough too (the code counts came from another view).
    applied_only = report.Row(OPS, "X", 1, True, counts=counts(backward=1))
    assert applied_only.backward_ran and report.unexercised([applied_only]) == []


def test_table() -> None:
    table = [re.split(r"  +", line) for line in report.format_table(rows_of_a_project(), ROOT)]
    assert table == [
        ["Function", "forward", "backward", "backward code", "double-bwd", "jvp", "backward threads"],
        ["other.py::Stray", "1", "1", "1", "0", "0", "main"],
        ["pkg/ops.py:4::Ran", "2", "2", "2", "0", "0", "main"],
        ["pkg/ops.py:14::Child", "0", "0", "0 (lines ran)", "0", "0", "-"],
        ["pkg/ops.py:24::Never", "0", "0", "0", "0", "0", "-"],
        ["pkg/ops.py:34::Base", "0", "0", "3", "0", "0", "-"],
        ["pkg/ops.py:44::SubA", "3+1c", "3", "3 (of Base)", "0", "0", "thread, native"],
        ["pkg/ops.py:48::FwdOnly", "1", "-", "-", "0", "0", "-"],
    ]
    # Columns are padded to the widest cell, and no line ends in spaces.
    lines = report.format_table(rows_of_a_project(), ROOT)
    assert all(line == line.rstrip() for line in lines)
    assert lines[0].index("forward") == len("pkg/ops.py:48::FwdOnly") + 2


def test_lines_table_lists_custom_ops_only() -> None:
    assert report.format_lines(rows_of_a_project(), ROOT) == []
    op = report.Row(OPS, "scale_backward", 60, True, kind="custom_op", op="ns::scale")
    op.code_lines["backward"] = report.CodeLines(OPS, "scale_backward", 60, 66, [61, 62], [63, 65, 66])
    op.code_lines["setup_context"] = report.CodeLines(OPS, "setup", 55, 57)
    assert [re.split(r"  +", line) for line in report.format_lines([op], ROOT)] == [
        ["custom-op code", "lines run", "missing"],
        ["pkg/ops.py:60::scale_backward (backward of ns::scale)", "2/5", "63, 65-66"],
        ["pkg/ops.py:55::setup (setup_context of ns::scale)", "not measured", "-"],
    ]
    assert [re.split(r"  +", line) for line in report.format_table([op], ROOT)][1][0] == (
        "pkg/ops.py:60::scale_backward (backward of ns::scale)"
    )


@pytest.mark.parametrize(("lines", "text"), [
    ([], ""), ([3], "3"), ([3, 4], "3-4"), ([3, 5, 6, 7], "3, 5-7"), ([1, 2, 4, 6, 7, 9], "1-2, 4, 6-7, 9"),
])
def test_ranges(lines: list[int], text: str) -> None:
    assert report._ranges(lines) == text


def test_relative_names() -> None:
    assert report.relative_name(OPS, ROOT) == "pkg/ops.py"
    assert report.relative_name(ROOT, ROOT) == "."
    assert report.relative_name("/project2/ops.py", ROOT) == "/project2/ops.py"  # a prefix is not a folder
    assert report.relative_name("/other/ops.py", ROOT) == "/other/ops.py"
    assert report.relative_name(OPS, ROOT + "/") == "pkg/ops.py"


def test_json_and_reading_it_back(tmp_path: Path) -> None:
    rows = rows_of_a_project()
    text = report.to_json(rows, ROOT)
    data = json.loads(text)
    # Keys in a fixed order, so that two reports of the same run are the same text (diffable).
    assert text == json.dumps(data, indent=2, sort_keys=True)
    assert data["version"] == 2 and data["root"] == ROOT
    entries = {f["qualname"]: f for f in data["functions"]}
    assert entries["SubA"] == {
        "kind": "autograd.Function", "path": "pkg/ops.py", "qualname": "SubA", "line": 44, "has_backward": True,
        "backward_ran": True, "backward_defined_in": "pkg/ops.py::Base", "lines": {},
        "counts": {"forward": {"eager": {"main": 3}, "compiled": {"main": 1}},
                   "backward": {"eager": {"thread": 1, "native": 2}}},
        "code_counts": {},
    }
    assert entries["Child"]["lines"] == {"backward": {
        "path": "pkg/ops.py", "qualname": "Child.backward", "line": 19, "executed": [20], "missing": [21]}}
    assert entries["Stray"]["has_backward"] is None and entries["Stray"]["path"] == "other.py"
    assert "op" not in entries["Ran"]
    path = tmp_path / "report.json"
    path.write_text(report.to_json(rows, ROOT))
    read = {entry.qualname: entry for entry in report.read_code_runs(str(path))}
    assert read["Ran"].phases == {"backward": 2} and read["Ran"].backward_lines_ran
    assert read["Base"].phases == {"backward": 3}
    assert read["Child"].phases == {} and read["Child"].backward_lines_ran
    assert read["Never"].phases == {} and not read["Never"].backward_lines_ran
    assert read["SubA"].phases == {} and not read["SubA"].backward_lines_ran
    assert read["Ran"].path == "pkg/ops.py"


def test_reading_keeps_only_function_entries_and_old_entries_without_lines(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    entry = {"path": "a.py", "qualname": "F", "code_counts": {"backward": {"eager": {"main": 1, "native": 2}}}}
    op = {**entry, "kind": "custom_op", "qualname": "bw"}
    inherited = {**entry, "qualname": "G", "code_counts": {}, "backward_defined_in": "a.py::F",
                 "lines": {"backward": {"executed": [3]}}}
    path.write_text(json.dumps({"version": 2, "functions": [entry, op, inherited]}))
    (first, second) = report.read_code_runs(str(path))
    assert (first.qualname, first.phases, first.backward_lines_ran) == ("F", {"backward": 3}, False)
    # The lines of an inherited backward are the base's: they say nothing of G's own code.
    assert (second.qualname, second.backward_lines_ran) == ("G", False)


@pytest.mark.parametrize(("content", "problem"), [
    ({"version": 1, "functions": []}, "not an autograd-cov report of version 2"),
    ([], "not an autograd-cov report of version 2"),
    ({"version": 2, "functions": "x"}, '"functions" must be a list of objects'),
    ({"version": 2, "functions": [1]}, '"functions" must be a list of objects'),
    ({"version": 2, "functions": [{"path": "a.py"}]}, 'malformed "functions" (KeyError'),
    ({"version": 2, "functions": [{"path": "a.py", "qualname": "F", "code_counts": {"backward": 3}}]},
     'malformed "functions" (AttributeError'),
])
def test_a_malformed_report_is_one_error_naming_the_file(tmp_path: Path, content: object, problem: str) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(content))
    with pytest.raises(SideFileError) as error:
        report.read_code_runs(str(path))
    assert str(path) in str(error.value) and problem in str(error.value)


def test_an_entry_matches_by_path_suffix_or_absolute_path(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    ops = tmp_path / "pkg" / "ops.py"
    ops.write_text("")
    relative = report.CodeRuns("pkg/ops.py", "F", {})
    assert relative.matches(str(ops), "F")
    assert not relative.matches(str(ops), "G")
    assert not relative.matches(str(tmp_path / "ops.py"), "F")
    assert not report.CodeRuns("xpkg/ops.py", "F", {}).matches(str(ops), "F")
    assert report.CodeRuns(str(ops), "F", {}).matches(str(ops), "F")
    assert not report.CodeRuns(str(tmp_path / "other.py"), "F", {}).matches(str(ops), "F")


def test_counts_travel_between_processes_as_json() -> None:
    runs = report.Tally.from_json({
        "applied": [{"path": OPS, "qualname": "F", "counts": counts(forward=1)}],
        "code": [{"path": OPS, "qualname": "F", "counts": counts(backward=2)}],
    })
    assert runs.applied == {(OPS, "F"): counts(forward=1)} and runs.code == {(OPS, "F"): counts(backward=2)}
    target: dict[report.FunctionKey, report.Counts] = {(OPS, "F"): counts(forward=1)}
    report._merge_into(target, {(OPS, "F"): {"forward": {"eager": {"main": 2, "native": 1}}}, (OPS, "G"): counts(jvp=1)})
    assert target == {(OPS, "F"): {"forward": {"eager": {"main": 3, "native": 1}}}, (OPS, "G"): counts(jvp=1)}


def test_the_discovery_worker_sends_each_function_s_backward_lines(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "ops.py").write_text(
        "import torch\n\n\nclass Base(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
        "        return x\n\n    @staticmethod\n    def backward(ctx, grad):\n        g = grad\n        return g\n\n\n"
        "class Sub(Base):\n    pass\n\n\nclass Alias(torch.autograd.Function):\n    @staticmethod\n"
        "    def forward(ctx, x):\n        return x\n\n    @staticmethod\n    def vjp(ctx, grad):\n"
        "        return grad\n"
    )
    assert main([str(tmp_path)]) == 0
    found = {d.qualname: d for d in map(_from_json, json.loads(capsys.readouterr().out))}
    ops = os.path.abspath(tmp_path / "ops.py")
    assert found["Base"].backward == OpCode(ops, "Base.backward", 10, 12)
    assert found["Sub"].backward == OpCode(ops, "Base.backward", 10, 12)
    assert found["Sub"].backward_owner == (ops, "Base")
    assert found["Alias"].backward == OpCode(ops, "Alias.vjp", 25, 26)


def test_lines_other_processes_saved_during_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a multiprocessing child saves beside the data file counts; a file that was there
    unchanged before, this process's own, SQLite side files and unreadable files do not."""
    coverage = pytest.importorskip("coverage")
    from autograd_lint.coverage.coverage_data import lines_saved_since, parallel_files

    ops = tmp_path / "ops.py"
    ops.write_text("a = 1\nb = 2\nc = 3\nd = 4\ne = 5\n")

    def save(suffix: str, lines: list[int]) -> Path:
        data = coverage.CoverageData(basename=str(tmp_path / ".coverage"), suffix=suffix)
        data.add_lines({str(ops): lines})
        data.write()
        return Path(data.data_filename())

    stale = save("earlier.1", [1])
    changed = save("reused.2", [2])
    monkeypatch.chdir(tmp_path)
    cov = coverage.Coverage(data_file=str(tmp_path / ".coverage"), data_suffix="mine.3", config_file=False)
    cov.start()
    try:
        before = parallel_files()
        assert set(before) == {str(stale), str(changed)}
        save("child.4", [3])
        changed.unlink()
        save("reused.2", [2, 4])  # the same name written again during the run
        (tmp_path / ".coverage.child.5-journal").write_bytes(b"not a data file")
        (tmp_path / ".coverage.broken.6").write_bytes(b"not a data file either")
        (tmp_path / ".coverage.folder.7").mkdir()
        (tmp_path / ".coverage.0-dangling").symlink_to(tmp_path / "gone")  # listed first, then skipped
        # This process's own data, saved during the run: read from memory, never from its file.
        cov.get_data().add_lines({str(ops): [5]})
        cov.save()
        own = cov.get_data().data_filename()
        assert own.endswith(".coverage.mine.3") and own in parallel_files()
        saved = lines_saved_since(before)
    finally:
        cov.stop()
    assert saved == {os.path.realpath(ops): {2, 3, 4}}


def test_build_gives_each_custom_op_backward_a_row_with_its_lines() -> None:
    """A registered backward is its own row (keyed by the backward function), with the lines of the
    backward and, when one is registered, of setup_context; the specs after it are still read."""
    with_setup = DiscoveredOp("ns::scale", OPS, 50, OpCode(OPS, "scale_backward", 60, 62),
                              OpCode(OPS, "scale_setup", 55, 57))
    without = DiscoveredOp("ns::cube", OPS, 70, OpCode(OPS, "cube_backward", 75, 76), None)
    runs = report.Runs({(OPS, "scale_backward"): counts(forward=1, backward=1)}, {})
    rows = by_name(report.build(runs, [with_setup, without, discovered("After", 80, backward_line=85)], [ROOT]))
    assert sorted(rows) == ["After", "cube_backward", "scale_backward"]
    scale, cube = rows["scale_backward"], rows["cube_backward"]
    assert (scale.path, scale.line, scale.kind, scale.op, scale.has_backward) == (OPS, 60, "custom_op", "ns::scale", True)
    assert scale.counts == counts(forward=1, backward=1) and scale.backward_ran
    assert {role: (c.path, c.qualname, c.line, c.last_line) for role, c in scale.code_lines.items()} == {
        "backward": (OPS, "scale_backward", 60, 62), "setup_context": (OPS, "scale_setup", 55, 57)}
    assert list(cube.code_lines) == ["backward"] and cube.path == OPS and not cube.backward_ran
    assert rows["After"].kind == "autograd.Function" and rows["After"].op is None


def test_without_coverage_installed_no_other_process_saved_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-Function report runs without coverage (its counts need none): nothing to read, no error."""
    import sys

    from autograd_lint.coverage.coverage_data import lines_saved_since, parallel_files

    monkeypatch.setitem(sys.modules, "coverage", None)  # `import coverage` raises ImportError
    assert parallel_files() == {}
    assert lines_saved_since({}) == {}
