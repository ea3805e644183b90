-- Building a view's text: lines plus the target each line stands for, and the pieces the
-- rules and memories views share (the instruction file tree, the paths: note, the warnings).
local format = require('memoryd.format')

local M = {}

-- A fresh builder: b.add(text, target) appends a line; b.lines, b.targets are the result.
function M.builder()
  local b = { lines = {}, targets = {} }
  function b.add(text, target)
    b.lines[#b.lines + 1] = text
    if target then
      b.targets[#b.lines] = target
    end
  end
  return b
end

-- Instruction files grouped by type in load order, each @include indented under the file
-- that includes it. short(path) shortens paths; note(file) adds text after the path.
function M.file_tree(b, files, indent, short, note)
  local depth, current_type = {}, nil
  for _, file in ipairs(files) do
    local d = (file.parent and depth[file.parent]) and depth[file.parent] + 1 or 0
    depth[file.path] = d
    if d == 0 and file.type ~= current_type then
      current_type = file.type
      b.add(indent .. tostring(file.type))
    end
    local arrow = d > 0 and '↳ ' or ''
    b.add(indent .. string.rep('  ', d + 1) .. arrow .. short(file.path) .. note(file), { kind = 'file', path = file.path })
  end
end

-- The note after a conditional rule: its paths: globs, and the file that matched them.
function M.globs_note(globs, matched)
  local list = type(globs) == 'table' and table.concat(vim.tbl_map(tostring, globs), ', ') or tostring(globs or '')
  return ('  [paths: %s%s]'):format(list, matched and (', matched by ' .. matched) or '')
end

function M.warnings(b, warnings)
  if type(warnings) ~= 'table' or #warnings == 0 then
    return
  end
  b.add('')
  b.add('Warnings')
  for _, warning in ipairs(warnings) do
    b.add('  ' .. format.one_line(warning, 200))
  end
end

return M
