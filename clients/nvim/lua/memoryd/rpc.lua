-- One connection to memoryd: NDJSON JSON-RPC 2.0 over the daemon's Unix socket.
--
-- Requests run concurrently and are matched by id; each has its own timeout. Replies are read
-- in libuv callbacks and handed to the caller through vim.schedule, so nothing here ever waits
-- on the daemon. When the connection is lost it is retried in the background with a doubling
-- backoff, and the subscription is renewed on every new connection. A daemon that is stopping
-- answers -32006 (nothing was done): that connection is going away, so the call goes once more
-- on a new one, made at once, as memoryd_client does. The daemon is 'up' once it answers on
-- the connection, not when the connect succeeds (see Client:_answered).
local uv = vim.uv or vim.loop

local Client = {}
Client.__index = Client

local DECODE_OPTS = { luanil = { object = true, array = true } }

-- The daemon's "memoryd is stopping" (docs/protocol.md): the request was read and not
-- started, nothing was done; the connection is going away with the daemon.
local STOPPING = -32006

local function new_error(code, message, data)
  return { code = code, message = message, data = data }
end

local function preview(text)
  local cut = text:sub(1, 60):gsub('[%c]', '?')
  if #text > 60 then
    cut = cut .. '…'
  end
  return cut
end

-- The daemon's request line cap (memoryd --line-limit, docs/protocol.md): over it the daemon
-- answers -32600 and closes the connection, so such a request is never sent.
Client.REQUEST_CAP = 64 * 1024 * 1024

-- A call whose reply is coming in is waited for past its timeout (see Client:request), for at
-- most this many timeouts in all from the request: a daemon trickling a byte now and then, or
-- another call's long reply on the connection while this one is never answered, would keep it
-- waiting with no end. The VS Code client has the same (MAX_TIMEOUTS in rpcClient.ts).
Client.MAX_TIMEOUTS = 10

-- The byte offset of the first byte that is not part of valid UTF-8 in text, or nil.
-- ASCII runs are skipped by string.find; only the bytes over 127 are looked at one by one.
local function invalid_utf8_at(text)
  local i = 1
  while true do
    i = text:find('[\128-\255]', i)
    if i == nil then
      return nil
    end
    local c = text:byte(i)
    local n, low, high = nil, 0x80, 0xBF
    if c >= 0xC2 and c <= 0xDF then
      n = 1
    elseif c >= 0xE0 and c <= 0xEF then
      n = 2
      low = c == 0xE0 and 0xA0 or 0x80 -- no overlong forms
      high = c == 0xED and 0x9F or 0xBF -- no surrogates
    elseif c >= 0xF0 and c <= 0xF4 then
      n = 3
      low = c == 0xF0 and 0x90 or 0x80
      high = c == 0xF4 and 0x8F or 0xBF
    end
    if n == nil then
      return i
    end
    for k = 1, n do
      local b = text:byte(i + k)
      if b == nil or b < (k == 1 and low or 0x80) or b > (k == 1 and high or 0xBF) then
        return i
      end
    end
    i = i + n + 1
  end
end
Client.invalid_utf8_at = invalid_utf8_at

-- The first string of a request's params that is not UTF-8, and where it is (`cwd`,
-- `touched_paths.1`): "byte 112 of the request" named nothing the user could change.
local function first_invalid(value, where)
  if type(value) == 'string' then
    return invalid_utf8_at(value) and { where = where, text = value } or nil
  elseif type(value) == 'table' then
    for key, item in pairs(value) do
      local found = first_invalid(item, where and (where .. '.' .. tostring(key)) or tostring(key))
      if found then
        return found
      end
    end
  end
  return nil
end

