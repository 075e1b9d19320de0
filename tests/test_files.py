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
