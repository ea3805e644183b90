-- A memory edited in place, against the real daemon ($MEMORYD_SOCKET): the text a save
-- replaces is kept in history (memory.snapshot) and MEMORY.md is brought in step after it
-- (memory.reconcile); with the daemon gone the save still happens and says what was not kept.
-- Before, a save from :MemorydMemories kept the replaced text nowhere.
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')
local memoryd = require('memoryd')
local files = require('memoryd.memory_files')

memoryd.setup({ notifications = false, timeout_ms = T.TIMEOUT_MS })
-- A :w waits for the snapshot at most SNAPSHOT_WAIT_MS (1.2 s) and then goes on without it:
-- a daemon slowed by a loaded machine answered later and the version was missing. The bound
-- itself is faults_spec's (a snapshot never answered); here the real daemon is waited for.
files.SNAPSHOT_WAIT_MS = T.TIMEOUT_MS

local repo = T.env('MEMORYD_TEST_REPO')
local memory_dir = T.env('MEMORYD_TEST_MEMORY_DIR')
local memory = memory_dir .. '/project_deploys.md'
local by_hand = memory_dir .. '/project_by_hand.md'

local function versions()
  return T.call('memory.history', { cwd = repo, path = memory }).versions
end

local function open_from_the_list()
  vim.cmd('edit ' .. vim.fn.fnameescape(repo .. '/CLAUDE.md'))
  vim.cmd('MemorydMemories')
  T.wait_view('memories', 'Deploys')
  T.press_on('memories', 'Deploys', '<CR>')
  T.wait('the memory in a window', function()
    return vim.api.nvim_buf_get_name(0) == memory
  end)
end

T.run({
  {
    'a save keeps the text it replaces in history, and MEMORY.md is brought in step',
    function()
      T.eq(0, #versions(), 'versions before the edit')
      open_from_the_list()
      -- A file made outside memoryd while the list is open: no index line yet.
      T.write(by_hand, '---\nname: By hand\ndescription: made by hand\ntype: project\n---\nx\n')
      T.has_not(T.file(memory_dir .. '/MEMORY.md') or '', 'project_by_hand.md', 'MEMORY.md before')
      vim.api.nvim_buf_set_lines(0, -1, -1, false, { 'Not on public holidays.' })
      vim.cmd('write')
      T.has(T.file(memory), 'Not on public holidays.', 'the file')
      local kept = versions()
      T.eq(1, #kept, 'versions after the save')
      T.eq('edit', kept[1].reason, 'why it was kept')
      -- The reconcile after the save: a file made outside memoryd gets its index line.
      T.wait('MEMORY.md to name the file made by hand', function()
        return (T.file(memory_dir .. '/MEMORY.md') or ''):find('project_by_hand.md', 1, true) ~= nil
      end)
      T.eq(0, T.count_messages('not kept'), 'warnings')
    end,
  },
  {
    'a write of an unchanged buffer keeps nothing more',
    function()
      open_from_the_list()
      vim.cmd('write')
      T.eq(1, #versions(), 'versions')
    end,
  },
  {
    'an older daemon (no memory.snapshot) is named, not a raw error',
    function()
      local why = files.snapshot_problem({ code = -32601, message = 'method not found: memory.snapshot' })
      T.has(why, 'older than this plugin', 'the reason')
      T.has(why, 'memctl restart', 'the reason')
      T.eq(nil, files.snapshot_problem({ code = -32001, message = 'no memory file' }), 'a new file')
    end,
  },
  {
    'with the daemon gone the save happens and says the replaced text was not kept',
    function()
      open_from_the_list()
      memoryd.setup({ socket = vim.fn.tempname() .. '.sock', notifications = false, offer_start = true })
      vim.api.nvim_buf_set_lines(0, -1, -1, false, { 'Written while memoryd was down.' })
      vim.cmd('write')
      T.has(T.file(memory), 'Written while memoryd was down.', 'the file')
      T.wait('the warning', function()
        return T.count_messages('not kept in history: memoryd is not running') == 1
      end)
      T.eq(0, #T.prompts, 'questions asked during the write')
    end,
  },
})
