"""Session and document lifecycle: initialize/initialized/shutdown, document sync, configuration,
watched files, workspace folders. The features themselves live in their own modules."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from . import convert, settings as settings_module
from .guard import contained

if TYPE_CHECKING:
    from .server import SomaServer

log = logging.getLogger("soma_lsp.server")


def on_initialize(ls: "SomaServer", params: lsp.InitializeParams) -> None:
    ls.init_options = params.initialization_options
    settings, _ = settings_module.parse(ls.init_options)  # problems are reported once, at initialized
    ls.settings = settings


@contained()
async def on_initialized(ls: "SomaServer", params: lsp.InitializedParams) -> None:
    await ls.load_settings()
    if ls.capability("workspace.did_change_configuration.dynamic_registration", False):
        try:
            await ls.client_register_capability_async(lsp.RegistrationParams([lsp.Registration(
                "soma-configuration", lsp.WORKSPACE_DID_CHANGE_CONFIGURATION,
                lsp.DidChangeConfigurationRegistrationOptions(section=settings_module.SECTION))]))
        except Exception as error:  # noqa: BLE001
            log.warning("could not register for configuration changes: %s", error)
    await ls.start_pool()


def on_shutdown(ls: "SomaServer", params: None) -> None:
    ls._stop_watching()
    ls.save_snapshot()  # the changes applied since the last save (usually a few records: quick)


def did_open(ls: "SomaServer", params: lsp.DidOpenTextDocumentParams) -> None:
    ls.document_opened(params.text_document.uri)
    ls.schedule_document(params.text_document.uri, 0.0)


def did_change(ls: "SomaServer", params: lsp.DidChangeTextDocumentParams) -> None:
    from .code_lens import map_through_edits

    uri = params.text_document.uri
    map_through_edits(ls, uri, params.content_changes)
    ls.document_changed(uri)


def did_save(ls: "SomaServer", params: lsp.DidSaveTextDocumentParams) -> None:
    ls.schedule_document(params.text_document.uri, 0.0)


def did_close(ls: "SomaServer", params: lsp.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.document_closed(uri)
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


@contained()
async def did_change_configuration(ls: "SomaServer", params: lsp.DidChangeConfigurationParams) -> None:
    await ls.load_settings(changed=params.settings)


@contained()
async def did_change_watched_files(ls: "SomaServer", params: lsp.DidChangeWatchedFilesParams) -> None:
    paths = [convert.uri_to_path(change.uri) for change in params.changes]
    await ls.apply_paths(p for p in paths if p)


@contained()
async def did_change_workspace_folders(ls: "SomaServer", params: lsp.DidChangeWorkspaceFoldersParams) -> None:
    await ls.load_settings()


def register(ls: "SomaServer") -> None:
    ls.feature(lsp.INITIALIZE)(on_initialize)
    ls.feature(lsp.INITIALIZED)(on_initialized)
    ls.feature(lsp.SHUTDOWN)(on_shutdown)
    ls.feature(lsp.TEXT_DOCUMENT_DID_OPEN)(did_open)
    ls.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)(did_change)
    ls.feature(lsp.TEXT_DOCUMENT_DID_SAVE, lsp.SaveOptions(include_text=False))(did_save)
    ls.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)(did_close)
    ls.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)(did_change_configuration)
    ls.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)(did_change_watched_files)
    ls.feature(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)(did_change_workspace_folders)
