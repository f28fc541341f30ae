"""workspace/executeCommand end to end: results in docs/spec.md §2.8's shape, ties first, -32602 on bad input."""

from __future__ import annotations

import json
import re
import unicodedata

import pytest
from pygls.exceptions import JsonRpcException

from soma_lsp.query import Levers

from conftest import Session

TRANSFORMER = "model/transformer.py"
SHAPE = {"id", "name", "status", "dead_end", "score", "components", "weights", "matched_terms",
         "shared_components", "headline", "time", "location", "url", "tied", "origin"}


def check_shape(result: dict) -> None:
    assert set(result) == SHAPE
    assert set(result["components"]) == set(result["weights"]) == {"lexical", "structural", "recency", "importance"}
    assert result["location"]["uri"].startswith("file:///") and isinstance(result["location"]["line"], int)
    assert 0.0 <= result["score"] <= 1.0


async def test_find_related_at_a_position_lists_ties_first(session: Session):
    uri = session.open(TRANSFORMER)
    line, col = session.line_of(TRANSFORMER, "class RotaryEmbedding")
    results = await session.command("soma.findRelatedExperiments",
                                    {"uri": uri, "position": {"line": line, "character": col + 6}})
    assert results, "something is related to RotaryEmbedding"
    for result in results:
        check_shape(result)
    tied = [r for r in results if r["tied"]]
    assert results[: len(tied)] == tied, "tied records come first"
    assert results[0]["id"] == "exp-0042" and results[0]["dead_end"]
    flags = [r["dead_end"] for r in tied]
    assert flags == sorted(flags, reverse=True), "dead ends first among the tied"
    assert {"exp-0042", "exp-0121", "exp-0075", "exp-0058", "exp-0030", "exp-0177"} <= {r["id"] for r in tied}
    assert json.dumps(results)  # plain JSON all the way


NO_LEVERS = {"levers": {name: False for name in Levers.names()}}


async def test_without_levers_the_rest_is_the_gated_ranking(start_session, preset):
    """spec §3.6 as such: with every issue-20 lever off, what follows the ties is `rank`'s own order,
    gated at hover.minScore (the levers may bring siblings and same-setting records in below it)."""
    session = await start_session(preset, init_options=NO_LEVERS)
    results = await session.command("soma.findRelatedExperiments", {"text": "rotary embedding base"})
    rest = [r["score"] for r in results if not r["tied"]]
    assert rest and rest == sorted(rest, reverse=True)
    assert all(score >= 0.5 for score in rest)


async def test_find_related_for_a_whole_file_and_for_text(session: Session):
    results = await session.command("soma.findRelatedExperiments", {"uri": session.uri("train.py"), "limit": 0})
    tied = {r["id"] for r in results if r["tied"]}
    assert "exp-0131" in tied  # tied to train.py as a whole
    assert {"exp-0088", "exp-0022", "exp-0006"} <= tied  # ties to definitions in the file count for the file
    results = await session.command("soma.findRelatedExperiments", {"text": "rope theta 500k", "limit": 3})
    assert len(results) <= 3 and results[0]["id"] == "exp-0042"
    assert not any(r["tied"] for r in results)


async def test_find_related_for_a_selection(session: Session):
    uri = session.open("train.py")
    line, _ = session.line_of("train.py", "def cosine_with_warmup")
    results = await session.command("soma.findRelatedExperiments", {
        "uri": uri, "range": {"start": {"line": line + 1, "character": 0}, "end": {"line": line + 6, "character": 0}}})
    assert "exp-0088" in {r["id"] for r in results if r["tied"]}


async def test_show_experiment_and_pool_status(session: Session):
    record = await session.command("soma.showExperiment", {"id": "exp-0042"})
    assert record["name"] == "rope-theta-500k" and record["status"] == "failed" and record["dead_end"]
    assert record["location"]["uri"].endswith("/.soma/pool/exp-0042.json") and record["location"]["line"] == 0
    assert record["code"] == ["model/transformer.py::RotaryEmbedding"]
    assert record["conclusion"]["headline"] == "theta 500k diverges at 2k steps"
    status = await session.command("soma.poolStatus", {})
    assert status["records"] == 74 and status["files"] == 19 and status["errors"] == 6
    assert status["indexing"] is False and status["version"] >= 1
    assert status["pools"] == [str((session.workspace / ".soma" / "pool").resolve())]
    assert session.statuses[-1]["records"] == 74  # the soma/poolStatus notification has the same shape
    assert set(session.statuses[-1]) == set(status)


async def test_reload_pool_picks_up_a_new_record(session: Session):
    new = session.workspace / ".soma" / "pool" / "2026" / "exp-0300.json"
    new.write_text(json.dumps({"id": "exp-0300", "name": "rope-theta-1m", "status": "failed",
                               "conclusion": "theta 1m diverges even earlier"}))
    status = await session.command("soma.reloadPool", {})
    assert status["records"] == 75
    assert (await session.command("soma.showExperiment", {"id": "exp-0300"}))["name"] == "rope-theta-1m"
    assert (await session.command("soma.reloadPool"))["records"] == 75  # `{}` may be left out


