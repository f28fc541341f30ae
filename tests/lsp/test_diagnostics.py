"""Dead-end warnings and pool-file diagnostics end to end, kept in step with the pool."""

from __future__ import annotations

import json

from lsprotocol import types as lsp

from conftest import Session

TRANSFORMER = "model/transformer.py"


def soma(diagnostics, code=None):
    return [d for d in diagnostics if d.source == "soma" and (code is None or d.code == code)]


async def test_dead_end_warning_on_the_tied_definition_name(session: Session):
    uri = session.open(TRANSFORMER)
    found = await session.diagnostics(uri, lambda d: bool(soma(d, "exp-0042")))
    [warning] = soma(found, "exp-0042")
    line, col = session.line_of(TRANSFORMER, "class RotaryEmbedding")
    assert warning.range == lsp.Range(lsp.Position(line, col + 6), lsp.Position(line, col + 6 + len("RotaryEmbedding")))
    assert warning.severity == lsp.DiagnosticSeverity.Warning
    assert "rope-theta-500k" in warning.message and "theta 500k diverges at 2k steps" in warning.message
    [related] = warning.related_information
    assert related.location.uri.endswith("/.soma/pool/exp-0042.json") and related.location.range.start.line == 0
    # only dead ends: exp-0015 (succeeded, improved) is tied to RMSNorm but gets no warning
    assert not soma(found, "exp-0015")
    assert soma(found, "exp-0016")  # RMSNorm._norm, regressed


async def test_file_level_tie_warns_on_the_module_docstring(session: Session):
    uri = session.open("train.py")
    found = await session.diagnostics(uri, lambda d: bool(soma(d, "exp-0131")))
    [warning] = soma(found, "exp-0131")
    assert warning.range.start.line == 0
    assert "bf16-grad-accum-overflow" in warning.message
    line, col = session.line_of("train.py", "def cosine_with_warmup")
    [no_warmup] = soma(found, "exp-0088")  # a dead end by its metrics alone, which the message says
    assert no_warmup.range.start == lsp.Position(line, col + 4)
    assert "every metric moved the wrong way: " in no_warmup.message and " vs " in no_warmup.message
    assert "(exp-0131, status " in warning.message


async def test_severity_setting(start_session, preset):
    session = await start_session(preset, init_options={"deadEnds": {"severity": "hint"}})
    uri = session.open(TRANSFORMER)
    found = await session.diagnostics(uri, lambda d: bool(soma(d, "exp-0042")))
    assert {d.severity for d in soma(found)} == {lsp.DiagnosticSeverity.Hint}


async def test_severity_off(start_session, preset):
    session = await start_session(preset, init_options={"deadEnds": {"severity": "off"}})
    uri = session.open(TRANSFORMER)
    assert soma(await session.diagnostics(uri)) == []


async def test_open_pool_file_gets_its_problems(session: Session):
    uri = session.open(".soma/pool/broken/mixed.jsonl", language="jsonl")
    found = await session.diagnostics(uri, lambda d: len(d) >= 4)
    lines = sorted(d.range.start.line for d in found)
    assert lines == [1, 3, 4, 5]  # 1-based 2, 4, 5, 6 as `soma-lsp check` prints them
    assert all(d.severity == lsp.DiagnosticSeverity.Error and d.source == "soma" for d in found)
    messages = {d.range.start.line: d.message for d in found}
    assert "name: is required" in messages[1]
    assert "must not leave the workspace root" in messages[4]
    uri = session.open(".soma/pool/broken/unknown-status.json", language="json")
    [warning] = await session.diagnostics(uri, lambda d: len(d) == 1)
    assert warning.severity == lsp.DiagnosticSeverity.Warning and "exploded" in warning.message


def _edit_pool(session: Session) -> None:
    record = session.workspace / ".soma" / "pool" / "exp-0042.json"
    data = json.loads(record.read_text())
    data["status"] = "succeeded"
    data["metrics"] = [{"name": "val_loss", "value": 3.2, "baseline": 3.305, "goal": "min"}]
    record.write_text(json.dumps(data))
    if session.registrations:  # a client that watches for the server (VS Code) reports the change
        session.client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(
            [lsp.FileEvent(record.as_uri(), lsp.FileChangeType.Changed)]))


