"""The soma language server (pygls 2.x): `create_server()` gives a server with every feature.

Layout (README.md): `app` wires everything and is the only importer of `features/`; `session`
(state, per-request snapshots, hooks), `pool_service` (settings, pool, watching, status),
`protocol` (pygls fixes), `transport` (framing, stdio/tcp) know no feature. Shared, feature-free
helpers: `related` (ties + relevance gate), `ids`, `hover_view`, `settings`, `convert`, `markdown`,
`guard`, `progress`, `timing`.
"""

from .app import NAME, SomaServer, create_server
from .pool_service import POOL_STATUS
from .session import Document, Snapshot

__all__ = ["NAME", "POOL_STATUS", "Document", "Snapshot", "SomaServer", "create_server"]
