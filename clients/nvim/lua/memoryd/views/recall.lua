-- :MemorydRecall [query] — up to 5 memories relevant to the query (default: the visual
-- selection or the word under the cursor): name, type, age, staleness note, and what the
-- local ranker saw in it (`explain`). <CR> opens one.
local memoryd = require('memoryd')
local format = require('memoryd.format')
local ui = require('memoryd.ui')
local text = require('memoryd.views.text')

local M = {}

-- Pure: the lines of the view and the memory each line stands for.
function M.render(reply, query, now)
  local b = text.builder()
  local add = b.add
  local memories = reply.memories or {}
  add(('Recall: "%s"  — %d memor%s (selector: %s)'):format(
    format.one_line(query, 80),
    #memories,
    #memories == 1 and 'y' or 'ies',
    tostring(reply.selector or '?')
  ))
  add('')
  if #memories == 0 then
    -- The daemon says why when it did not rank the query at all ("keep going").
    local why = type(reply.not_ranked) == 'string' and reply.not_ranked or nil
    add(why and ('Not ranked: ' .. format.one_line(why, 200)) or 'Nothing relevant was found.')
  end
  for i, memory in ipairs(memories) do
    local target = { path = memory.path }
    local kind = (memory.team and 'team/' or '') .. tostring(memory.type or '?')
    add(
      ('%d. %s  [%s, %s]'):format(i, format.one_line(memory.name or format.basename(memory.path), 120), kind, format.age(memory.mtime, now)),
      target
    )
    if memory.description and memory.description ~= '' then
      add('   ' .. format.one_line(memory.description, 200), target)
    end
    if memory.stale or (memory.note and memory.note ~= vim.NIL and memory.note ~= '') then
      add('   ! ' .. format.one_line(memory.note or 'may be stale', 240), target)
    end
    add('   ' .. format.basename(memory.path), target)
    if type(memory.why) == 'table' then
      add('   why: ' .. M.why_line(memory.why), target)
    end
  end
  add('')
  add('<CR> open memory   q close')
  return b.lines, b.targets
end

