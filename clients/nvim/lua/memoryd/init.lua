-- memoryd for Neovim: the shared connection, the daemon-down handling, notifications and the
-- status line. The views (rules, recall, remember, memories, status) live in memoryd.views.*.
local config = require('memoryd.config')
local socket_path = require('memoryd.socket_path')
local Client = require('memoryd.rpc')
local Notifier = require('memoryd.notifier')
local format = require('memoryd.format')

local M = {}

M.config = config.merge()
M.state = {
  up = nil, -- nil: not asked yet
  status = nil, -- the last `status` reply
  status_at = 0,
  status_inflight = false,
  outage_reported = false, -- the "daemon went away" message was shown for this outage
  start_offered = false, -- the "start it?" question was asked for this outage
  last_error = nil,
}
M.listeners = {} -- event name -> {fn, ...}; views refresh on notifications through these
-- Open buffers of files the daemon rewrote are checked (reload.lua). Listed here without
-- connecting: the subscription takes them in whenever the connection is made.
local reload = require('memoryd.reload')
for _, event in ipairs(reload.EVENTS) do
  M.listeners[event] = { reload.on_note }
end

local client = nil
local notifier = nil

local function now_ms()
  return (vim.uv or vim.loop).now()
end

local warned = {} -- the socket rule's warnings already shown: each once a session

-- The socket path in use, the rule that chose it, and why $XDG_RUNTIME_DIR was passed over
-- (shown once as a warning, as memctl and the daemon print it once on stderr).
function M.socket_path()
  if M.config.socket and M.config.socket ~= '' then
    return socket_path.normalize(socket_path.expand_option(M.config.socket)), 'setup({socket = …})'
  end
  local path, rule, warning = socket_path.resolve()
  if warning and not warned[warning] then
    warned[warning] = true
    if vim.in_fast_event() then -- a luv callback cannot echo
      vim.schedule(function()
        M.message(warning, vim.log.levels.WARN)
      end)
    else
      M.message(warning, vim.log.levels.WARN)
    end
  end
  return path, rule, warning
end

M.recent = {} -- the last messages in full, newest last (shown by :MemorydStatus)
local RECENT_MAX = 50

-- Is vim.notify still Neovim's own (an echo on the command line), not a popup plugin's?
local function builtin_notify()
  local info = debug.getinfo(vim.notify, 'S')
  return info ~= nil and type(info.source) == 'string' and info.source:find('vim/_editor', 1, true) ~= nil
end

