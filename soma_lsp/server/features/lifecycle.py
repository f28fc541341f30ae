"""Session and document lifecycle: initialize/initialized/shutdown, document sync, configuration,
watched files, workspace folders. What they change goes through the session (documents) and the
pool service (settings, pool, watching); the features that care subscribe to the session's hooks.
"""

from __future__ import annotations

import logging

from lsprotocol import types as lsp

from .. import convert, settings as settings_module
from ..guard import contained
from ..pool_service import PoolService
from ..session import Session

log = logging.getLogger("soma_lsp.server")


def on_initialize(session: Session, pools: PoolService, params: lsp.InitializeParams) -> None:
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


def on_shutdown(session: Session, pools: PoolService, params: None) -> None:
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
    """Handlers get the session (and the pool service) first; `contained` reports through the session."""
    session.handle(lsp.INITIALIZE, on_initialize, pools)
    session.handle(lsp.INITIALIZED, on_initialized, pools)
    session.handle(lsp.SHUTDOWN, on_shutdown, pools)
    session.handle(lsp.TEXT_DOCUMENT_DID_OPEN, did_open)
    session.handle(lsp.TEXT_DOCUMENT_DID_CHANGE, did_change)
    session.handle(lsp.TEXT_DOCUMENT_DID_SAVE, did_save, options=lsp.SaveOptions(include_text=False))
    session.handle(lsp.TEXT_DOCUMENT_DID_CLOSE, did_close)
    session.handle(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION, did_change_configuration, pools)
    session.handle(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES, did_change_watched_files, pools)
    session.handle(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS, did_change_workspace_folders, pools)
