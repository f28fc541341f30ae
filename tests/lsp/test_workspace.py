"""Workspace symbols, document links, progress, settings, failure containment — end to end."""

from __future__ import annotations

import asyncio
import sys

from lsprotocol import types as lsp

from conftest import SERVER, TIMEOUT, Session, wait_until

TRANSFORMER = "model/transformer.py"


async def symbols(session: Session, query: str) -> list[lsp.SymbolInformation]:
    return await asyncio.wait_for(session.client.workspace_symbol_async(lsp.WorkspaceSymbolParams(query=query)),
                                  TIMEOUT) or []


async def test_workspace_symbols_by_name_and_headline(session: Session):
    found = await symbols(session, "rope")
    assert found[0].name == "rope-theta-500k"
    assert found[0].location.uri.endswith("/.soma/pool/exp-0042.json")
    assert "exp-0042" in found[0].container_name and "failed" in found[0].container_name
    by_headline = await symbols(session, "diverges 2k")
    assert "rope-theta-500k" in [s.name for s in by_headline]
    assert await symbols(session, "no such experiment anywhere") == []
    everything = await symbols(session, "")
    assert len(everything) == 74


async def test_document_links_for_ids_in_code(session: Session):
    uri = session.open(TRANSFORMER)
    links = await asyncio.wait_for(session.client.text_document_document_link_async(
        lsp.DocumentLinkParams(lsp.TextDocumentIdentifier(uri))), TIMEOUT)
    line, col = session.line_of(TRANSFORMER, "(exp-0042)")
    link = next(l for l in links if l.range.start.line == line)
    assert link.range == lsp.Range(lsp.Position(line, col + 1), lsp.Position(line, col + 9))
    pool = (session.workspace / ".soma" / "pool").resolve()
    assert link.target == (pool / "exp-0042.json").as_uri() + "#L1"
    assert all(l.target.startswith("file:///") for l in links)
    # an id that is no record (exp-0099 sits in the hidden .trash/) is not a link
    text = "# exp-0099 was trashed, exp-0131 was not, 2048 is a number; see exp-0042.json.\n"
    other = session.open("notes.py", text)
    links = await asyncio.wait_for(session.client.text_document_document_link_async(
        lsp.DocumentLinkParams(lsp.TextDocumentIdentifier(other))), TIMEOUT)
    assert [text[l.range.start.character:l.range.end.character] for l in links] == ["exp-0131", "exp-0042"]


async def test_progress_while_indexing(session: Session):
    reports = await wait_until(lambda: [r for token, rs in session.client.progress_reports.items()
                                        if str(token).startswith("soma-indexing") for r in rs])
    await wait_until(lambda: any(isinstance(r, lsp.WorkDoneProgressEnd) for token, rs in
                                 session.client.progress_reports.items() for r in rs))
    reports = [r for rs in session.client.progress_reports.values() for r in rs]
    assert isinstance(reports[0], lsp.WorkDoneProgressBegin) and reports[0].title == "Indexing experiments"
    assert isinstance(reports[-1], lsp.WorkDoneProgressEnd) and "74 experiments" in reports[-1].message
    percentages = [r.percentage for r in reports if isinstance(r, lsp.WorkDoneProgressReport)]
    assert percentages == sorted(percentages)


async def test_no_progress_for_clients_without_it(start_session):
    def no_progress(caps: lsp.ClientCapabilities) -> None:
        caps.window.work_done_progress = False

    session = await start_session("neovim@0.11.0", tweak=no_progress)
    assert session.client.progress_reports == {}


async def test_invalid_settings_fall_back_to_defaults_with_a_message(start_session, preset):
    session = await start_session(preset, init_options={
        "hover": {"count": "three", "minScore": 0.5}, "weights": {"lexical": -1}, "deadEnds": {"severity": "loud"}})
    await wait_until(lambda: session.client.messages)
    [message] = session.client.messages
    assert message.type == lsp.MessageType.Warning
    for key in ("soma.hover.count", "soma.weights", "soma.deadEnds.severity"):
        assert key in message.message
    uri = session.open(TRANSFORMER)
    line, col = session.line_of(TRANSFORMER, "class RotaryEmbedding")
    hover = await session.hover(uri, line, col + 6)
    assert hover.contents.value.count("tied to this code") == 3  # the default count, 3
    found = await session.diagnostics(uri, lambda d: any(x.code == "exp-0042" for x in d))
    assert {d.severity for d in found if d.source == "soma"} == {lsp.DiagnosticSeverity.Warning}


