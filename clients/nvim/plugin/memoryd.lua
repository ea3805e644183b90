-- memoryd user commands and autocommands. Nothing connects until a command runs or setup()
-- is called (setup() subscribes to notifications).
if vim.g.loaded_memoryd then
  return
end
vim.g.loaded_memoryd = true

if vim.fn.has('nvim-0.7') == 0 then
  vim.notify('memoryd.nvim needs Neovim 0.7 or newer', vim.log.levels.WARN)
  return
end

local command = vim.api.nvim_create_user_command
-- The commands without arguments take `|` and a next command (`:MemorydStatus | wincmd p`);
-- the ones with text keep `|` as part of it, as Vim's own commands that take text do.

command('MemorydRules', function()
  require('memoryd.views.rules').open()
end, { bar = true, desc = 'memoryd: the instruction files in effect for this buffer' })

command('MemorydRecall', function(opts)
  require('memoryd.views.recall').command(opts)
end, { nargs = '*', range = true, desc = 'memoryd: recall memories (default: word or selection)' })

command('MemorydRemember', function(opts)
  require('memoryd.views.remember').command(opts)
end, { nargs = '*', range = true, desc = 'memoryd: save the selection or a line as a memory' })

command('MemorydMemories', function()
  require('memoryd.views.memories').open()
end, { bar = true, desc = 'memoryd: memories and instruction files; edit, delete, history, restore' })

command('MemorydStatus', function()
  require('memoryd.views.status').open()
end, { bar = true, desc = 'memoryd: daemon status, model, team sync' })

command('MemorydStart', function()
  require('memoryd').start_daemon()
end, { bar = true, desc = 'memoryd: start the daemon (memctl start)' })

local group = vim.api.nvim_create_augroup('memoryd', { clear = true })
-- A memory file saved in place: its text before the save is kept in history, MEMORY.md is
-- brought in step after it (lua/memoryd/memory_files.lua; loaded once a view listed memories).
vim.api.nvim_create_autocmd('BufWritePre', {
  group = group,
  callback = function(args)
    if package.loaded['memoryd.memory_files'] then
      local file = vim.fn.fnamemodify(args.file, ':p')
      require('memoryd.memory_files').before_write(file, vim.bo[args.buf].modified)
    end
  end,
})
-- Neovim's exit waited for the connection's unsent requests while the daemon read nothing
-- (hung, stopped with SIGSTOP, stuck on a disk): :qa hung for as long as the daemon did, once
-- the requests were more than the socket holds. Closed first, they are dropped.
vim.api.nvim_create_autocmd('VimLeavePre', {
  group = group,
  callback = function()
    if package.loaded['memoryd'] then
      require('memoryd').close()
    end
  end,
})
vim.api.nvim_create_autocmd('BufWritePost', {
  group = group,
  callback = function(args)
    if package.loaded['memoryd.views.rules'] then
      require('memoryd.views.rules').on_write(vim.fn.fnamemodify(args.file, ':p'))
    end
    if package.loaded['memoryd.memory_files'] then
      require('memoryd.memory_files').after_write(vim.fn.fnamemodify(args.file, ':p'))
    end
  end,
})
