"""The one place that wires the server: a pygls server, its session and pool, and every feature.

Only this module imports the features. Each feature module under `features/` exposes
`register(session, pools)`, which installs its handlers and commands through pygls and subscribes
to the session's hooks; adding a feature is one module there and one entry in `FEATURES`. The order
of `FEATURES` is the order hook subscribers run in (diagnostics publish before lenses recompute).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import FeatureRequestError
from pygls.lsp.server import LanguageServer

from .. import __version__
from . import transport
from .features import code_lens, commands, diagnostics, hover, lifecycle, links, symbols
from .commit_service import CommitTieService
from .pool_service import PoolService
from .protocol import SomaProtocol
from .session import Session

log = logging.getLogger("soma_lsp.server")

NAME = "soma-lsp"
SWITCH_INTERVAL = 0.0005  # seconds, see `SomaServer.run`

FEATURES = (lifecycle, hover, diagnostics, code_lens, commands, links, symbols)


class SomaServer(LanguageServer):
    """pygls' server with a `session` (state) and `pools` (the pool behind it); how it runs and
    stops. Features never see this class: they get the session."""

    def __init__(self) -> None:
        super().__init__(NAME, __version__, protocol_cls=SomaProtocol,
                         text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental)
        self.session = Session(self)
        self.pools = PoolService(self.session)
        self.commits = CommitTieService(self.session)
        self.exit_code: int | None = None
        self._stop_event: asyncio.Event | None = None

    def report_server_error(self, error: Exception, source: Any) -> None:
        """pygls' default shows a message for every failed notification; log instead (the features
        contain their own failures, and a popup while typing is in the way). Failed requests are
        answered with their error already."""
        if source is FeatureRequestError:
            return
        log.error("server error (%s): %s", getattr(source, "__name__", source), error)
        self.session.log_message(f"soma: internal error: {error}", lsp.MessageType.Error)

    def stop(self, code: int) -> None:
        self.exit_code = code
        if self._stop_event is not None:
            self._stop_event.set()

    def shutdown(self) -> None:  # pygls calls this on the way out of its own loops; ours below
        self._cleanup()

    def _cleanup(self) -> None:
        self.pools.close()
        self.session.close()

    async def run(self, read: Callable[[], Any], writer: Any) -> int:
        """Serve one connection until `exit` or end of input; the exit status."""
        self.session.attach(asyncio.get_running_loop())
        self._stop_event = asyncio.Event()
        # Queries hand the GIL back and forth with a pool load that parses in another thread; a
        # short switch interval keeps each handoff (numpy releases the GIL on every array op)
        # from waiting the default 5 ms behind the loader — hovers stay prompt during a reindex.
        sys.setswitchinterval(SWITCH_INTERVAL)
        self.protocol.set_writer(writer)
        try:
            await transport.serve_stream(read, self.protocol, self._stop_event)
        finally:
            self._cleanup()
        if self.exit_code is None:  # the client went away without `exit`
            return 0 if self.protocol._shutdown else 1
        return self.exit_code

    def serve_stdio(self, stdin=None, stdout=None) -> int:
        return transport.serve_stdio(self, stdin, stdout)

    def serve_tcp(self, host: str, port: int, ready: Callable[[str, int], None] | None = None) -> int:
        return transport.serve_tcp(self, host, port, ready)

    def serve_pipe(self, path: str, ready: Callable[[str], None] | None = None) -> int:
        return transport.serve_pipe(self, path, ready)


def create_server() -> SomaServer:
    """A server with every feature registered."""
    server = SomaServer()
    for feature in FEATURES:
        feature.register(server.session, server.pools)
    return server
