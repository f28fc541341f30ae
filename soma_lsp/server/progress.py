"""Work-done progress while the pool is indexed (`window/workDoneProgress/create` + `$/progress`).

Part of loading the pool (`pool_service`), not a feature. Reports come from the loading thread and
are forwarded to the event loop, at most one per percent: they keep `Session.loading` (the percent
the pool status and partial answers show) and, when the client says `window.workDoneProgress`, go
out as `$/progress` with the experiments loaded so far.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from ..sizes import size_text

if TYPE_CHECKING:
    from .session import Session

log = logging.getLogger("soma_lsp.server")
_tokens = itertools.count(1)
TITLE = "Indexing experiments"


class IndexingProgress:
    def __init__(self, session: "Session", records: Callable[[], int]) -> None:
        """`records()`: how many experiments the loading pool holds so far."""
        self.session = session
        self.records = records
        self.token: str | None = None
        self._last = -1

    async def begin(self) -> None:
        self.session.loading = 0
        if not self.session.capability("window.work_done_progress", False):
            return
        token = f"soma-indexing-{next(_tokens)}"
        try:
            await asyncio.wait_for(self.session.server.work_done_progress.create_async(token), 10)
        except Exception as error:  # noqa: BLE001 - no progress then, the load goes on
            log.warning("window/workDoneProgress/create failed: %s", error)
            return
        self.token = token
        self.session.server.work_done_progress.begin(token, lsp.WorkDoneProgressBegin(
            title=TITLE, message="reading the experiment pool", percentage=0, cancellable=False))

    def threadsafe_report(self, done: int, total: int) -> None:
        """`LivePool.load`'s progress callback (bytes done, bytes in all), from the loading thread."""
        percentage = 100 if total <= 0 else min(100, int(done * 100 / total))
        if percentage == self._last:
            return
        self._last = percentage
        loop = self.session.loop
        if not loop.is_closed():
            loop.call_soon_threadsafe(self._report, percentage, done, total)

    def _report(self, percentage: int, done: int, total: int) -> None:
        if self.session.loading is not None:  # (not ended meanwhile)
            self.session.loading = percentage
        if self.token is None:
            return
        self.session.server.work_done_progress.report(self.token, lsp.WorkDoneProgressReport(
            message=f"{self.records()} experiments so far · {size_text(done)} of {size_text(total)}", percentage=percentage))

    async def end(self, message: str) -> None:
        self.session.loading = None
        if self.token is None:
            return
        await asyncio.sleep(0)  # let queued reports go out first
        self.session.server.work_done_progress.end(self.token, lsp.WorkDoneProgressEnd(message=message))
        self.token = None
