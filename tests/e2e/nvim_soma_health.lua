-- :checkhealth soma alone, for a given server command and workspace.
-- Usage: nvim --headless --clean -l nvim_soma_health.lua <plugin_dir> <workspace> <cmd.json> <out.json>
local plugin_dir, workspace, cmd_json, out_path = arg[1], arg[2], arg[3], arg[4]
vim.g.loaded_python3_provider = 0
local R = { notifications = {} }
vim.notify = function(msg, level) table.insert(R.notifications, { msg = tostring(msg), level = level }) end
local ok, err = pcall(function()
  vim.opt.runtimepath:prepend(plugin_dir)
  vim.cmd.runtime('plugin/soma.lua')
  vim.fn.chdir(workspace)
  require('soma.health').timeout = 10000
  require('soma').setup({ cmd = vim.json.decode(cmd_json) })
  vim.cmd('checkhealth soma')
  R.lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  -- no client in a scratch buffer: the commands say so instead of failing silently
  if #vim.api.nvim_list_tabpages() > 1 then vim.cmd.tabclose() end
  vim.cmd.enew()
  vim.cmd('SomaRelated')
  vim.cmd('SomaReload')
  R.no_client = vim.tbl_map(function(n) return n.msg end, R.notifications)
end)
dofile(vim.fs.joinpath(vim.fs.dirname(arg[0]), 'nvim_finish.lua'))(R, ok, err, out_path)