BAD = [
    ("soma.findRelatedExperiments", [], "expected one argument object"),
    ("soma.findRelatedExperiments", ["file:///x.py"], "expected an argument object, got a string"),
    ("soma.findRelatedExperiments", [{}], "expected a uri"),
    ("soma.findRelatedExperiments", [{"uri": 5}], "uri: expected a document URI string"),
    ("soma.findRelatedExperiments", [{"uri": "file:///x.py", "position": {"line": -1, "character": 0}}], "position.line"),
    ("soma.findRelatedExperiments", [{"uri": "file:///x.py", "position": {"line": 1}}], "position.character: is required"),
    ("soma.findRelatedExperiments", [{"uri": "file:///x.py", "range": {"start": {"line": 0, "character": 0}}}], "range"),
    ("soma.findRelatedExperiments", [{"text": "rope", "limit": "ten"}], "limit"),
    ("soma.findRelatedExperiments", [{"text": 3}], "text: expected a string"),
    ("soma.findRelatedExperiments", [{"text": "rope", "colour": "red"}], "unknown field(s) colour"),
    ("soma.findRelatedExperiments", [{"text": "a"}, {"text": "b"}], "got 2 arguments"),
    ("soma.showExperiment", [{}], "id: expected an experiment id"),
    ("soma.showExperiment", [{"id": "exp-9999"}], "no experiment 'exp-9999'"),
    ("soma.showExperiment", [], "expected one argument object"),
    ("soma.reloadPool", [{"force": True}], "unknown field(s) force"),
    ("soma.poolStatus", [[1, 2]], "expected an argument object"),
    ("soma.noSuchCommand", [{}], "unknown command"),
]


async def test_malformed_arguments_get_invalid_params(session: Session):
    for command, arguments, message in BAD:
        with pytest.raises(JsonRpcException) as raised:
            await session.command(command, *arguments)
        assert raised.value.code == -32602, (command, arguments)
        assert message in raised.value.message, (message, raised.value.message)
        assert re.match(r"soma\.\w+: |unknown command", raised.value.message)
    assert (await session.command("soma.poolStatus"))["records"] == 74  # and the server goes on


async def test_show_experiment_locates_code_ties_inside_the_workspace_only(session: Session, tmp_path):
    record = await session.command("soma.showExperiment", {"id": "exp-0042"})
    [where] = record["code_locations"]
    line, col = session.line_of(TRANSFORMER, "class RotaryEmbedding")
    assert where["uri"] == session.uri(TRANSFORMER)
    assert where["range"]["start"] == {"line": line, "character": col + 6}
    # a record whose tie goes through a symlink to outside the workspace: not followed, not read
    secret = tmp_path / "outside.py"
    secret.write_text("class Secret:\n    pass\n")
    (session.workspace / "model" / "escape.py").symlink_to(secret)
    pool = session.workspace / ".soma" / "pool" / "2026" / "exp-0302.json"
    pool.write_text(json.dumps({"id": "exp-0302", "name": "symlinked", "code": ["model/escape.py::Secret", "train.py"]}))
    await session.command("soma.reloadPool")
    record = await session.command("soma.showExperiment", {"id": "exp-0302"})
    assert record["code_locations"][0] == {"code": "model/escape.py::Secret", "uri": None, "range": None}
    assert record["code_locations"][1]["uri"] == session.uri("train.py")


@pytest.mark.parametrize("preset", ["visual-studio-code", "neovim@0.11.0"])
async def test_commands_asked_before_the_first_load_answer_at_once_and_say_when_partial(start_session, preset):
    session = await start_session(preset, wait_loaded=False)
    status = await session.command("soma.poolStatus", {})
    assert status["indexing"] or status["records"] == 74, "before the first load ends the pool is 'indexing', not empty"
    assert status["percentage"] is None if not status["indexing"] else 0 <= status["percentage"] <= 100
    uri = session.open(TRANSFORMER)
    line, col = session.line_of(TRANSFORMER, "class RotaryEmbedding")
    asked = {"uri": uri, "position": {"line": line, "character": col + 6}}
    loading = (await session.command("soma.poolStatus", {}))["indexing"]
    early = await session.command("soma.findRelatedExperiments", asked)  # from what is loaded so far
    record = await session.command("soma.showExperiment", {"id": "exp-0131"})  # (waits if not loaded yet)
    assert record["id"] == "exp-0131"
    await session.wait_status(lambda s: not s["indexing"] and s["version"] > 0)
    results = await session.command("soma.findRelatedExperiments", asked)
    assert results and results[0]["id"] == "exp-0042" and not any("partial" in r for r in results)
    same = [r["id"] for r in early] == [r["id"] for r in results]  # (scores move with the time: recency)
    if loading:  # answered during the load (maybe nothing yet), each result saying so — or just after it
        assert all(r.get("partial") is True for r in early) or same
    else:
        assert same and not any("partial" in r for r in early)


async def test_find_related_caps_record_text_and_removes_control_characters(start_session, workspace):
    """findRelated returned record text uncapped (a 1 MB headline) and unsanitised (issue 23 #10):
    each text field is one line of at most 300 characters (spec §2.8), the shape kept."""
    hostile = "zanzibar\x1b]0;title\x07 \u202eevil\u202c\ttab\nline\x00nul "
    record = {"id": "exp-hostile-text", "name": hostile * 40, "status": "failed",
              "conclusion": "zanzibar " + "h" * 1_000_000, "url": "https://x.example/" + "u" * 10_000}
    (workspace / ".soma" / "pool" / "hostile-text.json").write_text(json.dumps(record), encoding="utf-8")
    session = await start_session()
    [found] = [r for r in await session.command("soma.findRelatedExperiments", {"text": "zanzibar"})
               if r["id"] == "exp-hostile-text"]
    assert len(found["name"]) == 300 and found["name"].endswith("…")
    assert found["name"].startswith("zanzibar ]0;title evil tab line nul zanzibar")
    assert len(found["headline"]) == 300 and found["headline"].startswith("zanzibar hhh")
    assert len(found["url"]) == 2048
    text = json.dumps(found, ensure_ascii=False)
    assert not [c for c in text if unicodedata.category(c) in ("Cc", "Cf")]
