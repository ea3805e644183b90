-- Against the real daemon ($MEMORYD_SOCKET) and a real team server ($MEMORYD_TEAM_URL, started
-- by test_nvim.py): team memories open in Neovim show what a pull wrote when a teammate changed
-- them. team/synced said only how many files a pull wrote, so their buffers kept the old text
-- until a :checktime or a write warning.
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')
local memoryd = T.setup_showing_worker_errors_only()

local repo = T.env('MEMORYD_TEST_REPO')
local team_dir = T.env('MEMORYD_TEST_TEAM_DIR')

local edit, text, wait_text = T.edit, T.buf_text, T.wait_buf_text

-- A teammate's push, straight to the team server (as their own daemon would send it).
local function teammate_pushes(entries)
  local script = [[
import json, os, sys, httpx
url = os.environ["MEMORYD_TEAM_URL"] + "/api/claude_code/team_memory"
auth = {"Authorization": "Bearer " + os.environ["MEMORYD_TEST_TEAMMATE_TOKEN"]}
current = httpx.get(url, params={"repo": "acme/widgets"}, headers=auth)
current.raise_for_status()
httpx.put(
    url,
    params={"repo": "acme/widgets"},
    headers={**auth, "If-Match": current.headers["ETag"]},
    json={"entries": json.loads(sys.argv[1])},
).raise_for_status()
]]
  local out = vim.fn.system({ T.env('MEMORYD_TEST_PYTHON'), '-c', script, vim.json.encode(entries) })
  T.eq(0, vim.v.shell_error, 'the teammate push: ' .. out)
end

local function pull()
  local reply = T.call('team.pull', { cwd = repo }, 20000)
  T.truthy(type(reply) == 'table' and reply.ok, 'team.pull: ' .. vim.inspect(reply))
  return reply
end

-- A buffer of repo's file name whose file on disk was rewritten since ('first' to 'second'),
-- unchecked: the buffer and the file's path. Outside the team folder: nothing is pushed.
local function stale_buffer(name)
  local path = repo .. '/' .. name
  T.write(path, 'first\n')
  local buf = edit(path)
  T.write(path, 'second\n')
  return buf, path
end

T.run({
  {
    'the subscription takes team/synced in, whatever notifications.events says',
    function()
      T.wait('the subscription', function()
        return vim.tbl_contains(memoryd.client().events, 'team/synced')
      end)
    end,
  },
  {
    "team memories open unmodified show a teammate's change after a pull; one with unsaved edits keeps them",
    function()
      vim.o.hidden = true
      pull() -- the team's first versions
      local style = edit(team_dir .. '/style.md')
      T.eq('Use tabs.', text(style), 'the style memory before')
      local deploys = edit(team_dir .. '/deploys.md')
      vim.api.nvim_buf_set_lines(deploys, -1, -1, false, { 'my unsaved line' })
      edit(repo .. '/src/api/users.py')
      teammate_pushes({ ['style.md'] = 'Use spaces, four.\n', ['deploys.md'] = 'Thursdays and Fridays.\n' })
      pull()
      wait_text(style, 'Use spaces, four.', 'the style memory buffer')
      T.eq(false, vim.bo[style].modified, 'the reloaded buffer modified')
      T.truthy(text(deploys):find('my unsaved line', 1, true), 'the unsaved edit: ' .. text(deploys))
      T.truthy(vim.bo[deploys].modified, 'the edited buffer still modified')
      T.eq('Thursdays and Fridays.\n', T.file(team_dir .. '/deploys.md'), 'the pulled file on disk')
      T.eq(nil, T.message_matching('team synced'), 'a message for an event not in notifications.events')
    end,
  },
  {
    'a pull that wrote more files than it named checks every buffer',
    function()
      -- The daemon names 20 files and counts the rest: a buffer of one not named is checked too
      -- (a file outside the team folder here, so that nothing is pushed).
      local buf = stale_buffer('notes.txt')
      require('memoryd.reload').on_note({
        method = 'team/synced',
        params = { repo = 'acme/widgets', pushed = 0, pulled = 21, paths = { team_dir .. '/other.md' }, more = 20 },
      })
      wait_text(buf, 'second', 'the buffer of a file the note did not name')
    end,
  },
  {
    'a note naming more files than are read checks every buffer',
    function()
      -- Found in review: the paths past the 20 read were dropped, though more said 0 (a
      -- daemon naming more than this one): the 21st file's buffer kept its old text.
      local buf, notes = stale_buffer('notes21.txt')
      local paths = {}
      for i = 1, 20 do
        paths[i] = team_dir .. ('/other%d.md'):format(i)
      end
      paths[21] = notes
      require('memoryd.reload').on_note({
        method = 'team/synced',
        params = { repo = 'acme/widgets', pushed = 0, pulled = 21, paths = paths, more = 0 },
      })
      wait_text(buf, 'second', 'the buffer of the 21st file named')
    end,
  },
})