async def test_warnings_refresh_when_the_pool_changes_under_open_documents(session: Session):
    uri = session.open(TRANSFORMER)
    train = session.open("train.py")
    await session.diagnostics(uri, lambda d: bool(soma(d, "exp-0042")))
    await session.diagnostics(train, lambda d: bool(soma(d, "exp-0131")))
    watching_client = session.preset == "visual-studio-code"
    assert bool(session.registrations) == watching_client  # Neovim cannot watch: the server does
    _edit_pool(session)
    found = await session.diagnostics(uri, lambda d: not soma(d, "exp-0042"))
    assert soma(found, "exp-0121")  # the other warnings stay
    # a new dead end tied to train.py shows up in the other open document
    new = session.workspace / ".soma" / "pool" / "2026" / "exp-0301.json"
    new.write_text(json.dumps({"id": "exp-0301", "name": "save-every-step", "status": "crashed",
                               "conclusion": "disk filled up", "code": ["train.py::save_checkpoint"]}))
    if watching_client:
        session.client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(
            [lsp.FileEvent(new.as_uri(), lsp.FileChangeType.Created)]))
    found = await session.diagnostics(train, lambda d: bool(soma(d, "exp-0301")))
    line, col = session.line_of("train.py", "def save_checkpoint")
    assert soma(found, "exp-0301")[0].range.start == lsp.Position(line, col + 4)
    status = await session.command("soma.poolStatus")
    assert status["records"] == 75


async def test_server_watches_when_the_client_cannot_register(start_session):
    def no_dynamic_watching(caps: lsp.ClientCapabilities) -> None:
        caps.workspace.did_change_watched_files.dynamic_registration = False

    session = await start_session("visual-studio-code", tweak=no_dynamic_watching)
    assert session.registrations == [] or all(r.method != "workspace/didChangeWatchedFiles"
                                              for r in session.registrations)
    uri = session.open(TRANSFORMER)
    await session.diagnostics(uri, lambda d: bool(soma(d, "exp-0042")))
    _edit_pool(session)  # nobody tells the server: its own watcher must see it
    await session.diagnostics(uri, lambda d: not soma(d, "exp-0042"))
    line, col = session.line_of(TRANSFORMER, "class RotaryEmbedding")
    hover = await session.hover(uri, line, col + 6)
    assert "rope-theta-500k" not in hover.contents.value.split("---")[0]


async def test_closing_a_document_clears_its_diagnostics(session: Session):
    uri = session.open(TRANSFORMER)
    await session.diagnostics(uri, lambda d: bool(soma(d)))
    session.client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri)))
    await session.diagnostics(uri, lambda d: d == [])


async def test_fixing_a_bad_record_clears_its_diagnostic(session: Session):
    rel = ".soma/pool/broken/mixed.jsonl"
    uri = session.open(rel, language="jsonl")
    await session.diagnostics(uri, lambda d: len(d) == 4)
    path = session.path(rel)
    lines = path.read_text().splitlines()
    record = json.loads(lines[1])
    record["name"] = "now-named"
    lines[1] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    if session.registrations:
        session.client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(
            [lsp.FileEvent(path.as_uri(), lsp.FileChangeType.Changed)]))
    found = await session.diagnostics(uri, lambda d: len(d) == 3)
    assert sorted(d.range.start.line for d in found) == [3, 4, 5]
    assert (await session.command("soma.showExperiment", {"id": "exp-0171"}))["name"] == "now-named"


async def test_workspace_path_with_spaces_and_accents(start_session, preset, workspace):
    import shutil

    odd = workspace.parent / "my ws é"
    shutil.copytree(workspace, odd)
    session = await start_session(preset, workspace=odd)
    uri = session.open(TRANSFORMER)
    assert "%20" in uri
    found = await session.diagnostics(uri, lambda d: bool(soma(d, "exp-0042")))
    assert soma(found, "exp-0042")[0].related_information[0].location.uri.endswith("/exp-0042.json")
    line, col = session.line_of(TRANSFORMER, "class RotaryEmbedding")
    assert (await session.hover(uri, line, col + 6)) is not None