-- Pure: `words deploy, canary · near grandma · pasted decoder · feedback rollout · date
-- 2023-08-20 (dated as asked) · lexical 1.00 · semantic 0.71 · cosine 0.42`.
function M.why_line(why)
  local words = type(why.words) == 'table' and why.words or {}
  local parts = { 'words ' .. (#words > 0 and table.concat(words, ', ') or 'none') }
  for _, field in ipairs({
    { 'near_words', 'near' },
    { 'pasted_words', 'pasted' },
    { 'feedback_terms', 'feedback' },
  }) do
    local list = why[field[1]]
    if type(list) == 'table' and #list > 0 then
      table.insert(parts, field[2] .. ' ' .. table.concat(list, ', '))
    end
  end
  if type(why.date) == 'string' then
    -- a date read off the file's last write says so first
    local notes = why.date_from == 'file' and { 'file time' } or {}
    if type(why.date_signals) == 'table' then
      vim.list_extend(notes, why.date_signals)
    end
    table.insert(parts, 'date ' .. why.date .. (#notes > 0 and (' (' .. table.concat(notes, ', ') .. ')') or ''))
  end
  for _, name in ipairs({ 'lexical', 'semantic', 'cosine' }) do
    if type(why[name]) == 'number' then
      table.insert(parts, ('%s %.2f'):format(name, why[name]))
    end
  end
  return format.one_line(table.concat(parts, ' · '), 240)
end

-- The byte index of the last byte of the character that starts at byte col of line (UTF-8:
-- its continuation bytes follow it); col itself past the end of the line.
local function char_end(line, col)
  if col > #line then
    return col
  end
  return col + #line:match('^[\128-\191]*', col + 1)
end

-- Screen cells of text starting after screen column `before` (a tab's width depends on where
-- it starts). A NUL is ^@ on screen; here it must not reach vim.fn (E976).
local function width(text, before)
  return vim.fn.strdisplaywidth((text:gsub('%z', '^@')), before)
end

-- First and last screen column (1-based) of the character at byte col of line.
local function screen_span(line, col)
  local before = width(line:sub(1, col - 1), 0)
  local cells = col > #line and 1 or width(line:sub(col, char_end(line, col)), before)
  return before + 1, before + math.max(cells, 1)
end

-- The characters of line that lie within screen columns left..right (a blockwise selection).
local function block_part(line, left, right)
  local pieces, cells, i = {}, 0, 1
  while i <= #line do
    local stop = char_end(line, i)
    local char = line:sub(i, stop)
    local first = cells + 1
    cells = cells + math.max(width(char, cells), 1)
    if first > right then
      break
    end
    if first >= left and cells <= right then
      pieces[#pieces + 1] = char
    end
    i = stop + 1
  end
  return table.concat(pieces)
end

-- Vim's MAXCOL: the curswant of a selection extended with `$` (v:maxcol, where there is one).
local MAXCOL = 2147483647

-- Whether the last blockwise selection was extended with `$` (each line to its own end).
-- Only the window's curswant says so, and only in Visual mode: by the time a command runs,
-- `:` or <Esc> has reset it, and the marks keep a column. So reselect it (gv) for a moment,
-- read curswant there, and put the view back; the marks and visualmode() come out the same.
function M.block_reaches_line_ends()
  local view = vim.fn.winsaveview()
  M._curswant = nil
  local ok = pcall(
    vim.cmd,
    [[execute "normal! gv\<Cmd>lua require('memoryd.views.recall')._curswant = vim.fn.getcurpos()[5]\<CR>\<Esc>"]]
  )
  vim.fn.winrestview(view)
  local curswant = M._curswant
  M._curswant = nil
  return ok and curswant == MAXCOL
end

-- The text of the last visual selection, as the user selected it: charwise (to the end of its
-- last character, however many bytes that is), linewise, or blockwise (each line cut to the
-- block's screen columns, or from its left column to each line's end when extended with `$`).
-- getregion() (Neovim 0.10+) where there is one; the same by hand on older versions, and for a
-- block extended with `$` (the marks getregion() is given hold a column, not the `$`).
function M.visual_text()
  local start = vim.fn.getpos("'<")
  local stop = vim.fn.getpos("'>")
  if start[2] == 0 or stop[2] == 0 then
    return nil
  end
  local mode = vim.fn.visualmode()
  if mode == '' then
    mode = 'v'
  end
  local to_line_ends = mode == '\22' and M.block_reaches_line_ends()
  if not to_line_ends and vim.fn.exists('*getregion') == 1 then
    local ok, region = pcall(vim.fn.getregion, start, stop, { type = mode })
    if ok and type(region) == 'table' and #region > 0 then
      return table.concat(region, '\n')
    end
  end
  local lines = vim.api.nvim_buf_get_lines(0, start[2] - 1, stop[2], false)
  if #lines == 0 then
    return nil
  end
  if mode == '\22' then
    local first_start, last_start = screen_span(lines[1], start[3])
    local first_stop, last_stop = screen_span(lines[#lines], stop[3])
    local left, right = math.min(first_start, first_stop), math.max(last_start, last_stop)
    if to_line_ends then
      right = math.huge
    end
    for i, line in ipairs(lines) do
      lines[i] = block_part(line, left, right)
    end
  elseif mode ~= 'V' then
    local last = lines[#lines]
    local stop_byte = vim.o.selection == 'exclusive' and stop[3] - 1 or char_end(last, stop[3])
    lines[#lines] = last:sub(1, stop_byte)
    lines[1] = lines[1]:sub(start[3])
  end
  return table.concat(lines, '\n')
end

-- The text a command's range stands for: the visual selection when the range is its '<,'>,
-- else the whole lines of the range (`:2,3MemorydRecall`, a count); nil without a range.
function M.range_text(opts)
  if not opts.range or opts.range == 0 then
    return nil
  end
  local start, stop = vim.fn.line("'<"), vim.fn.line("'>")
  if start == opts.line1 and stop == opts.line2 then
    return M.visual_text()
  end
  return table.concat(vim.api.nvim_buf_get_lines(0, opts.line1 - 1, opts.line2, false), '\n')
end

-- The longest query a range or the word under the cursor is sent as, as VS Code's default
-- query: `:%MemorydRecall` sent the whole file, which the daemon refuses over 100,000 characters.
M.QUERY_MAX = 500

-- Text as a query: each run of white space one space (the lines joined), at most QUERY_MAX
-- characters (code points, counted here: a NUL must not reach vim.fn; one at the cut is kept
-- whole or left out, never halved).
function M.as_query(text)
  text = vim.trim((text:gsub('%s+', ' ')))
  local count = 0
  for start in text:gmatch('()[^\128-\191]') do
    count = count + 1
    if count > M.QUERY_MAX then
      return text:sub(1, start - 1)
    end
  end
  return text
end

-- opts: the command's args, range (0: none), line1, line2. A query typed as args is sent as
-- it is; the range's text and the word under the cursor are cut (`as_query`).
function M.query_from(opts)
  if opts.args and opts.args ~= '' then
    return opts.args
  end
  local text = M.range_text(opts)
  if text and text:match('%S') then
    return M.as_query(text)
  end
  local word = vim.fn.expand('<cword>')
  if word ~= '' then
    return M.as_query(word)
  end
  return nil
end

-- The view draws the newest recall's answer only: a recall waiting on a model answered after
-- the next one drew its query's memories over the ones asked for last.
local latest = require('memoryd.latest').new()

function M.run(query, ctx)
  ctx = ctx or memoryd.buffer_context()
  local params = {
    cwd = ctx.cwd,
    query = query,
    limit = memoryd.config.recall_limit,
    explain = true,
  }
  local ticket = latest.ask()
  memoryd.request('recall', params, function(reply)
    if not latest.take(ticket) then
      return
    end
    local buf = ui.buffer('recall', true, function(b)
      ui.map(b, '<CR>', ui.open_target, 'open the memory')
    end)
    local lines, targets = M.render(reply, query, os.time())
    ui.render(buf, lines, targets)
    -- A recalled memory opened and saved is snapshotted and reconciled in this project.
    local files = require('memoryd.memory_files')
    for _, memory in ipairs(type(reply.memories) == 'table' and reply.memories or {}) do
      if type(memory) == 'table' and type(memory.path) == 'string' then
        files.add_dir(vim.fn.fnamemodify(memory.path, ':h'), ctx.cwd)
      end
    end
  end, {
    timeout_ms = memoryd.config.recall_timeout_ms,
    retry = function()
      M.run(query, ctx)
    end,
  })
end

function M.command(opts)
  local query = M.query_from(opts)
  if not query then
    vim.ui.input({ prompt = 'Recall: ' }, function(input)
      if input and input:match('%S') then
        M.run(input)
      end
    end)
    return
  end
  M.run(query)
end

return M
