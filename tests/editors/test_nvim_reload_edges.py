"""reload.lua's :checktime where Neovim refuses or stalls it: a buffer whose file was deleted
(E211, and a second's sleep, at whatever moment the daemon's note came) and the command-line
window (E11, the noted files forgotten)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.editors.headless_nvim import NVIM, run_lua

pytestmark = pytest.mark.skipif(NVIM is None, reason="nvim is not installed")

DELETED = """
local reload = require('memoryd.reload')
local path = os.getenv('MEMORYD_TEST_FILE')
local f = assert(io.open(path, 'w')); f:write('one\\n'); f:close()
vim.cmd('edit ' .. vim.fn.fnameescape(path))
os.remove(path)
reload.on_note({ method = 'magicdoc/updated', params = { path = path } })
vim.wait(100)
local out = assert(io.open(os.getenv('MEMORYD_TEST_OUT'), 'w'))
out:write(vim.fn.execute('messages'))
out:close()
vim.cmd('qa!')
"""

CMDWIN = """
local reload = require('memoryd.reload')
local uv = vim.uv or vim.loop
local path = os.getenv('MEMORYD_TEST_FILE')
local f = assert(io.open(path, 'w')); f:write('one\\n'); f:close()
vim.cmd('edit ' .. vim.fn.fnameescape(path))
local buf = vim.api.nvim_get_current_buf()
f = assert(io.open(path, 'w')); f:write('two\\n'); f:close()
local later = os.time() + 10
uv.fs_utime(path, later, later)
vim.defer_fn(function()
  -- In the command-line window now: the note comes, then the window is closed.
  local inside = vim.fn.getcmdwintype()
  reload.on_note({ method = 'magicdoc/updated', params = { path = path } })
  vim.defer_fn(function()
    vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('<C-c><C-c>', true, false, true), 'n', false)
    vim.defer_fn(function()
      local out = assert(io.open(os.getenv('MEMORYD_TEST_OUT'), 'w'))
      out:write(table.concat({
        inside,
        vim.fn.getcmdwintype(),
        vim.api.nvim_buf_get_lines(buf, 0, 1, false)[1],
        vim.fn.execute('messages'),
      }, '|'))
      out:close()
      vim.cmd('qa!')
    end, 300)
  end, 200)
end, 300)
vim.api.nvim_feedkeys('q:', 'n', false)
"""


def _run(tmp_path: Path, lua: str) -> str:
    env = {"MEMORYD_TEST_FILE": str(tmp_path / "a.md")}
    return run_lua(tmp_path, lua, env, setup=("set autoread",), quit=False)


def test_a_buffer_whose_file_was_deleted_is_not_checked(tmp_path: Path) -> None:
    assert "E211" not in _run(tmp_path, DELETED)


def test_a_note_in_the_command_line_window_reloads_once_it_closes(tmp_path: Path) -> None:
    inside, after, text, messages = _run(tmp_path, CMDWIN).split("|", 3)
    assert inside == ":"  # the note came with the window open
    assert after == ""
    assert "E11" not in messages
    assert text == "two"
