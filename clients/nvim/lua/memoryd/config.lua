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

local function positive(value)
  return type(value) == 'number' and value > 0
end

local function list_of_strings(value)
  if type(value) ~= 'table' then
    return false
  end
  for i, item in ipairs(value) do
    if type(item) ~= 'string' then
      return false, ('item %d is a %s'):format(i, type(item))
    end
  end
  return #value == vim.tbl_count(value), 'a list of event names'
end

local OPEN = { split = true, vsplit = true, tab = true, current = true }

-- Check every option (a clear message naming the one that is wrong) before anything uses
-- them; vim.validate's table form, which every Neovim from 0.7 takes.
local function validate(merged)
  local ok, err = pcall(vim.validate, {
    socket = { merged.socket, 'string', true },
    memctl = {
      merged.memctl,
      function(v)
        return type(v) == 'string' or (type(v) == 'table' and #v > 0 and list_of_strings(v))
      end,
      'a command: a string or a list of strings',
    },
    timeout_ms = { merged.timeout_ms, positive, 'a number of milliseconds over 0' },
    recall_timeout_ms = { merged.recall_timeout_ms, positive, 'a number of milliseconds over 0' },
    line_cap = { merged.line_cap, positive, 'a number of bytes over 0' },
    backoff_min_ms = { merged.backoff_min_ms, positive, 'a number of milliseconds over 0' },
    backoff_max_ms = { merged.backoff_max_ms, positive, 'a number of milliseconds over 0' },
    offer_start = { merged.offer_start, 'boolean' },
    open = {
      merged.open,
      function(v)
        return OPEN[v] ~= nil
      end,
      "'split', 'vsplit', 'tab' or 'current'",
    },
    recall_limit = {
      merged.recall_limit,
      function(v)
        return type(v) == 'number' and v >= 1 and v <= 5 and v == math.floor(v)
      end,
      'a whole number from 1 to 5',
    },
    status_interval_ms = {
      merged.status_interval_ms,
      function(v)
        return type(v) == 'number' and v >= 0
      end,
      'a number of milliseconds, 0 or more',
    },
    ['notifications.enabled'] = { merged.notifications.enabled, 'boolean' },
    ['notifications.events'] = { merged.notifications.events, list_of_strings, 'a list of event names' },
    ['notifications.burst'] = { merged.notifications.burst, positive, 'a number over 0' },
    ['notifications.window_ms'] = { merged.notifications.window_ms, positive, 'a number of milliseconds over 0' },
  })
  if not ok then
    error('memoryd.setup: ' .. tostring(err):gsub('^.-:%d+: ', ''), 0)
  end
end

-- The options merged over the defaults, checked. notifications = false (or true) is short for
-- notifications = {enabled = false} (or true). Raises 'memoryd.setup: <option>: expected …'.
function M.merge(opts)
  opts = opts or {}
  if type(opts) ~= 'table' then
    error(('memoryd.setup: expected a table of options, got %s'):format(type(opts)), 0)
  end
  opts = vim.deepcopy(opts)
  if type(opts.notifications) == 'boolean' then
    opts.notifications = { enabled = opts.notifications }
  elseif opts.notifications ~= nil and type(opts.notifications) ~= 'table' then
    error(
      ('memoryd.setup: notifications: expected a table or a boolean, got %s'):format(type(opts.notifications)),
      0
    )
  end
  local merged = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts)
  -- Lists replace the default, never merge with it index by index.
  if type(opts.notifications) == 'table' and opts.notifications.events ~= nil then
    merged.notifications.events = opts.notifications.events
  end
  if opts.memctl ~= nil then
    merged.memctl = opts.memctl
  end
  validate(merged)
  return merged
end

return M
