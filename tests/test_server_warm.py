"""The end of a load warms the index for the hovers of the open documents (in process, the server's own
`PoolService._warm` and hover on the fixture workspace)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from soma_lsp.pool import LivePool, pool_roots
from soma_lsp.query import definitions
from soma_lsp.retrieval import LiveIndex
from soma_lsp.retrieval.index import contributions
from soma_lsp.server.app import create_server
from soma_lsp.server.features import hover
from soma_lsp.server.session import Document, Snapshot

WORKSPACE = Path(__file__).resolve().parents[1] / "fixtures" / "workspace"
TRANSFORMER = "model/transformer.py"
NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


def test_the_hovers_of_an_open_documents_definitions_find_their_words_made(monkeypatch):
    """After the warm that ends a load, hovering each definition of the open document makes no
    contribution of a word new to the layout (each would otherwise be made by the first hover that
    asks it: at 1M records ≈ 2.6 ns a posting), and shows what a cold index shows."""
    server = create_server()
    try:
        index, cold = LiveIndex(), LiveIndex()
        pool = LivePool(pool_roots([str(WORKSPACE)], None, {}), index)
        pool.load()
        LivePool(pool_roots([str(WORKSPACE)], None, {}), cold).load()
        path = WORKSPACE / TRANSFORMER
        source = path.read_text()
        document = Document(path.as_uri(), str(path), TRANSFORMER, source, None)
        positions = [d.name_range[0] for d in definitions(source, str(path))]
        shown = [hover.compute(Snapshot(cold, server.session.settings, NOW, pool, document), at) for at in positions]
        assert sum(view is not None for view in shown) >= len(positions) // 2

        server.pools._warm(index, {str(path): source})
        assert index._contributions.parts
        monkeypatch.setattr(contributions, "_approximate_contribution", lambda *a: pytest.fail("not made ahead"))
        snap = Snapshot(index, server.session.settings, NOW, pool, document)
        assert [hover.compute(snap, at) for at in positions] == shown
    finally:
        server._cleanup()
