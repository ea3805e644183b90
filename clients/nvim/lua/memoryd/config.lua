-- The options setup() accepts, with their defaults (documented in :help memoryd-setup).
local M = {}

M.defaults = {
  -- Socket path; nil follows memctl's rule (:help memoryd-socket).
  socket = nil,
  -- How to run memctl for "start the daemon" (a string or a list).
  memctl = 'memctl',
  -- Per-call timeout, and a longer one for recall (a model selector can take seconds).
  timeout_ms = 5000,
  recall_timeout_ms = 15000,
  -- Longest reply line accepted; a longer one drops the connection with a clear message.
  line_cap = 16 * 1024 * 1024,
  -- Reconnect backoff after the daemon goes away: doubles from min to max.
  backoff_min_ms = 500,
  backoff_max_ms = 30000,
  -- Offer to run `memctl start` when a command finds the daemon down.
  offer_start = true,
  -- How the views open: 'split', 'vsplit', 'tab' or 'current'.
  open = 'split',
  recall_limit = 5,
  -- Refresh the status-line state at most this often.
  status_interval_ms = 10000,
  notifications = {
    enabled = true,
    events = {
      'memory/saved',
      'session/summary_updated',
      'team/synced',
      'team/secret_blocked',
      'team/conflict',
      'worker/error',
    },
    -- At most `burst` messages per window; the rest become one summary line.
    burst = 3,
    window_ms = 2000,
  },
}

function M.merge(opts)
  opts = opts or {}
  local merged = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts)
  -- Lists replace the default, never merge with it index by index.
  if type(opts.notifications) == 'table' and opts.notifications.events ~= nil then
    merged.notifications.events = opts.notifications.events
  end
  if opts.memctl ~= nil then
    merged.memctl = opts.memctl
  end
  return merged
end

return M
