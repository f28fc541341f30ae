-- soma-lsp: user commands only. Nothing starts until require("soma").setup() is called
-- (or a "soma" client is configured with vim.lsp.config); the module loads on first use.
if vim.g.loaded_soma == 1 then
  return
end
vim.g.loaded_soma = 1
if vim.fn.has('nvim-0.11') ~= 1 then
  return
end
require('soma.commands').create()
