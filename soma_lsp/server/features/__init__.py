"""The server's features, one module each. Every module exposes `register(session, pools)`, which
installs its LSP handlers and commands through pygls and subscribes to the session's hooks; only
`server.app` imports them. A feature never imports another feature."""
