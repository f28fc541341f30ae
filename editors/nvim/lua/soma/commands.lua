--- The user commands `:SomaRelated`, `:SomaReload`, `:SomaStatus` and the client-side lens command
--- `soma.showRelated`, written once for plugin/soma.lua (at start-up, before `require('soma')` has
--- loaded: each command loads it on first use) and for `setup()`.
local M = {}

--- name → { function of `require('soma')` to call with the command's opts, command attributes }
M.commands = {
  SomaRelated = { 'related', { range = true, desc = 'soma: experiments related to the cursor or the range' } },
  SomaReload = { 'reload', { desc = 'soma: reload the experiment pool' } },
  SomaStatus = { 'status', { desc = 'soma: show the pool status' } },
}

--- Define the user commands, and `soma.showRelated` unless something defined it already (a "soma"
--- client configured with `vim.lsp.config` but without `setup()` still gets working lenses).
function M.create()
  for name, spec in pairs(M.commands) do
    local fn, attributes = spec[1], spec[2]
    vim.api.nvim_create_user_command(name, function(o)
      -- :SomaReload and :SomaStatus take no arguments: their functions' parameter is a callback
      require('soma')[fn](attributes.range and o or nil)
    end, attributes)
  end
  if vim.lsp.commands['soma.showRelated'] == nil then
    vim.lsp.commands['soma.showRelated'] = function(command, ctx)
      return require('soma').show_related_command(command, ctx)
    end
  end
end

return M