-- Every message of the plugin goes out here. Neovim's own vim.notify echoes, and an echo
-- longer than the command line stops the editor at a hit-enter prompt: that is modal, so the
-- line is cut to fit (the full text stays in M.recent, listed by :MemorydStatus).
function M.notify(text, level)
  text = tostring(text):gsub('%z', '^@') -- a NUL must not reach vim.fn (E976) nor the echo
  M.recent[#M.recent + 1] = os.date('%H:%M:%S ') .. text
  if #M.recent > RECENT_MAX then
    table.remove(M.recent, 1)
  end
  if builtin_notify() then
    -- An echo over two lines stops at the hit-enter prompt as surely as a long one: a line
    -- break from the daemon (a file name holding one) becomes a space.
    text = format.clean(text)
    local room = vim.v.echospace
    if type(room) == 'number' and room > 10 and vim.fn.strdisplaywidth(text) > room then
      text = vim.fn.strcharpart(text, 0, room - 1) .. '…'
      while vim.fn.strdisplaywidth(text) > room do
        text = vim.fn.strcharpart(text, 0, vim.fn.strchars(text) - 2) .. '…'
      end
    end
  end
  vim.notify(text, level or vim.log.levels.INFO, { title = 'memoryd' })
end

local function message(text, level)
  M.notify('memoryd: ' .. text, level)
end
M.message = message

local function on_notifications(notes)
  for _, note in ipairs(notes) do
    for _, fn in ipairs(M.listeners[note.method] or {}) do
      -- One failing listener must not stop the others, nor go unnoticed.
      local ok, err = pcall(fn, note)
      if not ok then
        message(
          ('a %s listener failed: %s'):format(note.method, format.one_line(tostring(err), 200)),
          vim.log.levels.ERROR
        )
      end
    end
  end
  if not M.config.notifications.enabled then
    return
  end
  -- The connection also hears the events only a view listens to (memory/saved for the
  -- memories view): messages are shown for the configured events alone.
  local shown = {}
  for _, event in ipairs(M.config.notifications.events) do
    shown[event] = true
  end
  for _, note in ipairs(notes) do
    if shown[note.method] then
      notifier:push_note(note)
    end
  end
end

-- The events the connection subscribes to: the configured ones (when notifications are on)
-- and every event a listener waits for (reload.lua's always), sorted, once each.
function M.wanted_events()
  local set = {}
  if M.config.notifications.enabled then
    for _, event in ipairs(M.config.notifications.events) do
      set[event] = true
    end
  end
  for event, fns in pairs(M.listeners) do
    if #fns > 0 then
      set[event] = true
    end
  end
  local events = vim.tbl_keys(set)
  table.sort(events)
  return events
end

-- Subscribe, or widen the subscription, when the wanted events are not those subscribed.
local function sync_subscription(c)
  local wanted = M.wanted_events()
  if not vim.deep_equal(wanted, c.events) then
    c:subscribe(wanted)
  end
end

-- Redraw the status lines only when their text changes: a redraw runs statusline(), which
-- may ask for status again, so redrawing on every answer made status_interval_ms = 0 a busy
-- loop of requests between the editor and the daemon.
local function redraw_if_changed(shown)
  if M.status_text() ~= shown then
    vim.cmd('redrawstatus!')
  end
end

local function on_state(state, err)
  if state == 'up' then
    local was_down = M.state.up == false
    local shown = M.status_text()
    M.state.up = true
    M.state.start_offered = false
    if was_down and M.state.outage_reported then
      message('connected to memoryd again')
    end
    M.state.outage_reported = false
    M.refresh_status(true)
    redraw_if_changed(shown)
    if client then
      sync_subscription(client) -- all the events again, if an older daemon had some refused
    end
  elseif state == 'down' then
    local was_up = M.state.up == true
    local shown = M.status_text()
    M.state.up = false
    redraw_if_changed(shown)
    M.state.last_error = err
    -- One message when a running daemon goes away; the retries after it stay quiet.
    if was_up and not M.state.outage_reported then
      M.state.outage_reported = true
      message(
        ('%s — retrying in the background; :MemorydStart starts it'):format(err and err.message or 'memoryd went away'),
        vim.log.levels.WARN
      )
    end
  elseif state == 'subscribe_failed' then
    -- A daemon older than an event a view listens to (context/changed) refuses the whole set:
    -- the events it knows are asked for instead, so the others still come.
    local refused = err and err.code == -32602 and type(err.message) == 'string'
    local known = refused and err.message:match('; known: (.+)$')
    if known and client and type(client.events) == 'table' then
      local names = {}
      for name in known:gmatch('[^,%s]+') do
        names[name] = true
      end
      local kept = vim.tbl_filter(function(event)
        return names[event] == true
      end, client.events)
      if #kept < #client.events then
        client:subscribe(kept)
        return
      end
    end
    message('could not subscribe to notifications: ' .. tostring(err and err.message), vim.log.levels.WARN)
  end
end

function M.client()
  if client == nil then
    local cfg = M.config
    notifier = Notifier.new({
      burst = cfg.notifications.burst,
      window_ms = cfg.notifications.window_ms,
      notify = M.notify,
    })
    client = Client.new({
      path = M.socket_path(),
      timeout_ms = cfg.timeout_ms,
      line_cap = cfg.line_cap,
      backoff_min_ms = cfg.backoff_min_ms,
      backoff_max_ms = cfg.backoff_max_ms,
      on_state = on_state,
      on_notifications = on_notifications,
    })
    sync_subscription(client)
  end
  return client
end

-- Close the connection (the next request opens another); what was not sent yet is dropped.
function M.close()
  if client then
    client:close()
    client = nil
  end
end

function M.setup(opts)
  M.config = config.merge(opts)
  M.close()
  M.state.up, M.state.status, M.state.status_at = nil, nil, 0
  M.state.outage_reported, M.state.start_offered = false, false
  if M.config.notifications.enabled then
    M.client() -- connects and subscribes in the background
  end
end

-- Run fn(note) for each notification named event (views use it to refresh themselves).
function M.on(event, fn)
  M.listeners[event] = M.listeners[event] or {}
  table.insert(M.listeners[event], fn)
  sync_subscription(M.client())
end

local function memctl_command()
  local cmd = M.config.memctl
  if type(cmd) == 'string' then
    cmd = { cmd }
  end
  cmd = vim.deepcopy(cmd)
  vim.list_extend(cmd, { '--socket', M.socket_path(), 'start' })
  return cmd
end

-- `memctl start` in the background; cb(ok) once it has exited.
function M.start_daemon(cb)
  cb = cb or function() end
  local output = {}
  local collect = function(_, data)
    for _, line in ipairs(data or {}) do
      if line ~= '' then
        output[#output + 1] = line
      end
    end
  end
  message('starting memoryd (memctl start)…')
  local ok, job = pcall(vim.fn.jobstart, memctl_command(), {
    stdout_buffered = true,
    stderr_buffered = true,
    on_stdout = collect,
    on_stderr = collect,
    on_exit = function(_, code)
      if code == 0 then
        message(output[#output] or 'memoryd started')
        M.client():reconnect_now()
        cb(true)
      else
        message(
          ('memctl start failed (exit %d): %s'):format(code, table.concat(output, ' ')),
          vim.log.levels.ERROR
        )
        cb(false)
      end
    end,
  })
  if not ok or job <= 0 then
    message(
      ('cannot run %s: is memctl installed and on PATH? (set memctl in setup())'):format(
        table.concat(memctl_command(), ' ')
      ),
      vim.log.levels.ERROR
    )
    cb(false)
  end
end

-- The daemon is down and the user asked for something: say so once, offer to start it.
local function report_down(err, retry)
  if type(err.data) == 'table' and err.data.not_a_socket then
    -- a folder or file at the socket path: its message says what to fix; no start to offer
    message(err.message, vim.log.levels.WARN)
    M.state.outage_reported = true
    return
  end
  message(
    ('%s. Start it with :MemorydStart (runs `memctl start`).'):format(err.message),
    vim.log.levels.WARN
  )
  M.state.outage_reported = true
  if not M.config.offer_start or M.state.start_offered then
    return
  end
  M.state.start_offered = true
  vim.ui.select(
    { 'Start memoryd now (memctl start)', 'Not now' },
    { prompt = 'memoryd is not running. Start it?' },
    function(_, index)
      if index == 1 then
        M.start_daemon(function(ok)
          if ok and retry then
            retry()
          end
        end)
      end
    end
  )
end

-- Call method(params) and give cb(result) the result; errors are reported here unless
-- opts.on_error(err) handles them (return true to mark it handled).
-- opts: timeout_ms, on_error, quiet (no message), retry (run again after a start),
-- finished (called first, once the request has finished whichever way: a reply of the wrong
-- shape reaches neither cb nor on_error, and a view's coalescer waiting on those two never
-- asked again).
function M.request(method, params, cb, opts)
  opts = opts or {}
  return M.client():request(method, params, function(err, result)
    if opts.finished then
      opts.finished()
    end
    if err == nil then
      -- A reply of an unexpected shape is a message, never a Lua error in the user's face.
      -- Every method of the protocol answers with an object.
      local ok, problem = false, 'not an object: ' .. vim.inspect(result, { newline = ' ', indent = '' })
      if type(result) == 'table' then
        ok, problem = pcall(cb, result)
      end
      if not ok then
        message(
          ('could not use the reply to %s: %s'):format(method, format.one_line(tostring(problem), 200)),
          vim.log.levels.ERROR
        )
      end
      return
    end
    if opts.on_error and opts.on_error(err) then
      return
    end
    if opts.quiet then
      return
    end
    if err.code == 'down' then
      report_down(err, opts.retry)
    else
      message(('%s failed: %s%s'):format(method, err.message, format.older_daemon_hint(err)), vim.log.levels.ERROR)
    end
  end, opts.timeout_ms)
end

-- The directory and file a buffer stands for: its file's folder (the nearest existing one)
-- and the file itself; a buffer without a file stands for the working directory. So does a
-- buffer named by a URL (netrw's scp://…, fugitive://…, zipfile://…, oil://…): it has no file
-- on this disk, and walking the URL up ends at '.', which the daemon refuses as a cwd.
function M.buffer_context(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local name = vim.api.nvim_buf_get_name(bufnr)
  local buftype = vim.api.nvim_buf_get_option(bufnr, 'buftype')
  local uv = vim.uv or vim.loop
  if name == '' or buftype ~= '' or name:match('^%a[%w+.-]*://') then
    return { cwd = uv.cwd(), file = nil }
  end
  local file = vim.fn.fnamemodify(name, ':p')
  if file:sub(1, 1) ~= '/' then
    return { cwd = uv.cwd(), file = nil } -- not a path of this file system
  end
  -- A memory file opened from the memories or recall view lives in a memory folder, which as
  -- a cwd names another, empty project: the views went blank and :MemorydRemember saved into
  -- that phantom project. It is about the project it was listed for, with no touched path.
  local project = require('memoryd.memory_files').project_of(file)
  if project and vim.fn.isdirectory(project) == 1 then
    return { cwd = project, file = nil, memory = file }
  end
  local dir = vim.fn.fnamemodify(file, ':h')
  while vim.fn.isdirectory(dir) == 0 and dir ~= '/' do
    dir = vim.fn.fnamemodify(dir, ':h')
  end
  return { cwd = dir, file = file }
end

-- M.state.status is the answer to the status asked last, whoever asked (the status line's poll,
-- :MemorydStatus): they are answered concurrently, and a poll answered after a newer command
-- put the older state back until the next poll. A ticket is taken when asking.
local status_order = require('memoryd.latest').new()

function M.status_ticket()
  return status_order.ask()
end

-- Keep status as the plugin's state unless a status asked later was kept already.
function M.keep_status(ticket, status)
  if status_order.take(ticket) then
    M.state.status = status
  end
end

-- Ask for `status` in the background (at most every status_interval_ms unless forced).
function M.refresh_status(force, cb)
  if M.state.status_inflight then
    return
  end
  if not force and now_ms() - M.state.status_at < M.config.status_interval_ms then
    return
  end
  M.state.status_inflight = true
  M.state.status_at = now_ms()
  local ticket = M.status_ticket()
  M.client():request('status', nil, function(err, result)
    M.state.status_inflight = false
    local shown = M.status_text()
    if err == nil then
      M.keep_status(ticket, result)
    end
    redraw_if_changed(shown)
    if cb then
      cb(err, result)
    end
  end)
end

-- For 'statusline': never blocks, shows what is known and asks for news in the background.
function M.statusline()
  M.refresh_status(false)
  return M.status_text()
end

-- What statusline() shows, from what is known (asks nothing).
function M.status_text()
  local st = M.state
  if st.up == nil then
    return 'memoryd …'
  elseif st.up == false then
    return 'memoryd down'
  end
  local parts = { 'memoryd up' }
  local status = st.status
  if status then
    local model = type(status.model) == 'table' and status.model.configured
    parts[#parts + 1] = model and 'model' or 'no model'
    local team = type(status.features) == 'table' and status.features.team_sync
    if type(team) == 'table' then
      parts[#parts + 1] = team.enabled and 'team on' or 'team off'
    end
    -- A setup fault (status.problems) is said here too: :MemorydStatus lists them.
    local problems = type(status.problems) == 'table' and #status.problems or 0
    if problems > 0 then
      parts[#parts + 1] = problems == 1 and '1 problem' or (problems .. ' problems')
    end
  end
  return table.concat(parts, ' · ')
end

return M
