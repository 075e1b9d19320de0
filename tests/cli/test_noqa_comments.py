"""How ``# noqa`` comments are read and how ``--add-noqa`` edits one line (autograd_lint.noqa)."""

from __future__ import annotations

import pytest

from autograd_lint.lint.add_noqa import add_noqa_to_text
from autograd_lint.noqa import add_codes, comment_layout, file_noqa, is_silenced, own_file_noqa
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
    assert file_noqa(["# ruff: noqa"]).silences("AGL001")
    assert file_noqa(["# flake8= NOQA  # generated"]).silences("AGL001")
    # With codes: ruff's reading, only those codes (flake8 would skip the file).
    assert not file_noqa(["# flake8: noqa: B950"]).silences("AGL001")
    assert not file_noqa(["# ruff: noqa: E501, F401"]).silences("AGL001")
    assert file_noqa(["# flake8: noqa: AGL001"]).silences("AGL001")
    assert file_noqa(["#ruff:noqa:AGL0"]).silences("AGL005")
    assert not file_noqa(["# ruff: noqa: AGL0"]).silences("AGL100")
    assert file_noqa(["# flake8: noqa: B950", "# ruff: noqa: AGL003"]).codes == {"B950", "AGL003"}
    assert file_noqa(["# flake8: noqa: see below"]).silences("AGL001")  # no code list: bare, as flake8 reads it
    assert not file_noqa(["x = 1  # flake8: noqa"]).silences("AGL001")
    assert not file_noqa(["# pylint: noqa"]).silences("AGL001")
    assert file_noqa(["# autograd-lint: noqa: AGL00"]).silences("AGL005")
    assert not file_noqa(["# autograd-lint: noqa: AGL00"]).silences("AGL016")
    assert not file_noqa(["import torch"]).silences("AGL001")
    assert file_noqa(["# autograd-lint: noqa: AGL016  # generated code"]).silences("AGL016")


def test_the_flake8_plugin_reads_only_our_own_file_directive() -> None:
    # flake8 decides on `# flake8: noqa` (the whole file, codes or not); no one reads ruff's under flake8.
    assert not own_file_noqa(["# flake8: noqa"]).silences("AGL001")
    assert not own_file_noqa(["# ruff: noqa"]).silences("AGL001")
    assert own_file_noqa(["# autograd-lint: noqa: AGL001"]).silences("AGL001")
    assert not own_file_noqa(["# autograd-lint: noqa: AGL001"]).silences("AGL002")


def test_line_directives_as_flake8_reads_them() -> None:
    assert is_silenced("x  # noqa", "AGL001")
    assert is_silenced("x  # noqa:AGL001,AGL002", "AGL002")
    assert is_silenced("x  # NoQA: agl0", "AGL005")
    assert not is_silenced("x  # noqa: E501", "AGL001")
    assert is_silenced("x  # noqa: AGL", "AGL001")  # no digits: flake8 reads a bare noqa


def test_the_engine_the_server_uses_reads_file_directives_as_ruff() -> None:
    from autograd_lint.lint.engine import check_source
    from autograd_lint.model.source import SourceFile
    from autograd_lint.settings import Settings

    body = (
        "import torch\n\n\nclass Mul(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, a, b):\n"
        "        return a * b\n\n    @staticmethod\n    def backward(ctx, grad):\n        return grad\n"
    )

    def codes(directive: str) -> list[str]:
        found = check_source(SourceFile("m.py", f"{directive}\n{body}", "m"), Settings()).diagnostics
        return [d.code for d in found]

    assert codes("# flake8: noqa: B950") == ["AGL001"]
    assert codes("# ruff: noqa: AGL001") == []
    assert codes("# flake8: noqa") == []
