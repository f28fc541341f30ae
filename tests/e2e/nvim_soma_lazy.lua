-- The lazy.nvim spec of editors/nvim/README.md, run as lazy.nvim runs it but without lazy.nvim (which
-- would need the network): its `config` is given the plugin lazy.nvim would pass, whose `dir` is the
-- clone — here a copy of the repository — and the spec's `opts` (with the test's server command).
-- Usage: nvim --headless --clean -l nvim_soma_lazy.lua <readme> <clone> <workspace> <cmd.json> <out.json>
local readme, clone, workspace, cmd_json, out_path = arg[1], arg[2], arg[3], arg[4], arg[5]
vim.g.loaded_python3_provider = 0
local R = {}
local ok, err = pcall(function()
  local text = table.concat(vim.fn.readfile(readme), '\n')
  local block = text:match('<!%-%- lazy%.nvim spec[^\n]*%-%->\n```lua\n(.-)\n```')
  assert(block, 'no lazy.nvim spec block in ' .. readme)
  local spec = assert(loadstring(block, 'the README spec'))()
  R.spec = { name = spec.name, url = spec.url, dir = spec.dir, lazy = spec.lazy, config = type(spec.config) }
  R.commands_before = vim.fn.exists(':SomaRelated') == 2
  local opts = vim.tbl_deep_extend('force', spec.opts or {}, { cmd = vim.json.decode(cmd_json) })
  spec.config({ name = spec.name, dir = clone }, opts)
  R.commands = vim.fn.exists(':SomaRelated') == 2 and vim.fn.exists(':SomaReload') == 2
    and vim.fn.exists(':SomaStatus') == 2
  R.help = vim.fn.globpath(vim.o.runtimepath, 'doc/tags', false, true)
  R.help_found = pcall(vim.cmd.help, 'soma-setup')
  vim.cmd('silent! only')
  vim.fn.chdir(workspace)
  require('soma.health').timeout = 10000
  vim.cmd('checkhealth soma')
  R.health = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  vim.cmd.tabnew(workspace .. '/model/transformer.py')
  R.attached = vim.wait(30000, function()
    return #vim.lsp.get_clients({ name = 'soma', bufnr = vim.api.nvim_get_current_buf() }) > 0
  end, 50)
end)
dofile(vim.fs.joinpath(vim.fs.dirname(arg[0]), 'nvim_finish.lua'))(R, ok, err, out_path)
