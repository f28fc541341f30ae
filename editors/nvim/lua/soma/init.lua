--- soma-lsp for Neovim (>= 0.11): past ML experiments next to the code they bear on.
---
--- The server does the work (ranking, ties, dead ends); this module only starts it through
--- `vim.lsp.config`/`vim.lsp.enable`, keeps code lenses fresh, and lays out the server's results
--- (the result objects of docs/spec.md §2.8) in `vim.ui.select` and the quickfix list. See `:help soma`.
local M = {}

--- Name of the LSP client (`vim.lsp.config("soma", …)`, `vim.lsp.get_clients({ name = "soma" })`).
M.name = 'soma'

M.defaults = {
  --- Command that starts the server (stdio).
  cmd = { 'soma-lsp' },
  --- Path of the Unix socket of a server already started with `soma-lsp serve --pipe PATH`: connect
  --- to it (|vim.lsp.rpc.connect()|) instead of starting `cmd`. Owner-only, unlike `serve --tcp`.
  pipe = nil,
  --- The `soma` settings section (every key of docs/spec.md §4.9: pool, weights, hover, levers, …).
  --- Sent as `initializationOptions` and as the answer to `workspace/configuration` section `soma`.
  settings = {},
  filetypes = {
    'python', 'yaml', 'json', 'toml', 'c', 'cpp', 'cuda', 'rust', 'go', 'julia', 'sh',
    'javascript', 'typescript',
  },
  --- Markers of the workspace root, in priority order (see `:help lsp-root_markers`).
  root_markers = { '.soma', 'pyproject.toml', 'setup.py', 'setup.cfg', '.git' },
  --- Refresh code lenses on BufEnter, InsertLeave and BufWritePost (and when the server asks).
  codelens = true,
  --- Passed through to `vim.lsp.config` when given.
  on_attach = nil,
  capabilities = nil,
  --- Open the quickfix window after `:SomaRelated` / a lens fills the list.
  open_quickfix = false,
}

--- The options in effect (after `setup`), or nil before.
M.config = nil

--- Last `soma/poolStatus` notification per client id.
M.pool_status = {}

local augroup = vim.api.nvim_create_augroup('soma', { clear = false })

local function notify(msg, level)
  vim.notify('soma: ' .. msg, level or vim.log.levels.INFO)
end

--- An empty Lua table encodes as a JSON array; the server expects an object.
local function as_object(t)
  if t == nil or (type(t) == 'table' and next(t) == nil) then
    return vim.empty_dict()
  end
  return t
end

--- The soma settings section given by the user: accept `{ pool = … }` and `{ soma = { pool = … } }`.
local function section(settings)
  settings = settings or {}
  if type(settings.soma) == 'table' then
    return settings.soma
  end
  return settings
end

--- The options in effect, defaults when `setup` was not called.
function M.options()
  return M.config or vim.deepcopy(M.defaults)
end

-- ---------------------------------------------------------------------------------------------
-- clients and requests