-- Why a request holding text that is not UTF-8 is refused, naming that text: a short one shown
-- with each byte outside UTF-8 as \xNN (`caf\xe9`, as memctl shows it), a path with what to do.
function Client.not_utf8_reason(params, line)
  local found = first_invalid(params, nil)
  if found == nil then
    return ('the request holds text that is not UTF-8 (byte %d of it); nothing was sent'):format(invalid_utf8_at(line))
  end
  local shown
  if #found.text <= 300 then
    local parts, rest = {}, found.text
    while true do
      local bad = invalid_utf8_at(rest)
      if bad == nil then
        parts[#parts + 1] = rest
        break
      end
      parts[#parts + 1] = rest:sub(1, bad - 1) .. ('\\x%02x'):format(rest:byte(bad))
      rest = rest:sub(bad + 1)
    end
    shown = table.concat(parts):gsub('%c', ' ')
  else
    shown = ('%d bytes, byte %d of which'):format(#found.text, invalid_utf8_at(found.text))
  end
  local key = found.where:match('^[%a_]+') or found.where
  if key == 'cwd' or key == 'path' or key == 'touched_paths' then
    return ('the path %s is not UTF-8: memoryd takes UTF-8 paths only (open it through a symbolic link with a UTF-8 name); nothing was sent'):format(
      shown
    )
  end
  return ('the %s (%s) is not UTF-8; nothing was sent'):format(found.where, shown)
end

-- opts: path, timeout_ms, line_cap, request_cap, backoff_min_ms, backoff_max_ms,
--       connect_budget_ms, on_state(state, err) ('up' | 'down' | 'subscribe_failed'),
--       on_notifications(list); 'up': the daemon's first answer on a connection (not a -32006)
function Client.new(opts)
  local self = setmetatable({}, Client)
  self.path = opts.path
  self.timeout_ms = opts.timeout_ms or 5000
  self.line_cap = opts.line_cap or 16 * 1024 * 1024
  self.request_cap = opts.request_cap or Client.REQUEST_CAP
  self.backoff_min_ms = opts.backoff_min_ms or 500
  self.backoff_max_ms = opts.backoff_max_ms or 30000
  self.connect_budget_ms = opts.connect_budget_ms or 1000
  self.on_state = opts.on_state or function() end
  self.on_notifications = opts.on_notifications or function() end
  self.state = 'idle' -- idle | connecting | connected | down | closed
  self.next_id = 1
  self.pending = {} -- id -> entry (sent or queued)
  self.queue = {} -- {line, entry} of the requests waiting for the connection
  -- The connection in use, or being made: {pipe, partial, partial_len, received, up, retired,
  -- after_stop, closed}; received counts the bytes read on it, up says the daemon answered there.
  self.conn = nil
  self.retiring = {} -- stopping daemons' connections, read until their calls are answered
  self.notes = {}
  self.notes_scheduled = false
  self.backoff_ms = self.backoff_min_ms
  self.events = nil -- what to subscribe to on every connection; nil: no subscription
  self.stats = { notifications = 0 } -- notifications received on any connection
  return self
end

local function stop_timer(timer)
  if timer and not timer:is_closing() then
    timer:stop()
    timer:close()
  end
end

-- fn() once the loop has read the socket again. libuv runs the timers that are due before it
-- polls for I/O: when the editor itself was busy past a call's timeout (a 68 MB request
-- encoded on a loaded machine, a slow callback), the reply waiting in the socket lost to the
-- timer and the call was "did not answer". A check handle runs after this iteration's poll;
-- the idle handle keeps that poll from waiting for I/O that may never come.
local function after_next_poll(fn)
  local idle, check = uv.new_idle(), uv.new_check()
  idle:start(function() end)
  check:start(function()
    idle:stop()
    idle:close()
    check:stop()
    check:close()
    fn()
  end)
end

-- State changes are seen on the main loop (libuv callbacks may not call most of the API).
function Client:_emit_state(state, err)
  vim.schedule(function()
    self.on_state(state, err)
  end)
end

function Client:_finish(entry, err, result)
  if self.pending[entry.id] ~= entry then
    return -- already answered, timed out or failed
  end
  self.pending[entry.id] = nil
  stop_timer(entry.timer)
  vim.schedule(function()
    entry.cb(err, result)
  end)
  if entry.conn ~= nil and entry.conn.retired then
    self:_close_retired_if_done(entry.conn)
  end
end

-- Fail what waits: all of it, or (`keep_retired`) all but the calls a stopping daemon's
-- connection may still answer.
function Client:_fail_all(err, keep_retired)
  for _, entry in pairs(self.pending) do
    if not (keep_retired and entry.conn ~= nil and entry.conn.retired) then
      self:_finish(entry, err)
    end
  end
  self.queue = {}
end

-- Write `entry`'s request on `conn`; what had been read there by then is noted (entry.seen),
-- so that its timeout can tell a reply coming in since.
function Client:_write(conn, entry)
  entry.conn = conn
  entry.seen = conn.received
  conn.pipe:write(entry.line, function(err)
    if err then
      self:_conn_lost(conn, new_error('closed', 'writing to memoryd failed: ' .. tostring(err)))
    end
  end)
end

-- Send method(params); cb(err, result) runs on the main loop. err is
-- {code = <JSON-RPC code> | 'down' | 'timeout' | 'closed' | 'protocol' | 'invalid', message, data};
-- 'invalid': refused before sending (over the daemon's request cap, or text that is not UTF-8),
-- the connection kept.
function Client:request(method, params, cb, timeout_ms)
  local id = self.next_id
  self.next_id = id + 1
  local message = { jsonrpc = '2.0', id = id, method = method }
  if params ~= nil then
    message.params = params
  end
  local ok, line = pcall(vim.json.encode, message)
  local refused = nil
  if not ok then
    refused = 'could not encode the request: ' .. tostring(line)
  elseif #line + 1 > self.request_cap then
    -- Sent, it would cost the connection (and every call in flight on it) and read as the
    -- daemon going away.
    refused = ('the request is too large: %d bytes, over the daemon\'s %d-byte cap; nothing was sent'):format(
      #line + 1,
      self.request_cap
    )
  else
    if invalid_utf8_at(line) then
      -- The daemon reads only UTF-8 (JSON text is UTF-8): say so now, not after a timeout.
      refused = Client.not_utf8_reason(params, line)
    end
  end
  if refused then
    vim.schedule(function()
      cb(new_error('invalid', refused))
    end)
    return id
  end
  -- started: when the call was made (monotonic ms), for the cap on waiting past the timeout.
  local entry = { id = id, method = method, cb = cb, line = line .. '\n', started = uv.hrtime() / 1e6 }
  self.pending[id] = entry
  local ms = timeout_ms or self.timeout_ms
  local cap_ms = ms * Client.MAX_TIMEOUTS
  entry.timer = uv.new_timer()
  local function expire()
    after_next_poll(function() -- a reply read meanwhile has finished the call: this does nothing
      if self.pending[id] ~= entry then
        return
      end
      local conn = entry.conn
      local left_ms = cap_ms - (uv.hrtime() / 1e6 - entry.started)
      if conn ~= nil and not conn.closed and conn.partial_len > 0 and conn.received > entry.seen then
        if left_ms >= 1 then
          -- A reply is coming in (a line begun, read since the request or the last look): one
          -- longer than the socket buffers (~200 KB) that came while the editor was busy past
          -- the timeout is only partly read by now. Waited for while it keeps coming, up to
          -- MAX_TIMEOUTS timeouts in all; a reply that stops for a whole timeout fails as one
          -- never sent.
          entry.seen = conn.received
          entry.timer:start(math.min(ms, math.floor(left_ms)), 0, expire)
          return
        end
        -- Still coming in (a trickle, or another call's reply while this one is never
        -- answered) after MAX_TIMEOUTS timeouts: it fails.
        self:_finish(
          entry,
          new_error(
            'timeout',
            ('memoryd did not finish answering %s within %d ms (%d timeouts)'):format(method, cap_ms, Client.MAX_TIMEOUTS)
          )
        )
        return
      end
      self:_finish(entry, new_error('timeout', ('memoryd did not answer %s within %d ms'):format(method, ms)))
    end)
  end
  entry.timer:start(ms, 0, expire)
  self:_send(entry)
  return id
end

-- On the connection when there is one, else queued for the next (which is made now).
function Client:_send(entry)
  if self.state == 'connected' then
    self:_write(self.conn, entry)
  else
    self.queue[#self.queue + 1] = entry
    if self.state ~= 'connecting' then
      self:connect()
    end
  end
end

-- Receive notifications (all events, or those named) on this and every later connection.
function Client:subscribe(events)
  self.events = events or vim.NIL
  if self.state == 'connected' then
    self:_send_subscribe()
  elseif self.state ~= 'connecting' then
    self:connect()
  end
end

function Client:_send_subscribe()
  local params = vim.empty_dict()
  if self.events ~= vim.NIL then
    params = { events = self.events }
  end
  self:request('subscribe', params, function(err)
    if err and err.code ~= 'down' and err.code ~= 'closed' then
      self:_emit_state('subscribe_failed', err)
    end
  end)
end

function Client:connect()
  if self.state == 'connecting' or self.state == 'connected' or self.state == 'closed' then
    return
  end
  stop_timer(self.retry_timer)
  self.retry_timer = nil
  self.state = 'connecting'
  self:_attempt(self.connect_budget_ms, 10)
end

-- A daemon whose accept backlog is full (EAGAIN) or that is restarting (ECONNREFUSED) is there
-- in a moment: such failures are retried, pausing 10 ms doubling to 200 ms, for about
-- connect_budget_ms before the daemon counts as down; a missing socket (ENOENT), and a folder,
-- regular file or FIFO in its place, are down at once. The same rule as memoryd_client's
-- Connector.
local function busy(err)
  return err:match('^EAGAIN') ~= nil or err:match('^EWOULDBLOCK') ~= nil or err:match('^ECONNREFUSED') ~= nil
end

-- What is at `path` when it is there and no socket (a folder, a regular file, a FIFO), said with
-- what to do in memoryd_client's words (not_a_socket); nil for a socket or nothing. Connecting to
-- one fails as a daemon restarting does (ECONNREFUSED on Linux, ENOTSOCK on some BSDs), which
-- would be retried for a second and then said only as "not running".
function Client.not_a_socket(path)
  local found = uv.fs_stat(path)
  if found == nil or found.type == 'socket' then
    return nil
  end
  local kinds = { directory = 'a folder', file = 'a regular file', fifo = 'a FIFO' }
  local kind = kinds[found.type] or 'a special file'
  return ('it is %s, not a socket; is --socket or MEMORYD_SOCKET mistyped? (`memctl start` does not replace it)'):format(kind)
end

-- `n` with a comma between each group of three digits, as Python's '{:,}'.
local function grouped(n)
  local text = tostring(n):reverse():gsub('(%d%d%d)', '%1,'):reverse()
  return (text:gsub('^,', ''))
end

-- Why no socket can be at `path` when it is longer than a Unix socket's path may be (sun_path
-- less its closing NUL: 107 bytes on Linux, 103 on macOS), in memoryd_client's words
-- (socket_path_too_long); nil when it is not. libuv before 1.46 (Neovim 0.9 and older) cut
-- such a path to fit and connected there: to whatever listens at that shorter path, a socket
-- of another user's in a shared folder too, which Client.untrusted (made on the whole path)
-- never looked at. Newer ones say only ENOENT: "not running", with an offer to start it.
function Client.too_long(path)
  local limit = uv.os_uname().sysname == 'Darwin' and 103 or 107
  if #path <= limit then
    return nil
  end
  return ('its path is %s bytes, over the %d a Unix socket\'s path may have; set --socket or MEMORYD_SOCKET (or XDG_RUNTIME_DIR) to a shorter one'):format(
    grouped(#path),
    limit
  )
end

local function not_listening(err)
  return err:match('^ECONNREFUSED') ~= nil or err:match('^ENOTSOCK') ~= nil
end

-- Whether bit `value` (a power of two) is set in `mode`, without the bit library.
local function has_bit(mode, value)
  return math.floor(mode / value) % 2 == 1
end

-- Why the socket at `path` is not the user's own daemon, or nil. Another local user who made
-- the socket's folder first (the /tmp/memoryd-<uid> fallback, any sticky folder) and listens
-- there would otherwise get every request and answer in the daemon's place. libuv cannot ask
-- the kernel who listens (SO_PEERCRED), so the socket file's owner stands for it, checked
-- before connecting: the socket and its folder must be the user's (or root's), and the folder
-- not writable by others unless sticky (the daemon's own rule for its folder). A path that is
-- not there is left to the connect, which reports the daemon down.
function Client.untrusted(path)
  if uv.getuid == nil then
    return nil
  end
  local uid = uv.getuid()
  local function yours(owner)
    return owner == uid or owner == 0
  end
  local folder = path:match('^(.*)/[^/]*$') or '.'
  if folder == '' then
    folder = '/'
  end
  local dir = uv.fs_stat(folder)
  if dir ~= nil then
    if not yours(dir.uid) then
      return ('its folder %s belongs to uid %d, not to you (uid %d)'):format(folder, dir.uid, uid)
    end
    local others_write = has_bit(dir.mode, 16) or has_bit(dir.mode, 2) -- 0o020, 0o002
    if others_write and not has_bit(dir.mode, 512) then -- 0o1000: sticky
      return ('its folder %s is writable by other users'):format(folder)
    end
  end
  local file = uv.fs_lstat(path)
  if file ~= nil and not yours(file.uid) then
    return ('it belongs to uid %d, not to you (uid %d)'):format(file.uid, uid)
  end
  return nil
end

function Client:_attempt(left_ms, pause_ms)
  local long = Client.too_long(self.path)
  if long ~= nil then
    -- data.not_a_socket: starting a daemon would not help (it cannot listen there either)
    local message = ('memoryd is not running on %s: %s'):format(self.path, long)
    self:_down(new_error('down', message, { not_a_socket = true, too_long = true }))
    return
  end
  local why = Client.untrusted(self.path)
  if why ~= nil then
    self:_down(new_error('down', ('refusing to connect to %s: %s'):format(self.path, why)))
    return
  end
  local pipe = uv.new_pipe(false)
  local conn = { pipe = pipe, partial = {}, partial_len = 0, received = 0, retired = false }
  self.conn = conn
  local ok, call_err = pcall(pipe.connect, pipe, self.path, function(err)
    if self.conn ~= conn then
      return
    end
    if err then
      local other = not_listening(err) and Client.not_a_socket(self.path) or nil
      if other ~= nil then
        -- data.not_a_socket: starting a daemon would not help (memctl start refuses the path)
        local message = ('memoryd is not running on %s: %s'):format(self.path, other)
        self:_down(new_error('down', message, { not_a_socket = true }))
        return
      end
      if busy(err) and left_ms > 0 then
        self:_close_pipe()
        local wait = math.min(pause_ms, left_ms)
        local timer = uv.new_timer()
        self.retry_timer = timer
        timer:start(wait, 0, function()
          stop_timer(timer)
          if self.retry_timer == timer and self.state == 'connecting' then
            self.retry_timer = nil
            self:_attempt(left_ms - wait, math.min(pause_ms * 2, 200))
          end
        end)
        return
      end
      self:_down(new_error('down', ('memoryd is not running on %s (%s)'):format(self.path, err)))
      return
    end
    -- Connected, not up: that waits for the daemon's first answer here (Client:_answered).
    self.state = 'connected'
    conn.after_stop = self.after_stop
    self.after_stop = false
    pipe:read_start(function(read_err, chunk)
      if conn.closed then
        return
      end
      if read_err then
        self:_conn_lost(conn, new_error('closed', 'lost the connection to memoryd: ' .. tostring(read_err)))
      elseif chunk == nil then
        self:_conn_lost(conn, new_error('closed', 'memoryd closed the connection'))
      else
        conn.received = conn.received + #chunk
        self:_feed(conn, chunk)
      end
    end)
    local queued = self.queue
    self.queue = {}
    local asked = self.events ~= nil
    if asked then
      self:_send_subscribe()
    end
    for _, entry in ipairs(queued) do
      -- A call that timed out while the connection was being made was reported failed:
      -- sent now, it would still happen (a memory written after "did not answer").
      if self.pending[entry.id] == entry then
        self:_write(conn, entry)
        asked = true
      end
    end
    if not asked then
      -- Nothing to send (a reconnect with no subscription to renew): an answer is still
      -- needed to know the daemon is back.
      self:request('status', nil, function() end)
    end
  end)
  if not ok then
    self:_down(new_error('down', ('cannot connect to memoryd on %s: %s'):format(self.path, tostring(call_err))))
  end
end

local function close_pipe(pipe)
  if pipe and not pipe:is_closing() then
    pipe:read_stop()
    pipe:close()
  end
end

function Client:_close_pipe()
  local conn = self.conn
  self.conn = nil
  if conn ~= nil then
    conn.closed = true
    close_pipe(conn.pipe)
  end
end

-- The daemon answered on `conn`: when that is the connection in use, the daemon is up (once per
-- connection), and the backoff starts over. Not at the connect: a daemon killed by SIGKILL has
-- its connections closed a moment before its listening socket (the kernel releases them in
-- turn, and may pause in between on a loaded machine); a connect in that gap goes into a
-- backlog nobody will accept and is reset at once. Taken for up, that said "connected to
-- memoryd again" and then the outage once more, for one outage, and the backoff never grew.
function Client:_answered(conn)
  if conn.up or self.conn ~= conn then
    return
  end
  conn.up = true
  self.backoff_ms = self.backoff_min_ms
  self:_emit_state('up')
end

-- A stopping daemon answered STOPPING on `conn`: nothing more is sent on it (the daemon drops
-- what comes after), the calls it started still get their replies there, and the next call,
-- and each one it answered STOPPING (once), goes on a new connection made now: under socket
-- activation the next daemon answers it; a daemon stopped for good is down, as when its
-- connection is lost. No 'down' is said in between: for the user nothing was lost.
function Client:_retire(conn)
  if conn.retired then
    return
  end
  conn.retired = true
  if self.conn == conn then
    self.conn = nil
    self.retiring[conn] = true
    if conn.after_stop and not conn.up then
      -- The connection made in its place went to a stopping daemon too: not again at once
      -- (its subscribe answered STOPPING each time), but with the backoff of a lost one.
      self:_down(new_error('down', ('memoryd on %s is stopping'):format(self.path)))
    else
      self.state = 'idle'
      self.after_stop = true
      self:connect()
    end
  end
end

function Client:_close_retired_if_done(conn)
  for _, entry in pairs(self.pending) do
    if entry.conn == conn then
      return -- still to be answered there
    end
  end
  self.retiring[conn] = nil
  conn.closed = true
  close_pipe(conn.pipe)
end

-- `conn` ended, or sent what cannot be read: for the connection in use, the connection is
-- lost; for a stopping daemon's, its calls still unanswered fail (it may have started them:
-- they are not sent again).
function Client:_conn_lost(conn, err)
  if not conn.retired then
    if self.conn == conn then
      self:_lost(err)
    end
    return
  end
  for _, entry in pairs(self.pending) do
    if entry.conn == conn then
      self:_finish(entry, err)
    end
  end
  self:_close_retired_if_done(conn)
end

-- A call answered STOPPING: sent again once, on a new connection (memoryd_client does the
-- same); a subscription is renewed by that connection itself. A second STOPPING is the daemon
-- going away: the call fails as with the daemon down.
function Client:_stopped(conn, entry, err)
  self:_retire(conn)
  if entry.method == 'subscribe' then
    self:_finish(entry, new_error('closed', err.message))
  elseif entry.retried then
    self:_finish(entry, new_error('down', err.message))
  else
    entry.retried = true
    entry.conn = nil
    self:_send(entry)
  end
  self:_close_retired_if_done(conn)
end

-- Not reachable, or the connection ended: fail what waits, and try again later.
function Client:_down(err)
  self:_close_pipe()
  self.state = 'down'
  self.after_stop = false
  self:_fail_all(err, true)
  self:_emit_state('down', err)
  self:_schedule_retry()
end

-- A live connection ended (daemon gone, or a reply we cannot trust): the same, once.
function Client:_lost(err)
  if self.state == 'connected' then
    self:_down(err)
  end
end

function Client:_schedule_retry()
  if self.state == 'closed' then
    return
  end
  stop_timer(self.retry_timer)
  local delay = self.backoff_ms
  self.backoff_ms = math.min(self.backoff_ms * 2, self.backoff_max_ms)
  local timer = uv.new_timer()
  self.retry_timer = timer
  timer:start(delay, 0, function()
    stop_timer(timer)
    if self.retry_timer == timer then
      self.retry_timer = nil
      if self.state == 'down' then
        self.state = 'idle'
        self:connect()
      end
    end
  end)
end

-- Try now instead of waiting for the backoff (after `memctl start`, or a user's command).
function Client:reconnect_now()
  if self.state == 'down' or self.state == 'idle' then
    self.backoff_ms = self.backoff_min_ms
    self.state = 'idle'
    self:connect()
  end
end

function Client:_feed(conn, chunk)
  local start = 1
  while not conn.closed do
    local newline = chunk:find('\n', start, true)
    if not newline then
      local rest = chunk:sub(start)
      if #rest > 0 then
        conn.partial[#conn.partial + 1] = rest
        conn.partial_len = conn.partial_len + #rest
        if conn.partial_len > self.line_cap then
          self:_protocol_error(conn, ('memoryd sent a line over the %d-byte cap'):format(self.line_cap))
        end
      end
      return
    end
    local line = chunk:sub(start, newline - 1)
    if conn.partial_len > 0 then
      conn.partial[#conn.partial + 1] = line
      line = table.concat(conn.partial)
      conn.partial, conn.partial_len = {}, 0
    end
    start = newline + 1
    if #line > self.line_cap then
      self:_protocol_error(conn, ('memoryd sent a line over the %d-byte cap'):format(self.line_cap))
      return
    end
    if not self:_line(conn, line) then
      return
    end
  end
end

-- A reply we cannot read makes the stream untrustworthy: drop the connection, say why.
function Client:_protocol_error(conn, message)
  conn.partial, conn.partial_len = {}, 0
  self:_conn_lost(conn, new_error('protocol', message))
end

function Client:_line(conn, line)
  if line:match('^%s*$') then
    return true
  end
  local ok, message = pcall(vim.json.decode, line, DECODE_OPTS)
  if not ok or type(message) ~= 'table' then
    self:_protocol_error(conn, 'memoryd sent a reply that is not JSON: ' .. preview(line))
    return false
  end
  if message[1] ~= nil then -- a batch
    for _, item in ipairs(message) do
      self:_message(item, conn)
    end
  else
    self:_message(message, conn)
  end
  return true
end

function Client:_message(message, conn)
  if type(message) ~= 'table' then
    return
  end
  -- A -32006 says this daemon is going away, not that it is up: up waits for the next one.
  if not (type(message.error) == 'table' and message.error.code == STOPPING) then
    self:_answered(conn)
  end
  if message.method ~= nil and message.id == nil then
    self.stats.notifications = self.stats.notifications + 1
    self.notes[#self.notes + 1] = message
    -- A storm of notifications costs one scheduled callback, not one per line.
    if not self.notes_scheduled then
      self.notes_scheduled = true
      vim.schedule(function()
        local notes = self.notes
        self.notes = {}
        self.notes_scheduled = false
        self.on_notifications(notes)
      end)
    end
    return
  end
  if message.id == nil and message.error ~= nil then
    -- An error the daemon could not tie to a request (JSON-RPC's "id": null: a line it could
    -- not read, or not a request). Which of the calls in flight it was cannot be known: they
    -- all fail now with the daemon's words, instead of each waiting for its timeout.
    local e = type(message.error) == 'table' and message.error or { message = tostring(message.error) }
    local err = new_error(
      e.code or -32600,
      'memoryd could not read a request: ' .. tostring(e.message or 'no reason given'),
      e.data
    )
    for _, pending in pairs(self.pending) do
      if pending.conn == conn then
        self:_finish(pending, err)
      end
    end
    return
  end
  local entry = message.id ~= nil and self.pending[message.id]
  if not entry then
    return -- a reply to a request that already timed out
  end
  if message.error ~= nil then
    local e = message.error
    if type(e) ~= 'table' then
      e = { code = -32603, message = tostring(e) }
    end
    if e.code == STOPPING and entry.conn == conn then
      self:_stopped(conn, entry, new_error(STOPPING, tostring(e.message or 'memoryd is stopping')))
      return
    end
    self:_finish(entry, new_error(e.code or -32603, tostring(e.message or ''), e.data))
  else
    self:_finish(entry, nil, message.result)
  end
end

function Client:pending_count()
  local n = 0
  for _ in pairs(self.pending) do
    n = n + 1
  end
  return n
end

function Client:close()
  self.state = 'closed'
  stop_timer(self.retry_timer)
  self.retry_timer = nil
  self:_close_pipe()
  for conn in pairs(self.retiring) do
    conn.closed = true
    close_pipe(conn.pipe)
  end
  self.retiring = {}
  self:_fail_all(new_error('closed', 'the memoryd client was closed'))
end

return Client
