-- For bench/bench_editors.py: time get_context round trips through the plugin's connection
-- (warm, one call at a time) and the whole :MemorydRules path (request and drawing the view).
-- Env: MEMORYD_NVIM_PLUGIN, MEMORYD_SOCKET, MEMORYD_BENCH_CWD, MEMORYD_BENCH_TOUCHED (a file),
-- MEMORYD_BENCH_RUNS, MEMORYD_TEST_RESULT (where the timings go, in milliseconds).
local plugin = os.getenv('MEMORYD_NVIM_PLUGIN')
vim.opt.rtp:prepend(plugin)
vim.cmd('runtime plugin/memoryd.lua')
local memoryd = require('memoryd')
local ui = require('memoryd.ui')
local uv = vim.uv or vim.loop

memoryd.setup({ notifications = { enabled = false }, timeout_ms = 30000 })
local cwd = os.getenv('MEMORYD_BENCH_CWD')
local touched = os.getenv('MEMORYD_BENCH_TOUCHED')
local runs = tonumber(os.getenv('MEMORYD_BENCH_RUNS'))
local params = { cwd = cwd, touched_paths = { touched } }
local client = memoryd.client()

local function round_trip()
  local done, failed = false, nil
  local t0 = uv.hrtime()
  client:request('get_context', params, function(err)
    done, failed = true, err
  end)
  vim.wait(30000, function()
    return done
  end, 0)
  assert(done and not failed, 'get_context failed: ' .. vim.inspect(failed))
  return (uv.hrtime() - t0) / 1e6
end

local function rules_view()
  local buf = ui.existing('rules')
  if buf then
    ui.render(buf, {})
  end
  local t0 = uv.hrtime()
  vim.cmd('MemorydRules')
  vim.wait(30000, function()
    local b = ui.existing('rules')
    return b ~= nil and #vim.api.nvim_buf_get_lines(b, 0, -1, false) > 3
  end, 0)
  return (uv.hrtime() - t0) / 1e6
end

round_trip() -- connect and warm the daemon's cache
vim.cmd('edit ' .. vim.fn.fnameescape(touched))
local timings = { round_trip = {}, rules_view = {} }
for _ = 1, runs do
  table.insert(timings.round_trip, round_trip())
end
for _ = 1, math.max(1, math.floor(runs / 5)) do
  vim.cmd('silent! only')
  vim.cmd('edit ' .. vim.fn.fnameescape(touched))
  table.insert(timings.rules_view, rules_view())
end
local f = assert(io.open(os.getenv('MEMORYD_TEST_RESULT'), 'w'))
f:write(vim.json.encode(timings))
f:close()
vim.cmd('qa!')