async def test_settings_from_workspace_configuration_and_their_changes(start_session, preset):
    session = await start_session(preset, configuration={"soma": {"hover": {"count": 1}}})
    uri = session.open(TRANSFORMER)
    line, col = session.line_of(TRANSFORMER, "class RotaryEmbedding")
    hover = await session.hover(uri, line, col + 6)
    assert "---" in hover.contents.value and hover.contents.value.count("exp-") == 1
    await session.diagnostics(uri, lambda d: any(x.code == "exp-0042" for x in d))
    # the user turns dead-end warnings off: the server pulls the new settings and republishes
    session.client.set_configuration({"soma": {"hover": {"count": 1}, "deadEnds": {"severity": "off"}}})
    session.client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
    await session.diagnostics(uri, lambda d: not any(x.source == "soma" for x in d))


async def test_settings_pushed_by_did_change_configuration(start_session):
    def no_configuration(caps: lsp.ClientCapabilities) -> None:
        caps.workspace.configuration = False

    session = await start_session("neovim@0.11.0", tweak=no_configuration)
    uri = session.open(TRANSFORMER)
    await session.diagnostics(uri, lambda d: any(x.code == "exp-0042" for x in d))
    session.client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(
        settings={"soma": {"deadEnds": {"severity": "information"}}}))
    found = await session.diagnostics(uri, lambda d: any(x.severity == lsp.DiagnosticSeverity.Information
                                                        for x in d))
    assert {d.severity for d in found if d.source == "soma"} == {lsp.DiagnosticSeverity.Information}


async def test_pool_setting_moves_the_pool(start_session, preset, workspace, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "one.json").write_text('{"id": "far-001", "name": "far-away-run", "status": "failed",'
                                      ' "conclusion": "it failed far away", "code": ["train.py"]}')
    session = await start_session(preset, init_options={"pool": str(outside)})
    status = await session.command("soma.poolStatus")
    assert status["records"] == 1 and status["pools"] == [str(outside.resolve())]
    # a pool outside the workspace is watched by the server itself, even for a client that can watch
    assert not any(r.method == "workspace/didChangeWatchedFiles" for r in session.registrations)
    uri = session.open("train.py")
    await session.diagnostics(uri, lambda d: any(x.code == "far-001" for x in d))
    (outside / "two.json").write_text('{"id": "far-002", "name": "another", "status": "crashed", "code": ["train.py"]}')
    await session.diagnostics(uri, lambda d: any(x.code == "far-002" for x in d))


RAISING_HOVER = [sys.executable, "-c", (
    "import sys\n"
    "import soma_lsp.server.features.hover as hover\n"
    "def boom(*args, **kwargs):\n"
    "    raise RuntimeError('hover exploded on purpose')\n"
    "hover.prepare = boom\n"
    "from soma_lsp.cli import main\n"
    "sys.exit(main(['serve']))\n")]


async def test_a_raising_feature_answers_empty_and_the_server_keeps_serving(start_session, preset):
    session = await start_session(preset, command=RAISING_HOVER)
    uri = session.open(TRANSFORMER)
    line, col = session.line_of(TRANSFORMER, "class RotaryEmbedding")
    assert await session.hover(uri, line, col + 6) is None
    await wait_until(lambda: any("hover exploded on purpose" in m.message for m in session.client.log_messages))
    assert session.client.messages == []  # no popup while typing
    assert await session.hover(uri, line, col + 6) is None
    lenses = await session.lenses(uri)  # the other features are untouched
    assert lenses
    found = await session.command("soma.findRelatedExperiments", {"uri": uri, "position": {"line": line, "character": 8}})
    assert found[0]["id"] == "exp-0042"


async def test_server_command_is_a_real_subprocess():
    assert SERVER[1:] == ["-m", "soma_lsp"]
