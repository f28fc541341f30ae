"""`workspace/executeCommand`: each command takes one argument object (docs/spec.md §4, docs/architecture.md).

* `soma.findRelatedExperiments` `{uri, position?, range?, text?, limit?}` → spec §2.8 results, tied
  first (`"tied": true`), then the gated ranking. Scope: `range` (a selection), else the definition
  enclosing `position`, else the whole file; `text` replaces the query text (alone, it ranks that
  text: no document, no ties). `limit` defaults to 20; 0 means all (up to `related.COUNT_CAP`).
  Asked while the first load still runs, it answers at once from the records loaded so far, each
  result marked `"partial": true`.
* `soma.reloadPool` `{}` → the pool status after reloading.
* `soma.showExperiment` `{id}` → the whole record with its `location` (an id not loaded yet waits
  for the first load to end), and `code_locations`: where
  each `code` tie is in the workspace (`{code, uri, range}`, null when not found; a tie whose path
  resolves outside the workspace folders — e.g. through a symlink — is not followed).
* `soma.poolStatus` `{}` → `{version, pools, records, files, errors, indexing, percentage, restored}`.

Each command is registered with pygls (`ls.command`) and takes the raw argument list: it checks it
itself, and a malformed argument gets a JSON-RPC -32602 error saying what is wrong (an unknown
command too, from `protocol`). A command that fails inside answers -32603 with the reason. Commands
run as cancellable tasks (`protocol.SomaProtocol.lsp_workspace__execute_command`).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcInvalidParams

from ...query import build_query, definitions, find_definition
from ...records import kind_of
from .. import convert
from ..embedder import similarity_for
from ..pool_service import PoolService
from ..related import find_related, reach_below, tied_records
from ..guard import Unavailable
from ..session import Session

log = logging.getLogger("soma_lsp.server")

FIND_RELATED = "soma.findRelatedExperiments"
RELOAD_POOL = "soma.reloadPool"
SHOW_EXPERIMENT = "soma.showExperiment"
POOL_STATUS = "soma.poolStatus"
DEFAULT_LIMIT = 20


class BadArgument(JsonRpcInvalidParams):
    def __init__(self, command: str, problem: str) -> None:
        super().__init__(f"{command}: {problem}")


def _argument(command: str, arguments: Any, *, optional: bool) -> dict[str, Any]:
    """The single argument object (commands taking `{}` also accept no argument or null)."""
    if arguments is None or len(arguments) == 0:
        if optional:
            return {}
        raise BadArgument(command, "expected one argument object, got none")
    if not isinstance(arguments, list | tuple):
        raise BadArgument(command, f"expected a list of arguments, got {kind_of(arguments)}")
    if len(arguments) != 1:
        raise BadArgument(command, f"expected one argument object, got {len(arguments)} arguments")
    value = arguments[0]
    if value is None and optional:
        return {}
    if not isinstance(value, dict):
        raise BadArgument(command, f"expected an argument object, got {kind_of(value)}")
    return value


def _no_unknown(command: str, value: dict, allowed: set[str]) -> None:
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise BadArgument(command, f"unknown field(s) {', '.join(unknown)}; expected "
                                   f"{', '.join(sorted(allowed)) or 'none'}")


def _no_arguments(command: str, arguments: Any) -> None:
    """A command taking `{}` (or no argument, or null)."""
    _no_unknown(command, _argument(command, arguments, optional=True), set())


def _int(command: str, value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadArgument(command, f"{where}: expected a non-negative integer, got {value!r}")
    return value


def _position(command: str, value: Any, where: str) -> tuple[int, int]:
    if not isinstance(value, dict):
        raise BadArgument(command, f"{where}: expected {{line, character}}, got {kind_of(value)}")
    for key in ("line", "character"):
        if key not in value:
            raise BadArgument(command, f"{where}.{key}: is required")
    return _int(command, value["line"], f"{where}.line"), _int(command, value["character"], f"{where}.character")


def _range(command: str, value: Any) -> tuple[tuple[int, int], tuple[int, int]]:
    if not isinstance(value, dict) or "start" not in value or "end" not in value:
        raise BadArgument(command, f"range: expected {{start, end}}, got {kind_of(value) if not isinstance(value, dict) else 'an object without start/end'}")
    return _position(command, value["start"], "range.start"), _position(command, value["end"], "range.end")


# -- the commands ------------------------------------------------------------------------------------

async def find_related_experiments(session: Session, pools: PoolService,
                                   arguments: Any) -> list[dict[str, Any]]:
    command = FIND_RELATED
    arg = _argument(command, arguments, optional=False)
    _no_unknown(command, arg, {"uri", "position", "range", "text", "limit"})
    uri = arg.get("uri")
    if uri is not None and (not isinstance(uri, str) or not uri):
        raise BadArgument(command, f"uri: expected a document URI string, got {uri!r}")
    text = arg.get("text")
    if text is not None and not isinstance(text, str):
        raise BadArgument(command, f"text: expected a string, got {kind_of(text)}")
    if uri is None and text is None:
        raise BadArgument(command, "expected a uri (with an optional position or range) or a text")
    position = _position(command, arg["position"], "position") if arg.get("position") is not None else None
    selection = _range(command, arg["range"]) if arg.get("range") is not None else None
    limit = _int(command, arg["limit"], "limit") if arg.get("limit") is not None else DEFAULT_LIMIT

    if uri is None:
        snap = session.snapshot()

        def work():
            query = snap.retrieval_query(None, text=text, limit=None)
            return find_related(snap.index, query, (), min_score=snap.settings.min_score, limit=limit or None,
                                min_terms=1, levers=snap.settings.levers,
                                similarity=similarity_for(snap.settings, query.text))
        related = await session.run_query(work)
    else:
        try:
            snap = await session.snapshot_at(uri)
        except Unavailable as error:  # not open, and not a file the server reads (server.unopened)
            raise BadArgument(command, f"uri: {error}") from None

        def work():
            doc = snap.document
            built = build_query(doc.source, doc.name, position=position, selection=selection, scope="find",
                                levers=snap.settings.levers)
            defs = definitions(doc.source, doc.name)
            tied = tied_records(snap.index, doc.relpath, built.scope, defs, file_scope_takes_all=True,
                                commit_ties=snap.commit_ties_here())
            query = snap.retrieval_query(built, text=text, limit=None)
            return find_related(snap.index, query, tied, min_score=snap.settings.min_score,
                                limit=limit or None, levers=snap.settings.levers, hints=built.hints,
                                similarity=similarity_for(snap.settings, query.text),
                                reach=reach_below(snap.settings.levers))
        related = await session.run_query(work)
    shown = related.shown(limit or None)
    results = [convert.result(scored, tied, related.commits.get(scored.record.id)) for scored, tied in shown]
    if snap.partial is not None:  # the first load still runs: from the records loaded so far
        for result in results:
            result["partial"] = True
    return results


async def reload_pool(session: Session, pools: PoolService, arguments: Any) -> dict[str, Any]:
    _no_arguments(RELOAD_POOL, arguments)
    await pools.start()
    return pools.status()


async def show_experiment(session: Session, pools: PoolService, arguments: Any) -> dict[str, Any]:
    arg = _argument(SHOW_EXPERIMENT, arguments, optional=False)
    _no_unknown(SHOW_EXPERIMENT, arg, {"id"})
    record_id = arg.get("id")
    if not isinstance(record_id, str) or not record_id:
        raise BadArgument(SHOW_EXPERIMENT, f"id: expected an experiment id string, got {record_id!r}")
    record = session.snapshot().index.get(record_id)
    if record is None and not session.loaded.is_set():  # maybe not loaded yet
        await session.loaded.wait()
        record = session.snapshot().index.get(record_id)
    if record is None:
        raise BadArgument(SHOW_EXPERIMENT, f"id: no experiment {record_id!r} in the pool")
    result = convert.record_json(record)
    result["code_locations"] = await session.run_query(code_locations, record, session.folders(),
                                                       session.open_sources())
    return result


MAX_TIED_FILE = 2 * 1024 * 1024


def code_locations(record, folders: list[str], open_sources: dict[str, str]) -> list[dict[str, Any]]:
    """Where each `code` tie is in the workspace: `{code, uri, range}` (`uri`/`range` null when it
    cannot be found). A tie's path is resolved (symlinks included) and must stay inside a workspace
    folder, or it is not followed — nothing outside the workspace is read through a record."""
    out = []
    for tie in record.code:
        entry: dict[str, Any] = {"code": str(tie), "uri": None, "range": None}
        out.append(entry)
        path = convert.code_tie_path(tie.path, folders)
        if path is None or not os.path.isfile(path):
            continue
        entry["uri"] = convert.path_to_uri(path)
        if tie.symbol is None:
            entry["range"] = _range_json(((0, 0), (0, 0)))
            continue
        source = open_sources.get(path)
        if source is None:
            try:
                if os.path.getsize(path) > MAX_TIED_FILE:
                    continue
                with open(path, encoding="utf-8", errors="replace") as handle:
                    source = handle.read(MAX_TIED_FILE)
            except OSError:
                continue
        found = find_definition(definitions(source, path), tie.symbol)
        if found is not None:
            entry["range"] = _range_json(found.name_range)
    return out


def _range_json(span) -> dict[str, Any]:
    (sl, sc), (el, ec) = span
    return {"start": {"line": sl, "character": sc}, "end": {"line": el, "character": ec}}


async def pool_status(session: Session, pools: PoolService, arguments: Any) -> dict[str, Any]:
    _no_arguments(POOL_STATUS, arguments)
    return pools.status()


COMMANDS: dict[str, Callable[[Session, PoolService, Any], Awaitable[Any]]] = {
    FIND_RELATED: find_related_experiments,
    RELOAD_POOL: reload_pool,
    SHOW_EXPERIMENT: show_experiment,
    POOL_STATUS: pool_status,
}


def _answered(session: Session, command: str, handler: Callable[[Any], Awaitable[Any]]):
    """A command's errors as answers: JSON-RPC errors raised on purpose (-32602) pass through;
    anything else is logged, reported and answered -32603 with the reason — never silence."""

    async def run(arguments: Any) -> Any:
        try:
            return await handler(arguments)
        except JsonRpcException:
            raise
        except Exception as error:  # noqa: BLE001
            log.exception("command %s failed", command)
            session.report_feature_failure(command, error)
            raise JsonRpcInternalError(f"{command} failed: {type(error).__name__}: {error}") from None

    return run


def register(session: Session, pools: PoolService) -> None:
    """Each command through pygls (`executeCommandProvider` lists them); run by `protocol`."""
    for name, handler in COMMANDS.items():
        session.server.command(name)(_answered(session, name, functools.partial(handler, session, pools)))
