"""The one atomic writer every command uses."""

from __future__ import annotations

import os
import stat

from autograd_lint.files import write_atomically


def test_a_symlink_stays_a_link_and_its_target_is_replaced(tmp_path) -> None:
    target = tmp_path / "real.py"
    target.write_text("old\n")
    os.chmod(target, 0o640)
    link = tmp_path / "link.py"
    link.symlink_to(target)
    write_atomically(str(link), b"new\n")
    assert link.is_symlink()
    assert target.read_bytes() == b"new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.py", "real.py"]


def test_a_new_file_gets_the_mode_open_would_give_and_its_directory(tmp_path) -> None:
    path = tmp_path / "sub" / "new.json"
    write_atomically(str(path), b"{}\n")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask
    assert os.listdir(path.parent) == ["new.json"]


def test_the_reader_refuses_a_fifo_without_blocking_and_a_file_over_its_limit(tmp_path) -> None:
    import pytest

    from autograd_lint.files import Refused, read_regular

    os.mkfifo(tmp_path / "pipe.py")
    with pytest.raises(Refused, match=r"not a regular file \(a FIFO\); not read"):
        read_regular(str(tmp_path / "pipe.py"), 100)
    (tmp_path / "big.py").write_bytes(b"x" * 101)
    with pytest.raises(Refused, match=r"too large \(101 bytes; the limit is 100 bytes\); not read"):
        read_regular(str(tmp_path / "big.py"), 100)
    assert read_regular(str(tmp_path / "big.py"), 101) == b"x" * 101


def test_the_writer_leaves_a_file_changed_since_it_was_read(tmp_path) -> None:
    import pytest

    from autograd_lint.files import Refused

    path = tmp_path / "ops.py"
    path.write_bytes(b"edited by the user\n")
    with pytest.raises(Refused, match="changed while it was being rewritten"):
        write_atomically(str(path), b"fixed\n", replacing=b"as read\n")
    assert path.read_bytes() == b"edited by the user\n"
    write_atomically(str(path), b"fixed\n", replacing=b"edited by the user\n")
    assert path.read_bytes() == b"fixed\n"


def test_one_run_never_writes_two_outputs_to_one_path(tmp_path) -> None:
    import pytest

    from autograd_lint.files import Outputs, Refused

    outputs = Outputs()
    outputs.claim(str(tmp_path / "test_a_b.py"), "a/b.py")
    outputs.claim(str(tmp_path / "." / "test_a_b.py"), "a/b.py")  # the same output again is fine
    with pytest.raises(Refused, match=r"would also hold the output for a/b.py; not written"):
        outputs.claim(str(tmp_path / "test_a_b.py"), "a_b.py")
