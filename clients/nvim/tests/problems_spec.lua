-- The daemon's diagnostics in the plugin ($MEMORYD_SOCKET: a real daemon whose team URL has no
-- token, whose user settings file is broken JSON ($MEMORYD_TEST_SETTINGS) and whose model key
-- the provider refused): :MemorydStatus, :checkhealth memoryd and the status line say what is
-- wrong and what to change. They said `model: claude-… (small: …)`, `team_sync on`, nothing more.
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')
local memoryd = require('memoryd')

memoryd.setup({ memctl = T.env('MEMORYD_TEST_MEMCTL'), status_interval_ms = 0, timeout_ms = T.TIMEOUT_MS })
local settings = T.env('MEMORYD_TEST_SETTINGS')
local TEAM = 'MEMORYD_TEAM_URL is set but MEMORYD_TEAM_TOKEN is not'
local REFUSED = 'the model key was refused: '

T.run({
  {
    ':MemorydStatus says why the model fails on its line, and lists each problem with its fix',
    function()
      vim.cmd('MemorydStatus')
      T.wait_view('status', 'Problems')
      local lines = T.lines('status')
      local model = T.find('status', 'model: ')
      T.truthy(model, 'a model line')
      T.has(lines[model], '— but ' .. REFUSED)
      T.has(lines[model], 'check ANTHROPIC_API_KEY')
      local at = T.find('status', 'Problems')
      T.has(lines[at + 1], '  ! ' .. TEAM)
      T.has(lines[at + 1], 'memoryd-team token create')
      T.has(lines[at + 2], '  ! user settings file ' .. settings .. ': invalid JSON')
      T.eq('', lines[at + 3], 'two problems: the model one is on the model line only')
    end,
  },
  {
    ':checkhealth memoryd warns of the model problem and each setup problem',
    function()
      vim.cmd('checkhealth memoryd')
      local text = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
      T.has(text, 'is configured, but its calls fail: ' .. REFUSED)
      T.has(text, TEAM)
      local _, times = text:gsub(vim.pesc(TEAM), '')
      T.eq(1, times, 'the team problem said once (on the team line when the daemon says team sync is off)')
      T.has(text, 'user settings file ' .. settings)
      T.has_not(text, 'finds nothing wrong')
    end,
  },
  {
    'the status line counts the problems',
    function()
      memoryd.refresh_status(true)
      T.wait('the status line', function()
        return memoryd.status_text():find('3 problems', 1, true) ~= nil
      end)
      -- (team on or off: the daemon's word for a URL without a token has changed)
      local line = memoryd.status_text()
      T.truthy(line:match('^memoryd up · model · team o[nf]f? · 3 problems$'), line)
    end,
  },
  {
    'a daemon older than the fields shows as before; text is one line each',
    function()
      local format = require('memoryd.format')
      local status = require('memoryd.views.status')
      local older = { version = '0.0.9', socket = '/s', model = { configured = true, model = 'm', small_model = 's' } }
      local text = table.concat(status.render(older, nil, nil, '/s', {}), '\n')
      T.has(text, 'model: m (small: s)\n')
      T.has_not(text, 'Problems')
      T.eq(0, #format.problems({ problems = vim.NIL }))
      T.eq(nil, format.model_problem({ model = { problem = vim.NIL } }))
      T.eq({ 'a b c' }, format.problems({ problems = { 'a\nb\27c', 7, '' } }))
      T.eq({}, format.problems({ model = { reason = 'r' }, problems = { 'r' } }), 'the model line says it')
      -- an env file of 30,000 pasted shell lines is 30,000 problems: the first 20, then how many more
      local many = {}
      for n = 1, 30000 do
        many[n] = 'env line ' .. n .. ' is not a NAME=value line'
      end
      local shown = format.problems({ problems = many })
      T.eq(21, #shown)
      T.eq('env line 20 is not a NAME=value line', shown[20])
      T.eq('… and 29980 more (`memctl status --json` lists them all)', shown[21])
    end,
  },
})
