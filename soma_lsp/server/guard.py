"""Per-feature failure containment: a feature that raises logs and answers empty; the server serves on.

`contained(empty)` wraps an async feature handler `(session, ..., params)`: an exception is logged
(server log, and `window/logMessage` through the first argument's `report_feature_failure`) and the
request answered with `empty()` — `None` or `[]`, the LSP way of
saying "nothing here". Cancellation passes through (pygls then answers -32800). JSON-RPC errors raised
on purpose (e.g. -32602 for malformed command arguments) pass through too: they are answers.
`Unavailable` (a document the server will not read) is no failure: one log line, an empty answer.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pygls.exceptions import JsonRpcException

log = logging.getLogger("soma_lsp.server")

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


class Unavailable(Exception):
    """A request is about something the server will not read (a document not open outside the
    workspace, a FIFO, a file over the size limit: `unopened`); the message says why."""


def contained(empty: Callable[[], Any] = lambda: None, *, name: str | None = None) -> Callable[[F], F]:
    def wrap(handler: F) -> F:
        feature = name or handler.__name__

        @functools.wraps(handler)
        async def guarded(ls, *args: Any) -> Any:
            try:
                return await handler(ls, *args)
            except (asyncio.CancelledError, JsonRpcException):
                raise
            except Unavailable as error:
                log.warning("%s answered empty: %s", feature, error)
                return empty()
            except Exception as error:  # noqa: BLE001 - the point of this module
                log.exception("feature %s failed", feature)
                report = getattr(ls, "report_feature_failure", None)
                if report is not None:
                    try:
                        report(feature, error)
                    except Exception:  # noqa: BLE001
                        log.exception("could not report the failure of %s", feature)
                return empty()

        return guarded  # type: ignore[return-value]

    return wrap
