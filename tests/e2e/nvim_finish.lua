-- How every headless Neovim driver here ends: its results written as JSON, the LSP clients stopped,
-- exit 0 (a failure is in the results, not in the exit status).
return function(R, ok, err, out_path)
  R.ok, R.error = ok, not ok and tostring(err) or nil
  vim.fn.writefile({ vim.json.encode(R) }, out_path)
  for _, c in ipairs(vim.lsp.get_clients()) do c:stop() end
  vim.wait(3000, function() return #vim.lsp.get_clients() == 0 end, 20)
  os.exit(0)
end
