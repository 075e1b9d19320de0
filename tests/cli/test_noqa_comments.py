"""How ``# noqa`` comments are read and how ``--add-noqa`` edits one line (autograd_lint.noqa)."""

from __future__ import annotations

import pytest

from autograd_lint.lint.add_noqa import add_noqa_to_text
from autograd_lint.noqa import add_codes, comment_layout, file_noqa, is_silenced
from autograd_lint.rules.base import Diagnostic, Severity


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("x = f()", "x = f()  # noqa: AGL001"),
        ("x = f()   ", "x = f()  # noqa: AGL001"),
        ("x = f()  # noqa: E501", "x = f()  # noqa: E501, AGL001"),
        ("x = f()  # NOQA:E501,W291 trailing words", "x = f()  # NOQA:E501,W291, AGL001 trailing words"),
        ("x = f()  # noqa", "x = f()  # noqa"),
        ("x = f()  # noqa: AGL0", "x = f()  # noqa: AGL0"),
        ("x = f()  # type: ignore", "x = f()  # type: ignore  # noqa: AGL001"),
        ('x = f("# noqa: E501")', 'x = f("# noqa: E501")  # noqa: AGL001'),
    ],
)
def test_add_codes_merges_into_the_comment_only(line: str, expected: str) -> None:
    layout = comment_layout(line + "\n")
    assert layout is not None
    assert add_codes(line, layout.comment_columns.get(1), ["AGL001"]) == expected


def test_add_codes_with_a_reason_and_several_codes() -> None:
    assert add_codes("y = g()", None, ["AGL016", "AGL002", "AGL016"], "legacy") == "y = g()  # noqa: AGL016, AGL002  # legacy"


def test_lines_inside_strings_or_continued_are_left() -> None:
    text = 'x = f("""a\nb""")\ny = 1 + \\\n    2\nz = 3\n'
    findings = [Diagnostic("m.py", line, 0, "AGL001", "m", Severity.ERROR) for line in (1, 3, 5)]
    edit = add_noqa_to_text(text, findings)
    assert edit.skipped == [1, 3]
    assert edit.text.splitlines()[-1] == "z = 3  # noqa: AGL001"


def test_file_level_directives() -> None:
    assert file_noqa(["# flake8: noqa"]).silences("AGL001")
    assert file_noqa(["# flake8: noqa: E501"]).silences("AGL001")  # flake8 reads nothing after it
    assert not file_noqa(["x = 1  # flake8: noqa"]).silences("AGL001")
    assert file_noqa(["# autograd-lint: noqa: AGL00"]).silences("AGL005")
    assert not file_noqa(["# autograd-lint: noqa: AGL00"]).silences("AGL016")
    assert not file_noqa(["import torch"]).silences("AGL001")
    assert file_noqa(["# autograd-lint: noqa: AGL016  # generated code"]).silences("AGL016")


def test_line_directives_as_flake8_reads_them() -> None:
    assert is_silenced("x  # noqa", "AGL001")
    assert is_silenced("x  # noqa:AGL001,AGL002", "AGL002")
    assert is_silenced("x  # NoQA: agl0", "AGL005")
    assert not is_silenced("x  # noqa: E501", "AGL001")
    assert is_silenced("x  # noqa: AGL", "AGL001")  # no digits: flake8 reads a bare noqa
