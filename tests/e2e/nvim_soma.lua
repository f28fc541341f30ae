-- Drive soma-lsp through the editors/nvim plugin inside real headless Neovim 0.11.
-- Usage: nvim --headless --clean -l nvim_soma.lua <plugin_dir> <workspace> <python> <out.json>
--        [<settings.json> <step,step,...>]   (settings for setup(); only these steps)
-- Every step runs under pcall and records its result (or its error) in R.steps[name]; the JSON goes
-- to stdout and to <out.json>. Assertions are made in tests/e2e/test_nvim.py.
local plugin_dir, workspace, python, out_path = arg[1], arg[2], arg[3], arg[4]
local settings = arg[5] and vim.json.decode(arg[5]) or nil
local only = nil
if arg[6] then
  only = {}
  for name in arg[6]:gmatch('[^,]+') do only[name] = true end
end

vim.g.loaded_python3_provider = 0 -- ftplugin/python probes the provider (~1-2 s) otherwise

local R = { steps = vim.empty_dict(), notifications = {}, order = {} }

local function finish(code)
  R.exit_code = code
  local json = vim.json.encode(R)
  if out_path then
    vim.fn.writefile({ json }, out_path)
  end
  io.stdout:write(json, '\n')
  for _, c in ipairs(vim.lsp.get_clients()) do
    c:stop()
  end
  vim.wait(3000, function() return #vim.lsp.get_clients() == 0 end, 20)
  os.exit(code)
end

--- Run one step; a failure is recorded and the later steps still run unless `fatal`.
local function step(name, fn, fatal)
  if only and not only[name] then
    return true
  end
  table.insert(R.order, name)
  local res = { }
  local ok, err = xpcall(function() fn(res) end, debug.traceback)
  res.ok = ok
  if not ok then
    res.error = tostring(err)
    io.stderr:write('STEP ', name, ' FAILED: ', tostring(err), '\n')
  end
  R.steps[name] = res
  if not ok and fatal then
    finish(3)
  end
  return ok
end

local function need(cond, msg)
  if not cond then
    error(msg, 2)
  end
end

-- capture notifications and the picker
vim.notify = function(msg, level)
  table.insert(R.notifications, { msg = tostring(msg), level = level })
end
local select_calls = {}
local select_choice = nil -- index to pick in the next vim.ui.select, nil = cancel
vim.ui.select = function(items, opts, on_choice)
  local rows = {}
  for i, it in ipairs(items) do
    rows[i] = opts.format_item and opts.format_item(it) or tostring(it)
  end
  table.insert(select_calls, { items = items, rows = rows, prompt = opts.prompt, kind = opts.kind })
  local pick = select_choice
  select_choice = nil
  if pick then
    on_choice(items[pick], pick)
  else
    on_choice(nil, nil)
  end
end

local buf, client
local src_file = workspace .. '/model/transformer.py'

local function find_line(pat)
  for i, l in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
    if l:find(pat) then
      return i - 1, l
    end
  end
end

local function diags(b)
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(b or buf)) do
    table.insert(out, {
      lnum = d.lnum, col = d.col, end_lnum = d.end_lnum, end_col = d.end_col, code = d.code,
      severity = d.severity, source = d.source, message = d.message,
    })
  end
  return out
end

local function has_diag(code)
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    if d.code == code then
      return d
    end
  end
end

local function hover_text(line, col)
  local resp = client:request_sync('textDocument/hover', {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    position = { line = line, character = col },
  }, 10000, buf)
  need(resp, 'hover: no response within 10 s')
  need(not resp.err, 'hover: error ' .. vim.inspect(resp.err))
  local c = resp.result and resp.result.contents
  if type(c) == 'table' and c.value then
    return c.value, c.kind
  elseif type(c) == 'string' then
    return c, 'string'
  elseif type(c) == 'table' then
    local parts = {}
    for _, p in ipairs(c) do
      table.insert(parts, type(p) == 'table' and p.value or tostring(p))
    end
    return table.concat(parts, '\n'), 'marked'
  end
  return nil, nil
end

local function qf_items()
  local out = {}
  for _, it in ipairs(vim.fn.getqflist()) do
    table.insert(out, {
      filename = it.bufnr > 0 and vim.api.nvim_buf_get_name(it.bufnr) or nil,
      lnum = it.lnum, text = it.text, type = it.type,
      id = type(it.user_data) == 'table' and it.user_data.id or nil,
      tied = type(it.user_data) == 'table' and it.user_data.tied or nil,
      dead_end = type(it.user_data) == 'table' and it.user_data.dead_end or nil,
    })
  end
  return out, vim.fn.getqflist({ title = 1 }).title
