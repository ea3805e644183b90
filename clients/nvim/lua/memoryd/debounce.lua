-- A refresh asked for again and again (saves of instruction files): run() `delay` ms after the
-- last ask, and at the latest `max_wait` ms after the first ask not served yet. A plain debounce
-- was pushed back for as long as the asks kept coming closer than its delay (an autosave
-- writing a rule file every 100 ms): the view never refreshed until they stopped.
local uv = vim.uv or vim.loop

local M = { MAX_WAIT_MS = 1000 }

local function now_ms()
  return uv.hrtime() / 1e6
end

-- run(): called on the main loop (vim.schedule), never in a libuv callback.
function M.new(run, max_wait)
  local self = { timer = nil, first = nil }
  max_wait = max_wait or M.MAX_WAIT_MS

  function self.ask(delay)
    local now = now_ms()
    self.first = self.first or now
    local wait = math.max(0, math.min(delay, self.first + max_wait - now))
    if not self.timer or self.timer:is_closing() then
      self.timer = uv.new_timer()
    end
    self.timer:stop()
    self.timer:start(math.floor(wait), 0, function()
      self.first = nil
      vim.schedule(run)
    end)
  end

  -- Forget what was asked (the timer is kept for the next ask).
  function self.cancel()
    if self.timer and not self.timer:is_closing() then
      self.timer:stop()
    end
    self.first = nil
  end

  return self
end

return M
