-- soma-lsp: user commands only. Nothing starts until require("soma").setup() is called
-- (or a "soma" client is configured with vim.lsp.config); the module loads on first use.
if vim.g.loaded_soma == 1 then
  return
end
vim.g.loaded_soma = 1
if vim.fn.has('nvim-0.11') ~= 1 then
  return
end

vim.api.nvim_create_user_command('SomaRelated', function(o)
  require('soma').related(o)
end, { range = true, desc = 'soma: experiments related to the cursor or the range' })
vim.api.nvim_create_user_command('SomaReload', function()
  require('soma').reload()
end, { desc = 'soma: reload the experiment pool' })
vim.api.nvim_create_user_command('SomaStatus', function()
  require('soma').status()
end, { desc = 'soma: show the pool status' })

-- the client-side code lens command, for a "soma" client configured without setup()
if vim.lsp.commands['soma.showRelated'] == nil then
  vim.lsp.commands['soma.showRelated'] = function(command, ctx)
    return require('soma').show_related_command(command, ctx)
  end
end
