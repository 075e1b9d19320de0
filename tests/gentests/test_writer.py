"""The hash header, file states and atomic writes of generated files."""

from __future__ import annotations

import os

import pytest

from autograd_lint.gentests.writer import (
    FileState,
    compose,
    content_hash,
    file_state,
    split_hash,
    write_atomic,
    write_python_atomic,
)

HEADER = "# Generated for a test.\n# Second header line."
BODY = '"""A module."""\n\nVALUE = 1\n'


def test_compose_puts_the_hash_of_the_body_after_the_header() -> None:
    text = compose(HEADER, BODY)
    assert text.startswith(HEADER + "\n# autograd-lint-gen-tests-sha256: ")
    assert split_hash(text) == (content_hash(BODY), BODY)


def test_an_edit_anywhere_below_the_header_breaks_the_hash() -> None:
    edited = compose(HEADER, BODY).replace("VALUE = 1", "VALUE = 2")
    recorded_hash, body = split_hash(edited)
    assert recorded_hash != content_hash(body)


def test_a_file_without_header_has_no_hash() -> None:
    assert split_hash(BODY) is None


@pytest.mark.parametrize(
    ("existing", "expected"),
    [
        (None, FileState.MISSING),
        (compose(HEADER, BODY), FileState.UP_TO_DATE),
        (compose(HEADER, BODY.replace("1", "0")), FileState.STALE),
        (compose(HEADER, BODY) + "# my note\n", FileState.EDITED),
        (BODY, FileState.FOREIGN),
    ],
    ids=["missing", "up-to-date", "stale", "edited", "foreign"],
)
def test_file_state(tmp_path, existing: str | None, expected: FileState) -> None:
    path = tmp_path / "test_generated.py"
    if existing is not None:
        path.write_text(existing, encoding="utf-8")
    assert file_state(str(path), compose(HEADER, BODY)) is expected


def test_write_atomic_replaces_the_file_and_leaves_no_temporary(tmp_path) -> None:
    path = tmp_path / "sub" / "out.py"
    write_atomic(str(path), "old\n")
    os.chmod(path, 0o640)
    write_atomic(str(path), "new\n")
    assert path.read_text() == "new\n"
    assert os.stat(path).st_mode & 0o777 == 0o640
    assert os.listdir(path.parent) == ["out.py"]


def test_write_python_atomic_refuses_invalid_python(tmp_path) -> None:
    path = tmp_path / "out.py"
    path.write_text("KEPT = True\n")
    with pytest.raises(SyntaxError):
        write_python_atomic(str(path), "def broken(:\n")
    assert path.read_text() == "KEPT = True\n"
    assert os.listdir(tmp_path) == ["out.py"]
