-- Against the real daemon ($MEMORYD_SOCKET, a fake model scripted by test_nvim.py to edit the
-- MagicDoc): files the daemon rewrites while they are open (a MagicDoc's update, a memory
-- saved by another client) show their new text in unmodified buffers; a buffer with the
-- user's unsaved edits keeps them. Before, the buffers kept the old text until :checktime.
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')
local memoryd = T.setup_showing_worker_errors_only()

local repo = T.env('MEMORYD_TEST_REPO')
local doc = T.env('MEMORYD_TEST_DOC')
local memory_dir = T.env('MEMORYD_TEST_MEMORY_DIR')

local edit, text, wait_text = T.edit, T.buf_text, T.wait_buf_text

-- memory.write of a project memory; file names the one to rewrite. Returns its path.
local function write_memory(name, body, file)
  local reply = T.call('memory.write', {
    cwd = repo,
    type = 'project',
    name = name,
    description = 'deploys go out on ' .. body,
    body = body,
    file = file,
  })
  T.truthy(type(reply) == 'table' and reply.path, 'the written path: ' .. vim.inspect(reply))
  return reply.path
end

T.run({
  {
    'the daemon subscribes to the events naming a rewritten file, whatever notifications.events says',
    function()
      T.wait('the subscription', function()
        return vim.deep_equal(memoryd.client().events, {
          'magicdoc/updated',
          'memory/saved',
          'session/summary_updated',
          'team/conflict',
          'team/synced',
          'worker/error',
        })
      end)
    end,
  },
  {
    'a MagicDoc open in a buffer shows what the background update wrote',
    function()
      local buf = edit(doc)
      T.eq(false, text(buf):find('make deploy-prod', 1, true) ~= nil, 'the prod line before the update')
      local tools_turn = {
        { role = 'user', content = 'deploy to prod?' },
        {
          role = 'assistant',
          content = { { type = 'tool_use', id = 't1', name = 'Read', input = { file_path = doc } } },
        },
      }
      -- A turn that read the doc registers it; the next, a natural break, updates it.
      T.call('after_turn', { session_id = 's1', cwd = repo, messages = tools_turn, read_paths = { doc } })
      local reply = T.call('after_turn', {
        session_id = 's1',
        cwd = repo,
        messages = {
          { role = 'user', content = 'We added a prod environment: `make deploy-prod`.' },
          { role = 'assistant', content = { { type = 'text', text = 'Noted.' } } },
        },
      })
      T.eq(1, reply.scheduled.magic_docs, 'MagicDocs scheduled')
      wait_text(buf, '- prod: `make deploy-prod`', 'the MagicDoc buffer')
      T.eq(false, vim.bo[buf].modified, 'the buffer modified after the reload')
      T.eq(nil, T.message_matching('magic doc updated'), 'a message for an event not in notifications.events')
    end,
  },
  {
    'a memory and MEMORY.md open unmodified show a save by another client; one with unsaved edits keeps them',
    function()
      vim.o.hidden = true -- the buffers stay loaded when another is edited (0.9's default)
      local deploys = write_memory('Deploys', 'Thursdays')
      local memory = edit(deploys)
      local freeze = write_memory('Freeze', 'never in December')
      local edited = edit(freeze)
      vim.api.nvim_buf_set_lines(edited, -1, -1, false, { 'my unsaved line' })
      local index = edit(memory_dir .. '/MEMORY.md')
      T.eq(false, text(index):find('Release', 1, true) ~= nil, 'the Release line before its save')
      write_memory('Deploys', 'Thursdays and Fridays after QA', vim.fn.fnamemodify(deploys, ':t'))
      wait_text(memory, 'Thursdays and Fridays after QA', 'the memory buffer')
      write_memory('Release', 'mondays')
      wait_text(index, 'Release', 'the MEMORY.md buffer')
      write_memory('Freeze', 'never in the last week of December', vim.fn.fnamemodify(freeze, ':t'))
      -- That save's notification has come (and been acted on) once the index shows a later one.
      write_memory('Hotfix', 'any day')
      wait_text(index, 'Hotfix', 'the MEMORY.md buffer')
      T.truthy(text(edited):find('my unsaved line', 1, true), 'the unsaved edit: ' .. text(edited))
      T.truthy(vim.bo[edited].modified, 'the edited buffer still modified')
      T.eq(nil, T.message_matching('memory saved'), 'a message for an event not in notifications.events')
    end,
  },
  {
    'a file the daemon names through a link is the buffer of the file it leads to',
    function()
      -- Neovim names a buffer opened through a linked folder by the real path; the daemon
      -- names files under $HOME as it is written, which may be a link.
      local link = vim.fn.fnamemodify(repo, ':h') .. '/widgets-link'
      assert((vim.uv or vim.loop).fs_symlink(repo, link))
      local buf = edit(repo .. '/src/api/users.py')
      local reload = require('memoryd.reload')
      T.eq({ buf }, reload.buffers_of({ [link .. '/src/api/users.py'] = true }), 'the buffers of the linked name')
      T.eq({}, reload.buffers_of({ [link .. '/src/web/users.py'] = true }), 'the buffers of another file')
      vim.api.nvim_buf_set_lines(buf, -1, -1, false, { 'unsaved' })
      T.eq({}, reload.buffers_of({ [repo .. '/src/api/users.py'] = true }), 'the buffers with unsaved changes')
      vim.cmd('edit!')
    end,
  },
  {
    "a buffer with 'autoread' off is not checked: :checktime would stop the editor to ask",
    function()
      local deploys = write_memory('Deploys', 'Thursdays only')
      local buf = edit(deploys)
      vim.cmd('setlocal noautoread')
      edit(repo .. '/src/web/app.js')
      local reload = require('memoryd.reload')
      T.eq({}, reload.buffers_of({ [deploys] = true }), 'the buffers checked')
      write_memory('Deploys', 'Thursdays, never Fridays', vim.fn.fnamemodify(deploys, ':t'))
      -- That save's notification has come (and been acted on) once the index shows a later one.
      local index = edit(memory_dir .. '/MEMORY.md')
      write_memory('Rollback', 'always ready')
      wait_text(index, 'Rollback', 'the MEMORY.md buffer')
      T.truthy(text(buf):find('Thursdays only', 1, true), 'the text of the buffer: ' .. text(buf))
    end,
  },
})
