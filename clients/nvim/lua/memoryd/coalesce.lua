-- One background refresh of a view at a time. Asks that come while one waits for the daemon
-- make one more after it, not one each: a flood of notifications (1,000 context/changed in a
-- second), or a daemon slow to answer, queued a request per notification and, at each one's
-- timeout, an error message. The last ask is always answered by a refresh started after it.
local M = {}

-- run(done): start the refresh; it calls done() once it has finished, answered or not.
function M.new(run)
  local self = { running = false, again = false }
  function self.ask()
    if self.running then
      self.again = true
      return
    end
    self.running = true
    run(function()
      self.running = false
      if self.again then
        self.again = false
        self.ask()
      end
    end)
  end
  return self
end

return M
