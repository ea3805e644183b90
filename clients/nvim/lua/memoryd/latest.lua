-- The newest answer wins. Requests on one connection are answered concurrently
-- (docs/protocol.md), so a slow one (a project loaded for the first time) may be answered after
-- a newer one: drawn then, it put the older state back (the rules of the buffer left behind).
local M = {}

function M.new()
  local self = { asked = 0, shown = 0 }

  -- A ticket for a request about to be sent.
  function self.ask()
    self.asked = self.asked + 1
    return self.asked
  end

  -- Whether the answer to `ticket` is to be shown: not when a newer one was shown already.
  function self.take(ticket)
    if ticket < self.shown then
      return false
    end
    self.shown = ticket
    return true
  end

  return self
end

return M
