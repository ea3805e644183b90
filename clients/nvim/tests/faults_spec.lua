-- Against tests/editors/misbehaving_daemon.py: a call never answered, a reply that is not
-- JSON, a line over the cap, a storm of 1,000 notifications, and no daemon at all. The editor
-- stays responsive throughout and every failure is one clear message.
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')
local memoryd = require('memoryd')
local uv = vim.uv or vim.loop

local socket = T.env('MEMORYD_SOCKET')
local repo = T.env('MEMORYD_TEST_REPO')
-- Calls the fake answers (or fails) at once wait as long as they would need on a loaded machine:
-- a 500 ms timeout turned a reply that came late into "did not answer". The one call never
-- answered gets HANG_MS of its own (test 1).
local OPTS = {
  timeout_ms = 20000,
  recall_timeout_ms = 20000,
  line_cap = 1024 * 1024,
  backoff_min_ms = 50,
  backoff_max_ms = 200,
  status_interval_ms = 0,
}
local HANG_MS = 2000
memoryd.setup(OPTS)

-- A 10 ms timer; the longest gap between its ticks shows whether anything blocked the loop.
local function ticker()
  local t = { ticks = 0, max_gap_ms = 0, last = uv.hrtime() }
  t.timer = uv.new_timer()
  t.timer:start(10, 10, function()
    local now = uv.hrtime()
    t.max_gap_ms = math.max(t.max_gap_ms, (now - t.last) / 1e6)
    t.last = now
    t.ticks = t.ticks + 1
  end)
  t.stop = function()
    t.timer:stop()
    t.timer:close()
  end
  return t
end

local function status_answers()
  T.eq('misbehaving', T.call('status', nil, 20000).version, 'version from the fake daemon')
end

local function edit_file()
  vim.cmd('edit ' .. vim.fn.fnameescape(repo .. '/src/api/users.py'))
end

