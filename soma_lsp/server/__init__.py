"""The soma language server (pygls 2.x): `create_server()` gives a server with every feature.

Modules: `server` (state, protocol fixes, plumbing), `settings`, `convert`, `markdown`, `related`
(ties first + the relevance gate, shared by every feature), one module per feature — `hover`,
`code_lens`, `commands`, `diagnostics`, `symbols`, `links`, `progress` — plus `lifecycle`
(document sync, configuration, watching), `guard` (failure containment) and `transport` (robust
framing).
"""

from .server import NAME, POOL_STATUS, Snapshot, SomaServer, create_server

__all__ = ["NAME", "POOL_STATUS", "Snapshot", "SomaServer", "create_server"]
