"""Session and document lifecycle: initialize/initialized/shutdown, document sync, configuration,
watched files, workspace folders. What they change goes through the session (documents) and the
pool service (settings, pool, watching); the features that care subscribe to the session's hooks.
"""

from __future__ import annotations

import logging
from functools import partial

from lsprotocol import types as lsp

from .. import convert, settings as settings_module
from ..guard import contained
from ..pool_service import PoolService
from ..session import Session

log = logging.getLogger("soma_lsp.server")


def on_initialize(pools: PoolService, params: lsp.InitializeParams) -> None:
    pools.initialize(params.initialization_options)


@contained()
async def on_initialized(session: Session, pools: PoolService, params: lsp.InitializedParams) -> None:
    await pools.load_settings()
    if session.capability("workspace.did_change_configuration.dynamic_registration", False):
        try:
            await session.server.client_register_capability_async(lsp.RegistrationParams([lsp.Registration(
                "soma-configuration", lsp.WORKSPACE_DID_CHANGE_CONFIGURATION,
                lsp.DidChangeConfigurationRegistrationOptions(section=settings_module.SECTION))]))
        except Exception as error:  # noqa: BLE001
            log.warning("could not register for configuration changes: %s", error)
    await pools.start()


def on_shutdown(pools: PoolService, params: None) -> None:
    pools.shut_down()


def did_open(session: Session, params: lsp.DidOpenTextDocumentParams) -> None:
    session.document_opened(params.text_document.uri)


def did_change(session: Session, params: lsp.DidChangeTextDocumentParams) -> None:
    session.document_changed(params.text_document.uri, params.content_changes)


def did_save(session: Session, params: lsp.DidSaveTextDocumentParams) -> None:
    session.schedule_document(params.text_document.uri, 0.0)


def did_close(session: Session, params: lsp.DidCloseTextDocumentParams) -> None:
    session.document_closed(params.text_document.uri)


@contained()
async def did_change_configuration(session: Session, pools: PoolService,
                                   params: lsp.DidChangeConfigurationParams) -> None:
    await pools.load_settings(changed=params.settings)


@contained()
async def did_change_watched_files(session: Session, pools: PoolService,
                                   params: lsp.DidChangeWatchedFilesParams) -> None:
    paths = [convert.uri_to_path(change.uri) for change in params.changes]
    await pools.apply_paths(p for p in paths if p)


@contained()
async def did_change_workspace_folders(session: Session, pools: PoolService,
                                       params: lsp.DidChangeWorkspaceFoldersParams) -> None:
    await pools.load_settings()


def register(session: Session, pools: PoolService) -> None:
    """Handlers get the session and pool service first (`contained` reports through the session)."""
    feature = session.server.feature
    feature(lsp.INITIALIZE)(partial(on_initialize, pools))
    feature(lsp.INITIALIZED)(partial(on_initialized, session, pools))
    feature(lsp.SHUTDOWN)(partial(on_shutdown, pools))
    feature(lsp.TEXT_DOCUMENT_DID_OPEN)(partial(did_open, session))
    feature(lsp.TEXT_DOCUMENT_DID_CHANGE)(partial(did_change, session))
    feature(lsp.TEXT_DOCUMENT_DID_SAVE, lsp.SaveOptions(include_text=False))(partial(did_save, session))
    feature(lsp.TEXT_DOCUMENT_DID_CLOSE)(partial(did_close, session))
    feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)(partial(did_change_configuration, session, pools))
    feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)(partial(did_change_watched_files, session, pools))
    feature(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)(partial(did_change_workspace_folders, session, pools))