T.run({
  {
    'a daemon that never answers: timeout, other calls go on, the editor responds',
    function()
      edit_file()
      local tick = ticker()
      local client = memoryd.client()
      client.timeout_ms = HANG_MS -- for get_context alone: the calls after it keep OPTS's
      vim.cmd('MemorydRules')
      client.timeout_ms = OPTS.timeout_ms
      -- Still waiting for its answer: the command did not wait for it (a wait runs the loop,
      -- and the timeout would have ended the call by now). Timing the command failed on a
      -- loaded machine.
      local waiting = vim.tbl_filter(function(entry)
        return entry.method == 'get_context'
      end, vim.tbl_values(client.pending))
      T.eq(1, #waiting, 'get_context calls pending when the command returned')
      status_answers() -- on the same connection, while get_context hangs
      vim.api.nvim_feedkeys('Otyped while waiting\27', 'xt', false)
      T.eq('typed while waiting', vim.api.nvim_get_current_line(), 'typing')
      T.wait('the timeout message', function()
        return T.message_matching(('get_context failed: memoryd did not answer get_context within %d ms'):format(HANG_MS))
      end, HANG_MS + 20000)
      tick.stop()
      T.truthy(tick.ticks >= 10, 'timer ticks while waiting: ' .. tick.ticks)
      -- A loop blocked until the timeout pauses HANG_MS; a loaded machine pauses far less.
      T.truthy(tick.max_gap_ms < HANG_MS * 0.75, 'longest pause ' .. tick.max_gap_ms .. ' ms')
      T.eq(0, memoryd.client():pending_count(), 'requests left pending')
      vim.cmd('silent! undo')
    end,
  },
  {
    'a reply waiting in the socket when the editor was busy past the timeout is the answer',
    function()
      -- libuv runs the timers that are due before it reads the socket: the editor busy longer
      -- than a call's timeout (a 68 MB request encoded on a loaded machine) reported a reply
      -- already there as "did not answer".
      status_answers() -- connected: the request below is written at once
      local client = memoryd.client()
      local mark = vim.fn.tempname()
      local answer, failure = nil, nil
      client:request('test.answer_then_mark', { mark = mark }, function(err, result)
        answer, failure = result, err
      end, 100)
      -- Busy without running the loop until the reply is in the socket and the timeout passed.
      local t0 = uv.hrtime()
      while uv.fs_stat(mark) == nil or (uv.hrtime() - t0) / 1e6 < 300 do
        assert((uv.hrtime() - t0) / 1e6 < 60000, 'the fake never answered')
      end
      T.wait('the call to end', function()
        return answer ~= nil or failure ~= nil
      end)
      T.eq(nil, failure, 'the error')
      T.eq({ answered = true }, answer, 'the answer')
    end,
  },
  {
    'a reply longer than the socket holds, coming in when the editor was busy past the timeout, is the answer',
    function()
      -- The socket holds about 200 KB: after the busy spell one read takes that much of a 1 MB
      -- reply and the rest is still on its way. The timeout was decided there, with a line
      -- begun in the buffer: "did not answer". The timeout is long enough that a loaded
      -- machine finishing the reply after the busy spell stays within it.
      local ms = 2000
      status_answers() -- connected: the request below is written at once
      local client = memoryd.client()
      local mark = vim.fn.tempname()
      local bytes = 1000 * 1000
      local answer, failure = nil, nil
      client:request('test.long_answer_then_mark', { mark = mark, bytes = bytes }, function(err, result)
        answer, failure = result, err
      end, ms)
      -- Busy without running the loop until the reply is coming in and the timeout passed
      -- (asleep, not spinning: two seconds of a shared machine's CPU for nothing).
      local t0 = uv.hrtime()
      while uv.fs_stat(mark) == nil or (uv.hrtime() - t0) / 1e6 < ms + 200 do
        assert((uv.hrtime() - t0) / 1e6 < 60000, 'the fake never answered')
        uv.sleep(5)
      end
      T.wait('the call to end', function()
        return answer ~= nil or failure ~= nil
      end, 20000)
      T.eq(nil, failure, 'the error')
      T.eq(bytes, #answer.text, 'the length of the answer')
    end,
  },
  {
    'a reply that trickles in and never ends fails after ten timeouts; so does a call waiting beside it',
    function()
      -- A due timeout waits while a reply is coming in. A daemon sending a byte now and then
      -- kept the call waiting for ever (a line only ends at the 16 MiB cap), and so did a call
      -- never answered while another call's reply came in on the connection. Both end at
      -- MAX_TIMEOUTS timeouts (2 s here); only the kind of error is looked at, as a loaded
      -- machine may stall the trickle long enough for a plain timeout.
      local Client = require('memoryd.rpc')
      T.eq(10, Client.MAX_TIMEOUTS, 'the cap, as the VS Code client has it')
      local client = Client.new({ path = socket, timeout_ms = 20000 })
      local ok, connected = false, false
      client:request('status', nil, function(err)
        ok, connected = err == nil, true
      end)
      T.wait('connected', function()
        return connected
      end, 20000)
      T.truthy(ok, 'status answered')
      local done = {}
      local function record(name)
        return function(err, result)
          done[name] = { err = err, result = result }
        end
      end
      -- Never answered, with a reply for the call after it coming in beside it.
      client:request('get_context', {}, record('beside'), 200)
      client:request('test.trickle', { every_ms = 20 }, record('trickle'), 200)
      T.wait('both calls to end', function()
        return done.beside ~= nil and done.trickle ~= nil
      end, 30000)
      client:close()
      T.eq('timeout', done.trickle.err and done.trickle.err.code, 'the trickled call\'s error')
      T.eq('timeout', done.beside.err and done.beside.err.code, 'the error of the call beside it')
    end,
  },
  {
    'a reply that is not JSON: a clear message, then it reconnects',
    function()
      edit_file()
      vim.cmd('MemorydRecall anything')
      T.wait('the message', function()
        return T.message_matching('recall failed: memoryd sent a reply that is not JSON: this is not json <html>')
      end, 20000)
      status_answers()
    end,
  },
  {
    'a reply line over the cap: a clear message, then it reconnects',
    function()
      edit_file()
      vim.cmd('MemorydMemories')
      T.wait('the message', function()
        return T.message_matching('memory.list failed: memoryd sent a line over the 1048576-byte cap')
      end, 20000)
      status_answers()
    end,
  },
  {
    'an error reply with "id": null fails the call in flight at once, with the daemon\'s words',
    function()
      local failed = nil
      memoryd.request('test.null_id', nil, function() end, {
        on_error = function(err)
          failed = err
          return true
        end,
      })
      T.wait('the error', function()
        return failed ~= nil
      end, 10000)
      -- The daemon's error, long before the call's timeout (which would be code 'timeout').
      T.eq(-32700, failed.code, 'the daemon\'s code')
      T.eq('memoryd could not read a request: parse error: invalid UTF-8 in the line', failed.message, 'message')
      T.eq(0, memoryd.client():pending_count(), 'requests left pending')
      status_answers()
    end,
  },
  {
    'a reply of the wrong shape: a clear message',
    function()
      edit_file()
      T.answers = { 1, 'Shape' } -- type, name (team.status answers here, but names no repo)
      vim.cmd('MemorydRemember hello')
      T.wait('the message', function()
        return T.message_matching('could not use the reply to memory.write: ')
      end, 20000)
      status_answers()
    end,
  },
  {
    "a restore: the daemon's warnings are shown, as a write's are",
    function()
      local memories = require('memoryd.views.memories')
      memories.last_ctx = { cwd = repo }
      T.answers = { 1 } -- restore it? yes
      memories.restore({ path = '/m/project_x.md', version = 'v1', name = 'X' })
      T.wait('the warning', function()
        return T.message_matching(T.env('MEMORYD_TEST_RESTORE_WARNING')) ~= nil
      end, 20000)
      T.truthy(T.message_matching('memoryd: restored project_x.md (v1)'), 'the restore message')
      T.eq(vim.log.levels.WARN, T.message_matching(T.env('MEMORYD_TEST_RESTORE_WARNING')).level, 'level')
      status_answers()
    end,
  },
  {
    'notifications appear as vim.notify messages, worded like memctl watch',
    function()
      local heard = 0
      memoryd.on('session/summary_updated', function()
        error('listener broke')
      end)
      memoryd.on('session/summary_updated', function()
        heard = heard + 1
      end)
      memoryd.request('test.notify', nil, function() end)
      local levels = vim.log.levels
      for _, expected in ipairs({
        { 'memoryd: a session/summary_updated listener failed: ', levels.ERROR },
        { 'memoryd: session summary updated: s-42', levels.INFO },
        { 'memoryd: team synced: acme/widgets (pushed 2, pulled 1)', levels.INFO },
        { 'memoryd: worker error (extraction): model call failed: 529 overloaded', levels.ERROR },
      }) do
        T.wait(expected[1], function()
          return T.message_matching(expected[1]) ~= nil
        end, 20000)
        T.eq(expected[2], T.message_matching(expected[1]).level, 'level of ' .. expected[1])
      end
      T.has(T.message_matching('listener failed: ').text, 'listener broke', 'the listener error')
      T.eq(1, heard, 'the next listener ran')
    end,
  },
  {
    "with Neovim's own vim.notify a long message is cut to the command line, never a prompt",
    function()
      local capture = vim.notify
      vim.notify = T.builtin_notify
      local ok, err = pcall(function()
        vim.o.columns = 80
        local long = 'worker error (extraction): ' .. string.rep('the model answered 529 overloaded; ', 8)
        memoryd.message(long, vim.log.levels.ERROR)
        local messages = vim.split(vim.fn.execute('messages'), '\n')
        local last = messages[#messages]
        T.truthy(vim.startswith(last, 'memoryd: worker error (extraction): the model'), 'echoed: ' .. last)
        T.truthy(vim.endswith(last, '…'), 'cut: ' .. last)
        T.truthy(vim.fn.strdisplaywidth(last) <= vim.v.echospace, 'fits: ' .. last)
        T.eq(true, vim.endswith(memoryd.recent[#memoryd.recent], long), 'the full text kept')
      end)
      vim.notify = capture
      assert(ok, err)
      status_answers()
      vim.cmd('MemorydStatus')
      T.wait_view('status', 'Recent messages (newest last)')
      T.has(T.text('status'), string.rep('the model answered 529 overloaded; ', 8))
    end,
  },
  {
    'a storm of 1,000 notifications in a second: a few messages and one summary',
    function()
      -- A notifier of its own, none of the earlier tests' messages in its window (a fixed
      -- pause waited for that one to end), and a window the storm fits in on a loaded machine
      -- (the fake spreads it over a second, which load stretches towards the default 2 s).
      memoryd.setup(vim.tbl_extend('force', OPTS, { notifications = { window_ms = 5000 } }))
      local client = memoryd.client()
      local before = client.stats.notifications
      local tick = ticker()
      local started = nil
      memoryd.request('test.storm', nil, function(r)
        started = r
      end)
      T.wait('the storm', function()
        return client.stats.notifications - before >= tonumber(T.env('MEMORYD_TEST_STORM'))
      end, 30000)
      T.truthy(started, 'the storm call answered')
      T.wait('the summary', function()
        return T.message_matching('997 more notifications (memory/saved ×997)')
      end, 20000)
      tick.stop()
      T.eq(3, T.count_messages('memory saved: storm_'), 'notifications shown one by one')
      T.truthy(#T.messages <= 5, 'messages in all: ' .. #T.messages)
      T.truthy(tick.max_gap_ms < 450, 'longest pause ' .. tick.max_gap_ms .. ' ms')
    end,
  },
  {
    'a save of a memory whose snapshot is never answered waits SNAPSHOT_WAIT_MS, not the call timeout',
    function()
      local files = require('memoryd.memory_files')
      local dir = vim.fn.tempname()
      vim.fn.mkdir(dir, 'p')
      local file = dir .. '/user_a.md'
      T.write(file, '---\nname: a\ndescription: d\ntype: user\n---\nold\n')
      files.add_dir(dir, repo)
      local timeout = memoryd.config.timeout_ms
      memoryd.config.timeout_ms = 5000 -- the default: a stuck daemon held every :w this long
      vim.cmd('edit ' .. vim.fn.fnameescape(file))
      vim.api.nvim_buf_set_lines(0, -1, -1, false, { 'new' })
      vim.cmd('write')
      memoryd.config.timeout_ms = timeout
      T.has(T.file(file), 'new', 'the file')
      T.truthy(
        T.message_matching('did not answer memory.snapshot within ' .. files.SNAPSHOT_WAIT_MS .. ' ms'),
        'the wait is said, at its bound'
      )
      vim.cmd('bwipeout!')
    end,
  },
  {
    'no daemon at all: one message per command, the offer once, status line down',
    function()
      memoryd.setup(vim.tbl_extend('force', OPTS, { socket = socket .. '.absent' }))
      T.answers = { 2 }
      vim.cmd('MemorydStatus')
      T.wait('the message', function()
        return T.message_matching('memoryd is not running on ' .. socket .. '.absent')
      end)
      vim.cmd('MemorydRules')
      T.wait('the second message', function()
        return T.count_messages('is not running on') == 2
      end)
      T.eq(1, #T.prompts, 'offers')
      T.eq('memoryd down', memoryd.statusline(), 'status line')
      vim.cmd('checkhealth memoryd')
      local report = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
      T.has(report, 'ERROR')
      T.has(report, 'memoryd is not answering: memoryd is not running on ' .. socket .. '.absent')
    end,
  },
})