end

-- ---------------------------------------------------------------------------------------------
step('setup', function(res)
  vim.opt.runtimepath:prepend(plugin_dir)
  vim.cmd.runtime('plugin/soma.lua')
  vim.fn.chdir(workspace)
  res.commands_before_setup = vim.fn.exists(':SomaRelated') == 2
  -- SOMA_E2E_PIPE: connect to a server started with `serve --pipe` instead of starting one
  require('soma').setup({ cmd = { python, '-m', 'soma_lsp' }, pipe = os.getenv('SOMA_E2E_PIPE'), settings = settings })
  res.commands = {
    SomaRelated = vim.fn.exists(':SomaRelated') == 2,
    SomaReload = vim.fn.exists(':SomaReload') == 2,
  }
  res.lens_command_registered = type(vim.lsp.commands['soma.showRelated']) == 'function'
  res.config = vim.lsp.config.soma and {
    cmd = type(vim.lsp.config.soma.cmd) == 'function' and 'rpc.connect' or vim.lsp.config.soma.cmd,
    filetypes = vim.lsp.config.soma.filetypes,
  }
end, true)

step('helptags', function(res)
  vim.cmd('helptags ' .. vim.fn.fnameescape(plugin_dir .. '/doc'))
  res.tags = {}
  for _, t in ipairs({ 'soma', 'soma.txt', ':SomaRelated', ':SomaReload', 'soma-setup', 'soma-health' }) do
    local ok = pcall(vim.cmd.help, t)
    res.tags[t] = ok and vim.fs.basename(vim.api.nvim_buf_get_name(0)) or false
    if ok then
      vim.cmd.helpclose()
    end
  end
end)

local attached, server_exit = false, nil
step('attach', function(res)
  vim.api.nvim_create_autocmd('LspAttach', {
    callback = function(ev)
      local c = vim.lsp.get_client_by_id(ev.data.client_id)
      if c and c.name == 'soma' then
        attached = true
      end
    end,
  })
  vim.cmd.edit(vim.fn.fnameescape(src_file))
  buf = vim.api.nvim_get_current_buf()
  res.filetype = vim.bo[buf].filetype
  vim.wait(20000, function()
    local c = vim.lsp.get_clients({ name = 'soma', bufnr = buf })[1]
    if c and c:is_stopped() then server_exit = true end
    return attached or server_exit
  end, 20)
  need(attached, 'the soma client did not attach within 20 s (exited: ' .. tostring(server_exit) .. ')')
  client = vim.lsp.get_clients({ name = 'soma', bufnr = buf })[1]
  res.server_info = client.server_info
  res.offset_encoding = client.offset_encoding
  res.root_dir = client.root_dir
  res.init_options = client.config.init_options
  res.execute_commands = client.server_capabilities.executeCommandProvider
    and client.server_capabilities.executeCommandProvider.commands
  res.code_lens_provider = client.server_capabilities.codeLensProvider ~= nil
end, true)

step('pool_loaded', function(res)
  local soma = require('soma')
  local function loaded()
    local st = soma.pool_status[client.id]
    return st and not st.indexing and (tonumber(st.records) or 0) > 0
  end
  res.notified = vim.wait(30000, loaded, 50)
  res.notification = soma.pool_status[client.id]
  local resp = client:request_sync('workspace/executeCommand',
    { command = 'soma.poolStatus', arguments = { vim.empty_dict() } }, 10000, buf)
  res.status = resp and resp.result
  res.status_err = resp and resp.err
  if not res.notified then
    -- fall back to polling the command, so the later steps still run
    vim.wait(30000, function()
      local r = client:request_sync('workspace/executeCommand',
        { command = 'soma.poolStatus', arguments = { vim.empty_dict() } }, 5000, buf)
      res.status = r and r.result
      return type(res.status) == 'table' and not res.status.indexing and (tonumber(res.status.records) or 0) > 0
    end, 200)
  end
end)

local class_line, name_col
step('hover', function(res)
  local l, text = find_line('^class RotaryEmbedding')
  need(l, 'class RotaryEmbedding not found in ' .. src_file)
  class_line, name_col = l, text:find('RotaryEmbedding', 1, true) - 1
  res.line, res.character = class_line, name_col + 2
  res.text, res.kind = hover_text(class_line, name_col + 2)
end)

