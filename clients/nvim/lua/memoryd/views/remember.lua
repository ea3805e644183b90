-- :MemorydRemember [text] — save the selection, the text given, or a typed line as a memory
-- (memory.write): pick the type, confirm the name, and, when the project has team sync,
-- choose between personal and team memory (team: true).
local memoryd = require('memoryd')
local format = require('memoryd.format')
local recall = require('memoryd.views.recall')

local M = {}

M.TYPES = {
  { 'user', 'about you: role, preferences, knowledge' },
  { 'feedback', 'how to work: corrections and confirmed approaches' },
  { 'project', 'the work: goals, decisions, deadlines' },
  { 'reference', 'where things are: links, dashboards, channels' },
}

-- The text's first line with words, as a name or description may hold it (format.as_field):
-- memory.write refused the fields derived from a line holding a bidi override or a C1 control.
local function first_line(text)
  for line in (text .. '\n'):gmatch('([^\n]*)\n') do
    local field = format.as_field(line)
    if field ~= '' then
      return field
    end
  end
  return ''
end

-- Pure: the memory.write params for a text, a type and a name.
function M.params(ctx, text, kind, name, team)
  local params = {
    cwd = ctx.cwd,
    type = kind,
    name = format.one_line(name, 100),
    description = format.one_line(first_line(text), 150),
    body = text,
  }
  if team then
    params.team = true
  end
  return params
end

function M.default_name(text)
  return format.one_line(first_line(text), 60)
end

local function text_from(opts)
  if opts.args and opts.args ~= '' then
    return opts.args
  end
  return recall.range_text(opts)
end

-- Ask the remaining questions, then write.
function M.save(ctx, text)
  if not text or not text:match('%S') then
    memoryd.message('nothing to remember: the text is empty', vim.log.levels.WARN)
    return
  end
  -- Whether the project has team sync, asked while the user picks a type. The daemon answers
  -- team.status for every project once team sync is configured; only one with a team
  -- repository (`repo`, else null with `suppressed: no_repo`) syncs a team memory.
  local team_known, team_available = false, false
  local waiting = nil
  memoryd.request('team.status', { cwd = ctx.cwd }, function(reply)
    team_known = true
    team_available = type(reply.repo) == 'string' and reply.repo ~= ''
    if waiting then
      waiting()
    end
  end, {
    on_error = function()
      team_known = true
      if waiting then
        waiting()
      end
      return true
    end,
  })

  local items = {}
  for _, t in ipairs(M.TYPES) do
    items[#items + 1] = t[1]
  end
  vim.ui.select(items, {
    prompt = 'Memory type',
    format_item = function(item)
      for _, t in ipairs(M.TYPES) do
        if t[1] == item then
          return ('%-9s %s'):format(item, t[2])
        end
      end
      return item
    end,
  }, function(kind)
    if not kind then
      return
    end
    vim.ui.input({ prompt = 'Name: ', default = M.default_name(text) }, function(name)
      if not name or not name:match('%S') then
        return
      end
      local function write(team)
        memoryd.request('memory.write', M.params(ctx, text, kind, name, team), function(reply)
          local where = team and 'team memory' or 'memory'
          local note = reply.merged_into and (' (merged into ' .. format.basename(reply.merged_into) .. ')') or ''
          memoryd.message(('saved %s %s%s'):format(where, format.basename(reply.path), note))
          -- The daemon warns, e.g. when the text looks like it holds a secret.
          for _, warning in ipairs(type(reply.warnings) == 'table' and reply.warnings or {}) do
            memoryd.message(format.one_line(warning, format.WARNING_MAX), vim.log.levels.WARN)
          end
        end)
      end
      local function choose_scope()
        if not team_available then
          write(false)
          return
        end
        vim.ui.select(
          { 'personal', 'team' },
          {
            prompt = 'Save for',
            format_item = function(item)
              return item == 'team' and 'the team (synced team memory)' or 'me (auto memory)'
            end,
          },
          function(scope)
            if scope then
              write(scope == 'team')
            end
          end
        )
      end
      if team_known then
        choose_scope()
      else
        waiting = choose_scope
      end
    end)
  end)
end

function M.command(opts)
  local ctx = memoryd.buffer_context()
  local text = text_from(opts)
  if text then
    M.save(ctx, text)
    return
  end
  vim.ui.input({ prompt = 'Remember: ' }, function(input)
    if input then
      M.save(ctx, input)
    end
  end)
end

return M
