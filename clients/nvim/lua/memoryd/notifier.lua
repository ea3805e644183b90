-- Daemon notifications as vim.notify messages, rate-limited: at most `burst` messages per
-- window; the rest are counted and reported as one summary line when the window ends, so a
-- storm of thousands costs a counter increment each and never floods the screen.
local uv = vim.uv or vim.loop
local format = require('memoryd.format')

local Notifier = {}
Notifier.__index = Notifier

-- opts: burst, window_ms, notify (defaults to vim.notify), prefix
function Notifier.new(opts)
  local self = setmetatable({}, Notifier)
  self.burst = opts.burst or 3
  self.window_ms = opts.window_ms or 2000
  self.notify = opts.notify or function(text, level)
    vim.notify(text, level, { title = 'memoryd' })
  end
  self.prefix = opts.prefix or 'memoryd: '
  self.shown = 0
  self.suppressed = {} -- event -> count
  self.suppressed_total = 0
  self.timer = nil
  return self
end

function Notifier:_open_window()
  self.timer = uv.new_timer()
  self.timer:start(self.window_ms, 0, function()
    vim.schedule(function()
      self:_close_window()
    end)
  end)
end

function Notifier:_close_window()
  if self.timer then
    self.timer:stop()
    self.timer:close()
    self.timer = nil
  end
  local total = self.suppressed_total
  self.shown = 0
  if total > 0 then
    local parts = {}
    for event, n in pairs(self.suppressed) do
      parts[#parts + 1] = ('%s ×%d'):format(event, n)
    end
    table.sort(parts)
    self.suppressed, self.suppressed_total = {}, 0
    self:_emit(('%d more notifications (%s)'):format(total, table.concat(parts, ', ')), vim.log.levels.INFO)
  end
end

function Notifier:_emit(text, level)
  if not self.timer then
    self:_open_window()
  end
  self.shown = self.shown + 1
  self.notify(self.prefix .. format.one_line(text, 300), level)
end

-- key: what the message is about (an event name) for the summary; text: one line.
function Notifier:push(key, text, level)
  if self.shown >= self.burst then
    self.suppressed[key] = (self.suppressed[key] or 0) + 1
    self.suppressed_total = self.suppressed_total + 1
    return
  end
  self:_emit(text, level)
end

function Notifier:push_note(note)
  local text, level = format.describe(note)
  self:push(tostring(note.method or '?'), text, level)
end

return Notifier
