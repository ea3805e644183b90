-- :MemorydRemember in a project with team sync (the daemon has MEMORYD_TEAM_URL and the repo
-- has a remote): the personal/team choice, team: true, the daemon's secret warning, and the
-- team state in the status view and status line.
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')
local memoryd = require('memoryd')

memoryd.setup({ memctl = T.env('MEMORYD_TEST_MEMCTL'), status_interval_ms = 0, timeout_ms = T.TIMEOUT_MS })
local repo = T.env('MEMORYD_TEST_REPO')

local function edit_file()
  vim.cmd('edit ' .. vim.fn.fnameescape(repo .. '/src/api/users.py'))
end

T.run({
  {
    'team memory: the scope question, then team: true',
    function()
      edit_file()
      T.answers = { 4, 'Incident runbook', 2 } -- reference; the name; the team
      vim.cmd('MemorydRemember The runbook is the wiki page Ops/On-call')
      T.wait('the saved message', function()
        return T.message_matching('saved team memory reference_incident_runbook.md')
      end)
      T.eq({ 'personal', 'team' }, T.prompts[3].items, 'scope choices')
      T.eq('Save for', T.prompts[3].prompt, 'scope prompt')
    end,
  },
  {
    'a typed line as a personal memory in the same project',
    function()
      edit_file()
      T.answers = { 'I review pull requests in the morning', 1, 'Personal note', 1 }
      vim.cmd('MemorydRemember')
      T.wait('the saved message', function()
        return T.message_matching('saved memory user_personal_note.md')
      end)
      T.eq('Remember: ', T.prompts[1].prompt, 'the line was asked for')
    end,
  },
  {
    'a secret in the text: saved, with the daemon warning shown',
    function()
      edit_file()
      T.answers = { 3, 'Deploy token', 1 }
      vim.cmd('MemorydRemember deploy with token ghp_' .. string.rep('a1B2c3D4e5', 4):sub(1, 36))
      T.wait('the warning', function()
        local m = T.message_matching('looks like it holds a secret')
        return m and m.level == vim.log.levels.WARN
      end)
      T.truthy(T.message_matching('saved memory project_deploy_token.md'), 'saved')
    end,
  },
  {
    "deleting a synced team memory: the daemon's refusal, as it says it, on one line and in the view",
    function()
      edit_file()
      -- Refused only once the memory is on the team server: wait for its push.
      T.wait('the runbook pushed', function()
        local status = T.call('team.status', { cwd = repo })
        return status and status.last_result and status.last_result.ok and #status.pending == 0
      end, 60000)
      vim.cmd('MemorydMemories')
      T.wait_view('memories', 'Incident runbook')
      T.answers = { 1 } -- yes, delete
      T.press_on('memories', 'Incident runbook', 'd')
      T.wait('the refusal', function()
        return T.message_matching('not deleted: ')
      end)
      local m = T.message_matching('not deleted: ')
      T.truthy(
        m.text:match('^memoryd: not deleted: /.+/team/reference_incident_runbook%.md is a team memory, and deletions do not reach the team server: the next pull would bring it back'),
        'the daemon\'s words: ' .. m.text
      )
      T.has(m.text, 'restore an older version on the server (`memoryd-team restore`)')
      T.eq(nil, m.text:find('[\r\n]'), 'one line')
      T.eq(nil, m.text:find('failed', 1, true), 'no generic failure')
      T.eq(vim.log.levels.WARN, m.level, 'a warning: nothing broke')
      -- The command line cuts a long message: the view says it whole, wrapped.
      T.wait_view('memories', 'Not deleted: Incident runbook')
      local view = T.text('memories')
      T.has((view:gsub('\n  ', ' ')), 'deletions do not reach the team server: the next pull would bring it back')
      T.has(view, 'team/reference', 'still listed')
      for _, line in ipairs(T.lines('memories')) do
        if line:find('team server', 1, true) then
          T.truthy(vim.fn.strchars(line) <= vim.api.nvim_win_get_width(vim.fn.bufwinid(require('memoryd.ui').existing('memories'))), 'fits: ' .. line)
        end
      end
      -- r (a refresh the user asks for) lets it go.
      T.press_on('memories', 'Incident runbook', 'r')
      T.wait('the notice to go', function()
        return not T.text('memories'):find('Not deleted', 1, true)
      end)
    end,
  },
  {
    'status view and status line show team sync',
    function()
      edit_file()
      vim.cmd('MemorydStatus')
      T.wait_view('status', '  repo acme/widgets on ' .. T.env('MEMORYD_TEAM_URL'))
      memoryd.refresh_status(true)
      T.wait('the status line', function()
        return memoryd.statusline() == 'memoryd up · no model · team on'
      end)
    end,
  },
})