--- The soma client for `bufnr` (default: current), else any running soma client.
---@return vim.lsp.Client?
function M.client(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local clients = vim.lsp.get_clients({ name = M.name, bufnr = bufnr })
  if #clients == 0 then
    clients = vim.lsp.get_clients({ name = M.name })
  end
  return clients[1]
end

--- `workspace/executeCommand` through `client` (default: the soma client of `bufnr`);
--- `callback(err, result, client)`.
function M.execute(command, argument, callback, bufnr, client)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  client = client or M.client(bufnr)
  if not client then
    notify('soma-lsp is not running for this buffer (see :checkhealth soma)', vim.log.levels.ERROR)
    return false
  end
  local params = { command = command, arguments = { as_object(argument) } }
  local ok = client:request('workspace/executeCommand', params, function(err, result)
    callback(err, result, client)
  end, bufnr)
  if not ok then
    notify('the request ' .. command .. ' could not be sent', vim.log.levels.ERROR)
  end
  return ok
end

--- A callback for `M.execute` that reports an error of `command`, else hands the result to
--- `present`; then calls `done(err, result)` when given.
local function reporting(command, present, done)
  return function(err, result)
    if err then
      notify(command .. ' failed: ' .. tostring(err.message or vim.inspect(err)), vim.log.levels.ERROR)
    else
      present(result)
    end
    if done then
      done(err, result)
    end
  end
end

-- ---------------------------------------------------------------------------------------------
-- presenting results (docs/spec.md §2.8 objects; the server ranks and formats nothing for us)

local function num(x)
  if type(x) == 'number' then
    return string.format('%.3f', x)
  end
  return '–'
end

local COMPONENTS = { { 'lexical', 'lex' }, { 'structural', 'str' }, { 'recency', 'rec' }, { 'importance', 'imp' } }

--- One picker row: status, dead-end mark, name, id, score, each component with its effective weight.
function M.format_item(r)
  local parts = {}
  local comps, weights = r.components or {}, r.weights or {}
  for _, c in ipairs(COMPONENTS) do
    local v = comps[c[1]]
    if type(v) == 'number' then
      table.insert(parts, string.format('%s %s×%s', c[2], num(v), num(weights[c[1]])))
    else
      table.insert(parts, c[2] .. ' –')
    end
  end
  local row = string.format(
    '[%s]%s%s %s (%s)  score %s  %s',
    tostring(r.status or 'unknown'),
    r.dead_end and ' ✗ dead end' or '',
    r.tied and ' ⚓ tied' or '',
    tostring(r.name or '?'),
    tostring(r.id or '?'),
    num(r.score),
    table.concat(parts, ' ')
  )
  return (row:gsub('[\r\n]+', ' '))
end

--- The quickfix item for one result: the record's pool file at its (1-based) line.
function M.qf_item(r)
  local loc = type(r.location) == 'table' and r.location or nil
  local text = string.format(
    '%s [%s]%s score %s%s',
    tostring(r.name or r.id or '?'),
    tostring(r.status or 'unknown'),
    r.dead_end and ' dead end' or '',
    num(r.score),
    type(r.headline) == 'string' and (' — ' .. r.headline) or ''
  )
  local item = {
    text = (tostring(r.id or '?') .. ': ' .. text):gsub('[\r\n]+', ' '),
    type = r.dead_end and 'W' or 'I',
    user_data = r,
  }
  if loc and type(loc.uri) == 'string' then
    item.filename = vim.uri_to_fname(loc.uri)
    item.lnum = (tonumber(loc.line) or 0) + 1
    item.col = 1
  end
  return item
end

--- Open a result's record file at its line.
function M.open(r)
  local loc = type(r) == 'table' and type(r.location) == 'table' and r.location or nil
  if not (loc and type(loc.uri) == 'string') then
    notify('the record ' .. tostring(r and r.id) .. ' has no location', vim.log.levels.WARN)
    return
  end
  vim.cmd.edit(vim.fn.fnameescape(vim.uri_to_fname(loc.uri)))
  local line = math.min((tonumber(loc.line) or 0) + 1, vim.api.nvim_buf_line_count(0))
  vim.api.nvim_win_set_cursor(0, { line, 0 })
end

--- Show a list of results: fill the quickfix list, then offer them in `vim.ui.select`.
function M.show_results(results, title)
  -- the order is the server's: tied to this code first (dead ends first), then by score
  title = title or 'soma: related experiments (⚓ tied to this code first, then by score)'
  if type(results) ~= 'table' then
    results = {}
  end
  local items = vim.tbl_map(M.qf_item, results)
  vim.fn.setqflist({}, ' ', { title = title, items = items })
  if #results == 0 then
    notify('no related experiments')
    return
  end
  if M.options().open_quickfix then
    vim.cmd('botright copen')
  end
  vim.ui.select(results, {
    prompt = title,
    kind = 'soma.experiment',
    format_item = M.format_item,
  }, function(choice)
    if choice then
      M.open(choice)
    end
  end)
end

--- `soma.findRelatedExperiments` with `argument` (`{uri, position?, range?, text?, limit?}`), then
--- present the list. `done(err, results)` is called afterwards when given; `client` defaults to the
--- soma client of `bufnr`.
function M.find_related(argument, bufnr, done, client)
  local command = 'soma.findRelatedExperiments'
  return M.execute(command, argument, reporting(command, M.show_results, done), bufnr, client)
end

--- The argument for the current buffer: the range when `opts.range > 0` (from `:SomaRelated`
--- given a range; the visual selection when the range is the last visual one), else the cursor.
function M.related_argument(opts)
  opts = opts or {}
  local bufnr = vim.api.nvim_get_current_buf()
  local client = M.client(bufnr)
  local enc = client and client.offset_encoding or 'utf-16'
  local uri = vim.uri_from_bufnr(bufnr)
  if (opts.range or 0) > 0 then
    local vs, ve = vim.api.nvim_buf_get_mark(bufnr, '<'), vim.api.nvim_buf_get_mark(bufnr, '>')
    local s, e
    if vs[1] == opts.line1 and ve[1] == opts.line2 and vs[1] > 0 then
      s, e = vs, ve -- the visual selection (charwise or linewise)
    else
      s, e = { opts.line1, 0 }, { opts.line2, 0 }
      e[2] = math.max(0, #(vim.api.nvim_buf_get_lines(bufnr, e[1] - 1, e[1], false)[1] or '') - 1)
    end
    -- linewise visual marks carry a huge column; clamp to the last character of the line
    local last = vim.api.nvim_buf_get_lines(bufnr, e[1] - 1, e[1], false)[1] or ''
    e = { e[1], math.max(0, math.min(e[2], #last - 1)) }
    local p = vim.lsp.util.make_given_range_params(s, e, bufnr, enc)
    if #last == 0 then
      p.range['end'].character = 0
    end
    return { uri = uri, range = p.range }
  end
  local p = vim.lsp.util.make_position_params(0, enc)
  return { uri = uri, position = p.position }
end

--- `:SomaRelated`
function M.related(opts)
  return M.find_related(M.related_argument(opts))
end

--- Run a server command without arguments and tell the user how it went.
local function run_and_report(command, describe, done)
  return M.execute(command, vim.empty_dict(), reporting(command, function(result)
    notify(describe(result))
  end, done))
end

--- `:SomaReload`
function M.reload(done)
  return run_and_report('soma.reloadPool', function(result)
    if type(result) == 'table' and result.records ~= nil then
      return string.format('pool reloaded: %s records, %s errors', tostring(result.records),
        tostring(type(result.errors) == 'table' and #result.errors or result.errors))
    end
    return 'pool reloaded'
  end, done)
end

--- `:SomaStatus`
function M.status(done)
  return run_and_report('soma.poolStatus', vim.inspect, done)
end

--- The client-side lens command `soma.showRelated` (arguments `[{uri, position}]`).
function M.show_related_command(command, ctx)
  local argument = command.arguments and command.arguments[1]
  if type(argument) ~= 'table' then
    notify('soma.showRelated: missing argument', vim.log.levels.ERROR)
    return
  end
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if client then
    M.find_related(argument, ctx.bufnr, nil, client)
  end
end

-- ---------------------------------------------------------------------------------------------
-- code lenses

local function refresh_lenses(bufnr)
  if vim.api.nvim_buf_is_valid(bufnr) and M.client(bufnr) then
    vim.lsp.codelens.refresh({ bufnr = bufnr })
  end
end

local function on_attach(client, bufnr)
  local opts = M.options()
  if opts.codelens and client:supports_method('textDocument/codeLens') then
    vim.api.nvim_clear_autocmds({ group = augroup, buffer = bufnr })
    vim.api.nvim_create_autocmd({ 'BufEnter', 'InsertLeave', 'BufWritePost' }, {
      group = augroup,
      buffer = bufnr,
      desc = 'soma: refresh code lenses',
      callback = function(ev)
        refresh_lenses(ev.buf)
      end,
    })
    refresh_lenses(bufnr)
  end
end

local handlers = {
  --- Server → client: the pool was (re)loaded or changed.
  ['soma/poolStatus'] = function(_, result, ctx)
    M.pool_status[ctx.client_id] = result
    vim.api.nvim_exec_autocmds('User', { pattern = 'SomaPoolStatus', modeline = false, data = result })
  end,
  --- Neovim 0.11 has no default handler for this request.
  ['workspace/codeLens/refresh'] = function(_, _, ctx)
    if M.options().codelens then
      for _, bufnr in ipairs(vim.lsp.get_buffers_by_client_id(ctx.client_id)) do
        refresh_lenses(bufnr)
      end
    end
    return vim.NIL
  end,
}

--- The table given to `vim.lsp.config("soma", …)`.
function M.lsp_config(opts)
  opts = opts or M.options()
  local settings = as_object(section(opts.settings))
  local capabilities = vim.tbl_deep_extend('force', {
    workspace = { codeLens = { refreshSupport = opts.codelens and true or false } },
  }, opts.capabilities or {})
  return {
    cmd = opts.pipe and vim.lsp.rpc.connect(opts.pipe) or opts.cmd,
    filetypes = opts.filetypes,
    root_markers = opts.root_markers,
    init_options = settings,
    settings = { soma = settings },
    capabilities = capabilities,
    handlers = handlers,
    on_attach = opts.on_attach,
    commands = { ['soma.showRelated'] = M.show_related_command },
  }
end

--- Configure and enable the server. Calling it again replaces the options.
function M.setup(opts)
  if vim.fn.has('nvim-0.11') ~= 1 then
    notify('Neovim 0.11 or later is required', vim.log.levels.ERROR)
    return
  end
  opts = opts or {}
  local config = vim.tbl_extend('force', vim.deepcopy(M.defaults), opts)
  if type(config.cmd) == 'string' then
    config.cmd = { config.cmd }
  end
  M.config = config
  -- the lens command is client-side (the server does not advertise it)
  vim.lsp.commands['soma.showRelated'] = M.show_related_command
  require('soma.commands').create() -- again: setup() may run before plugin/soma.lua
  -- an autocmd rather than on_attach, so a user's `vim.lsp.config('*', { on_attach = … })` still runs
  vim.api.nvim_create_autocmd('LspAttach', {
    group = vim.api.nvim_create_augroup('soma.attach', { clear = true }),
    desc = 'soma: code lens refresh',
    callback = function(ev)
      local client = vim.lsp.get_client_by_id(ev.data.client_id)
      if client and client.name == M.name then
        on_attach(client, ev.buf)
      end
    end,
  })
  vim.lsp.config(M.name, M.lsp_config(config))
  vim.lsp.enable(M.name)
end

return M
