--- `:checkhealth soma`: the server command, a fresh server answering `initialize`, and its pool
--- (through `soma.poolStatus`). Starts its own short-lived server instance, so it works before any
--- buffer is attached; reports the running clients as well.
local M = {}

local health = vim.health

--- How long each step may take (ms). A large pool may need longer to index.
M.timeout = 15000

local function count(x)
  if type(x) == 'table' then
    return #x
  end
  return tonumber(x) or 0
end

local function rpc_error_text(err)
  if type(err) ~= 'table' then
    return tostring(err)
  end
  return string.format('%s (code %s)', tostring(err.message), tostring(err.code))
end

--- Start `cmd`, `initialize` it for `root`, wait for the pool, ask `soma.poolStatus`, shut down.
--- Returns a table: { init = result|nil, init_err, status = result|nil, status_err, exit, notified }.
local function probe(cmd, root, settings)
  local out = { notified = false }
  local exited = false
  local ok, rpc = pcall(vim.lsp.rpc.start, cmd, {
    notification = function(method, params)
      if method == 'soma/poolStatus' then
        out.notified = true
        out.last_notification = params
      end
    end,
    server_request = function(method, params)
      if method == 'workspace/configuration' then
        local res = {}
        for _, item in ipairs(params and params.items or {}) do
          table.insert(res, (item.section == 'soma' or item.section == nil) and settings or vim.NIL)
        end
        return res
      end
      return vim.NIL -- registerCapability, workDoneProgress/create, …
    end,
    on_exit = function(code, signal)
      exited = true
      out.exit = { code = code, signal = signal }
    end,
  }, { cwd = root })
  if not ok then
    out.init_err = tostring(rpc)
    return out
  end

  local function request(method, params)
    local done, res, e = false, nil, nil
    local sent = rpc.request(method, params, function(err, result)
      done, res, e = true, result, err
    end)
    if not sent then
      return nil, 'could not send ' .. method
    end
    if not vim.wait(M.timeout, function() return done or exited end, 20) then
      return nil, string.format('no answer to %s within %d ms', method, M.timeout)
    end
    if not done then
      return nil, string.format('the server exited (code %s, signal %s) before answering %s',
        tostring(out.exit and out.exit.code), tostring(out.exit and out.exit.signal), method)
    end
    return res, e and rpc_error_text(e) or nil
  end

  local root_uri = vim.uri_from_fname(root)
  out.init, out.init_err = request('initialize', {
    processId = vim.fn.getpid(),
    clientInfo = { name = 'Neovim checkhealth soma', version = tostring(vim.version()) },
    rootUri = root_uri,
    rootPath = root,
    workspaceFolders = { { uri = root_uri, name = vim.fs.basename(root) } },
    initializationOptions = settings,
    capabilities = vim.lsp.protocol.make_client_capabilities(),
  })
  if out.init then
    rpc.notify('initialized', vim.empty_dict())
    -- the pool loads after `initialized`; the server announces the result with soma/poolStatus
    vim.wait(M.timeout, function()
      return exited or (out.notified and not (out.last_notification or {}).indexing)
    end, 20)
    local deadline = vim.uv.now() + M.timeout
    repeat
      out.status, out.status_err = request('workspace/executeCommand',
        { command = 'soma.poolStatus', arguments = { vim.empty_dict() } })
      local indexing = type(out.status) == 'table' and out.status.indexing
      if indexing then
        vim.wait(100)
      end
    until not indexing or vim.uv.now() > deadline or exited
    if not exited then
      request('shutdown', vim.NIL)
      rpc.notify('exit', vim.NIL)
      vim.wait(2000, function() return exited end, 20)
    end
  end
  if not exited then
    rpc.terminate()
  end
  return out
end

function M.check()
  local soma = require('soma')
  local opts = soma.options()

  health.start('soma: setup')
  if vim.fn.has('nvim-0.11') == 1 then
    health.ok('Neovim ' .. tostring(vim.version()))
  else
    health.error('Neovim 0.11 or later is required, this is ' .. tostring(vim.version()))
    return
  end
  if soma.config then
    health.ok('require("soma").setup() was called')
  else
    health.warn('require("soma").setup() was not called; checking with the defaults',
      { 'Call require("soma").setup({}) in your config (see :help soma-setup)' })
  end
  local clients = vim.lsp.get_clients({ name = soma.name })
  for _, c in ipairs(clients) do
    local info = c.server_info or {}
    health.info(string.format('running client %d: %s %s, root %s, buffers %d', c.id,
      tostring(info.name or '?'), tostring(info.version or '?'), tostring(c.root_dir),
      #vim.lsp.get_buffers_by_client_id(c.id)))
  end

  health.start('soma: server')
  local cmd = opts.cmd
  if type(cmd) ~= 'table' or type(cmd[1]) ~= 'string' then
    health.error('cmd must be a list of strings, got ' .. vim.inspect(cmd))
    return
  end
  if vim.fn.executable(cmd[1]) ~= 1 then
    health.error(string.format('server command not found: %s', cmd[1]), {
      'Install the server: pip install soma-lsp (or `make install` in the soma-lsp checkout)',
      'or point setup({ cmd = { "/path/to/soma-lsp" } }) at it',
    })
    return
  end
  health.ok(string.format('server command: %s (%s)', table.concat(cmd, ' '), vim.fn.exepath(cmd[1])))

  local root = vim.fs.root(0, opts.root_markers) or vim.fn.getcwd()
  local settings = opts.settings or {}
  if type(settings.soma) == 'table' then
    settings = settings.soma
  end
  if next(settings) == nil then
    settings = vim.empty_dict()
  end
  local out = probe(cmd, root, settings)
  if not out.init then
    health.error('the server did not answer initialize: ' .. tostring(out.init_err), {
      'Run the command in a terminal to see its error output',
      'LSP log: ' .. vim.lsp.log.get_filename(),
    })
    return
  end
  local info = out.init.serverInfo or {}
  health.ok(string.format('the server answers initialize: %s %s', tostring(info.name or '?'),
    tostring(info.version or '(no version)')))

  health.start('soma: experiment pool')
  health.info('workspace root: ' .. root)
  local st = out.status
  if type(st) ~= 'table' then
    health.error('soma.poolStatus failed: ' .. tostring(out.status_err or 'no result'))
    return
  end
  local pools = type(st.pools) == 'table' and st.pools or {}
  if #pools == 0 then
    health.warn('no pool configured or found', {
      'Create .soma/pool in the workspace, or set settings.pool / $SOMA_POOL',
    })
  end
  for _, p in ipairs(pools) do
    if vim.uv.fs_stat(p) then
      health.ok('pool: ' .. p)
    else
      health.warn('pool does not exist: ' .. p)
    end
  end
  if st.indexing then
    health.warn('the pool is still being indexed')
  end
  local records, errors = count(st.records), count(st.errors)
  if records > 0 then
    health.ok(string.format('%d records in %s files', records, tostring(st.files or '?')))
  elseif #pools > 0 then
    health.warn('the pool holds no records')
  end
  if records == 0 and errors == 0 then
    return
  elseif errors > 0 then
    health.warn(string.format('%d problems in the pool (bad records or unreadable files)', errors),
      { 'Run `soma-lsp check` in the workspace for the list' })
  else
    health.ok('no problems in the pool')
  end
end

return M
