"""The README's Neovim setup for versions before 0.10, run in a real headless Neovim (skipped without ``nvim``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
NVIM = shutil.which("nvim")
# Test harness, not part of the snippet: wait for diagnostics, write them out, quit.
PROBE = r"""
local out = os.getenv("PROBE_OUT")
local deadline = vim.loop.now() + 120000
local function poll()
  local found = vim.diagnostic.get(0)
  if #found > 0 or vim.loop.now() > deadline then
    local f = io.open(out, "w")
    for _, d in ipairs(found) do
      f:write(string.format("%d:%d %s\n", d.lnum, d.col, d.message))
    end
    f:close()
    vim.cmd("qa!")
  else
    vim.defer_fn(poll, 100)
  end
end
vim.defer_fn(poll, 100)
"""
BUGGY = """import torch


class Pair(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return [grad * 2]
"""


def readme_snippet(marker: str) -> str:
    """The first ```lua block after ``marker`` in the README."""
    text = README.read_text()
    match = re.search(re.escape(marker) + r".*?```lua\n(.*?)```", text, re.DOTALL)
    assert match is not None, marker
    return match.group(1)


@pytest.mark.skipif(NVIM is None, reason="needs nvim on PATH")
def test_start_client_snippet_for_neovim_before_0_10(tmp_path: Path) -> None:
    version = subprocess.run([NVIM, "--version"], capture_output=True, text=True, timeout=60).stdout.split()[1]
    if tuple(int(part) for part in version.lstrip("v").split(".")[:2]) >= (0, 10):
        pytest.skip(f"the snippet is for Neovim before 0.10; this is {version}")
    (tmp_path / "init.lua").write_text(readme_snippet("On Neovim 0.7 to 0.9"))
    (tmp_path / "probe.lua").write_text(PROBE)
    (tmp_path / "ops.py").write_text(BUGGY)
    # `autograd-lint` as installed beside this interpreter.
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    env["PROBE_OUT"] = str(tmp_path / "out.txt")
    subprocess.run(
        [NVIM, "--headless", "--clean", "-u", str(tmp_path / "init.lua"), "-c", f"luafile {tmp_path / 'probe.lua'}", "ops.py"],
        cwd=tmp_path, env=env, capture_output=True, timeout=180,
    )
    found = (tmp_path / "out.txt").read_text().splitlines()
    assert len(found) == 1 and found[0].startswith("10:8 Pair.backward returns a list")