step('hover_float', function(res)
  -- what a Neovim user reads: the hover float's own buffer (Neovim shows Markdown as source)
  vim.api.nvim_win_set_cursor(0, { class_line + 1, name_col + 2 })
  vim.lsp.buf.hover()
  local float
  need(vim.wait(10000, function()
    for _, win in ipairs(vim.api.nvim_list_wins()) do
      if vim.api.nvim_win_get_config(win).relative ~= '' then
        float = win
        return true
      end
    end
  end, 50), 'hover: no float within 10 s')
  res.lines = vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(float), 0, -1, false)
  vim.api.nvim_win_close(float, true)
end)

step('codelens', function(res)
  -- lenses come from the plugin's own refresh (LspAttach / BufEnter / workspace/codeLens/refresh)
  local function on_class()
    for _, lens in ipairs(vim.lsp.codelens.get(buf)) do
      if lens.range.start.line == class_line and lens.command and lens.command.title then
        return lens
      end
    end
  end
  res.appeared_without_nudge = vim.wait(10000, function() return on_class() ~= nil end, 50)
  if not res.appeared_without_nudge then
    vim.cmd('doautocmd <nomodeline> BufEnter') -- what switching back to the buffer does
    vim.wait(10000, function() return on_class() ~= nil end, 50)
  end
  res.lenses = {}
  for _, lens in ipairs(vim.lsp.codelens.get(buf)) do
    table.insert(res.lenses, {
      line = lens.range.start.line,
      title = lens.command and lens.command.title,
      command = lens.command and lens.command.command,
      arguments = lens.command and lens.command.arguments,
    })
  end
  local lens = on_class()
  need(lens, 'no resolved code lens on the RotaryEmbedding line')
  res.class_lens = { title = lens.command.title, command = lens.command.command, arguments = lens.command.arguments }
  -- run it: the client-side soma.showRelated -> soma.findRelatedExperiments -> picker + quickfix
  vim.fn.setqflist({}, 'r', { title = 'empty', items = {} })
  local n = #select_calls
  vim.api.nvim_win_set_cursor(0, { class_line + 1, 0 })
  vim.lsp.codelens.run() -- what a user's mapping does; one lens on the line runs directly
  res.ran = vim.wait(10000, function() return #select_calls > n end, 20)
  res.qf, res.qf_title = qf_items()
  res.rows = res.ran and select_calls[#select_calls].rows or nil
end)

local related_line
step('related', function(res)
  -- a line inside RotaryEmbedding (its docstring), outside any method
  related_line = class_line + 2
  vim.api.nvim_win_set_cursor(0, { related_line + 1, 4 })
  res.cursor_line = related_line
  -- the server's own answer for the same argument, to compare the client's layout with
  local arg = require('soma').related_argument({})
  res.argument = arg
  local direct = client:request_sync('workspace/executeCommand',
    { command = 'soma.findRelatedExperiments', arguments = { arg } }, 10000, buf)
  need(direct and not direct.err, 'findRelatedExperiments: ' .. vim.inspect(direct and direct.err))
  res.server_ids = vim.tbl_map(function(r) return r.id end, direct.result or {})
  res.server_results = direct.result
  vim.fn.setqflist({}, 'r', { title = 'empty', items = {} })
  local n = #select_calls
  select_choice = 1
  vim.cmd('SomaRelated')
  need(vim.wait(10000, function() return #select_calls > n end, 20), ':SomaRelated showed no picker')
  res.rows = select_calls[#select_calls].rows
  res.prompt = select_calls[#select_calls].prompt
  res.qf, res.qf_title = qf_items()
  -- picking the first entry opened its record file at its line
  res.opened = { file = vim.api.nvim_buf_get_name(0), line = vim.api.nvim_win_get_cursor(0)[1] }
  vim.cmd.buffer(buf)
end)

step('related_range', function(res)
  local l = find_line('^    def forward%(self, q')
  need(l, 'RotaryEmbedding.forward not found')
  res.line1, res.line2 = l + 1, l + 4
  vim.fn.setqflist({}, 'r', { title = 'empty', items = {} })
  local n = #select_calls
  vim.cmd(string.format('%d,%dSomaRelated', res.line1, res.line2))
  res.shown = vim.wait(10000, function() return #select_calls > n or #vim.fn.getqflist() > 0 end, 20)
  res.qf = qf_items()
  res.argument_lines = require('soma').related_argument({ range = 2, line1 = res.line1, line2 = res.line2 })
  -- a linewise and a charwise visual selection ('<,'> marks) over the same lines
  vim.cmd(string.format('normal! %dGV%dG\27', res.line1, res.line2))
  res.argument_visual_lines = require('soma').related_argument({ range = 2, line1 = res.line1, line2 = res.line2 })
  vim.cmd(string.format('normal! %dG5|v%dG12|\27', res.line1, res.line2))
  res.argument_visual_chars = require('soma').related_argument({ range = 2, line1 = res.line1, line2 = res.line2 })
  res.line2_length = #vim.api.nvim_buf_get_lines(buf, res.line2 - 1, res.line2, false)[1]
  vim.fn.setqflist({}, 'r', { title = 'empty', items = {} })
  n = #select_calls
  vim.cmd("'<,'>SomaRelated")
  res.visual_shown = vim.wait(10000, function() return #select_calls > n end, 20)
  res.visual_qf = qf_items()
end)

step('diagnostics', function(res)
  res.found = vim.wait(15000, function() return has_diag('exp-0042') ~= nil end, 50)
  if not class_line then
    local l, text = find_line('^class RotaryEmbedding')
    class_line, name_col = l, text:find('RotaryEmbedding', 1, true) - 1
  end
  res.class_line, res.name_col = class_line, name_col
  res.all = diags()
end)

step('checkhealth', function(res)
  vim.cmd('checkhealth soma')
  local hb = vim.api.nvim_get_current_buf()
  res.filetype = vim.bo[hb].filetype
  res.lines = vim.api.nvim_buf_get_lines(hb, 0, -1, false)
  if #vim.api.nvim_list_tabpages() > 1 then
    vim.cmd.tabclose()
  end
  vim.cmd.buffer(buf)
end)

step('reload', function(res)
  local n = #R.notifications
  vim.cmd('SomaReload')
  res.done = vim.wait(15000, function() return #R.notifications > n end, 20)
  res.notification = R.notifications[n + 1]
end)

step('pool_change', function(res)
  local rms_line, text = find_line('^class RMSNorm')
  need(rms_line, 'class RMSNorm not found')
  res.rms_line, res.rms_col = rms_line, text:find('RMSNorm', 1, true) - 1
  local function rms_lens()
    for _, lens in ipairs(vim.lsp.codelens.get(buf)) do
      if lens.range.start.line == rms_line and lens.command then
        return lens.command.title
      end
    end
  end
  res.lens_before = rms_lens()
  local dir = workspace .. '/.soma/pool/nvim-e2e'
  vim.fn.mkdir(dir, 'p')
  local file = dir .. '/exp-9001.json'
  res.file = file
  vim.fn.writefile({ vim.json.encode({
    id = 'exp-9001',
    name = 'rmsnorm-eps-zero',
    status = 'failed',
    created_at = '2026-11-30T08:00:00Z',
    finished_at = '2026-11-30T10:00:00Z',
    conclusion = { headline = 'eps 0 in RMSNorm gives NaN loss at step 40' },
    architecture = { 'RMSNorm' },
    code = { 'model/transformer.py::RMSNorm' },
  }) }, file)
  res.added = vim.wait(20000, function() return has_diag('exp-9001') ~= nil end, 50)
  res.after_add = diags()
  -- the server asks for a lens refresh (workspace/codeLens/refresh); no BufEnter here
  vim.wait(10000, function() return rms_lens() ~= res.lens_before end, 50)
  res.lens_after_add = rms_lens()
  -- the next request sees it too
  vim.api.nvim_win_set_cursor(0, { res.rms_line + 1, res.rms_col + 1 })
  vim.fn.setqflist({}, 'r', { title = 'empty', items = {} })
  local n = #select_calls
  vim.cmd('SomaRelated')
  vim.wait(10000, function() return #select_calls > n end, 20)
  res.related_after_add = vim.tbl_map(function(q) return q.id end, (qf_items()))
  os.remove(file)
  res.removed = vim.wait(20000, function() return has_diag('exp-9001') == nil end, 50)
  res.after_remove = diags()
  res.still_0042 = has_diag('exp-0042') ~= nil
end)

R.select_calls = #select_calls
finish(0)
