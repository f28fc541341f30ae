"""Hostile bytes on the wire (issue 23 #1, #2, #7), sent to the real server over stdin: it stays up,
answers what has an id, and serves the next valid message. Limits: docs/reliability.md."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, frame, wait_until
from soma_lsp.server.transport import MAX_DEPTH, MAX_MESSAGE

STATUS = {"command": "soma.poolStatus", "arguments": [{}]}


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def find_related(msg_id: int, argument: str) -> bytes:
    return frame('{"jsonrpc": "2.0", "id": %d, "method": "workspace/executeCommand", "params": '
                 '{"command": "soma.findRelatedExperiments", "arguments": [%s]}}' % (msg_id, argument))


@pytest.mark.parametrize("length", [b"-1", b"abc", b""])
async def test_a_malformed_content_length_is_answered_and_the_next_initialize_served(raw_server, length):
    """`printf 'Content-Length: -1\\r\\n\\r\\n{}' | soma-lsp` exited 1 (an AssertionError)."""
    server = await raw_server()
    server.send(b"Content-Length: " + length + b"\r\n\r\n{}")
    answer = await server.initialize(FIXTURES)
    assert "capabilities" in answer["result"]
    error = next(m for m in server.messages if m.get("id") is None and "error" in m)
    assert error["error"]["code"] == -32700 and "Content-Length" in error["error"]["message"]
    assert server.process.returncode is None


async def test_a_message_nested_too_deep_is_answered_with_its_id(raw_server):
    """Nesting past ~1,000 levels raised RecursionError in the reader and the server died."""
    server = await raw_server()
    await server.initialize(FIXTURES)
    server.send(frame('{"jsonrpc": "2.0", "id": 7, "method": "textDocument/hover", "params": %s}' % nested(100_000)))
    server.send(find_related(8, nested(2_000)))
    server.send(find_related(9, nested(MAX_DEPTH)))  # with the message around it: over the limit by 4
    server.send(find_related(10, nested(MAX_DEPTH - 4)))  # exactly at the limit: decoded, then judged
    for msg_id in (7, 8, 9):
        answer = await server.response(msg_id)
        assert answer["error"]["code"] == -32600
        assert answer["error"]["message"] == f"Invalid Request: message nested deeper than {MAX_DEPTH} levels"
    at_limit = await server.response(10)
    assert at_limit.get("error", {}).get("code") not in (-32600, -32700)  # reached the command (which refuses a list)
    server.request(11, "workspace/executeCommand", STATUS)
    assert "result" in await server.response(11)


async def test_a_huge_content_length_with_a_body_that_is_not_json_leaves_it_listening(raw_server):
    """A huge Content-Length, then bytes that are not JSON: the server went deaf for good, its
    buffer growing without bound (with quadratic copying)."""
    server = await raw_server()
    await server.initialize(FIXTURES)
    server.send(b"Content-Length: 99999999999\r\n\r\n" + b'{"id": 20, ' + b"x" * 1_000_000)
    server.request(21, "workspace/executeCommand", STATUS)  # the next header ends the bad body
    assert "result" in await server.response(21)
    assert (await server.response(20))["error"]["code"] == -32700
    # no header follows: dropped at the size limit, answered, and the next message served
    server.send(b"Content-Length: 99999999999\r\n\r\n" + b'{"id": 22, ' + b"y" * (MAX_MESSAGE + 200_000))  # (past the limit before the next header is read)
    server.request(23, "workspace/executeCommand", STATUS)
    assert "result" in await server.response(23)
    answer = await server.response(22)
    assert answer["error"]["code"] == -32600
    assert answer["error"]["message"].startswith(f"Invalid Request: message over the {MAX_MESSAGE}-byte limit")
    await wait_until(lambda: server.process.returncode is None)


async def test_a_batch_gets_one_invalid_request_error_and_is_not_run(raw_server):
    """A JSON-RPC batch got no answer. LSP has no batches: one -32600, id null, no element run."""
    server = await raw_server()
    await server.initialize(FIXTURES)
    server.send(frame('[{"jsonrpc": "2.0", "id": 30, "method": "workspace/executeCommand", "params": %s}]'
                      % json.dumps(STATUS)))
    error = await wait_until(lambda: next((m for m in server.messages if "error" in m and m.get("id") is None), None))
    assert error["error"] == {"code": -32600, "message": "Invalid Request: batch not supported (LSP sends one message per frame)"}
    server.request(31, "workspace/executeCommand", STATUS)
    assert "result" in await server.response(31)
    assert not any(m.get("id") == 30 for m in server.messages)


@pytest.mark.parametrize("message, answered_id", [
    ('{"jsonrpc": "2.0", "id": 40, "method": null}', 40),
    ('{"jsonrpc": "2.0", "id": 41, "method": 7, "params": {}}', 41),
    ('{"jsonrpc": "2.0", "id": {"a": 1}, "method": "textDocument/hover", "params": {}}', None),
    ('{"jsonrpc": "2.0", "id": [1], "method": "workspace/executeCommand", "params": {"command": "x"}}', None),
    ('{"jsonrpc": "2.0", "id": true, "method": "shutdown"}', None),
    ('42', None),
])
async def test_a_message_of_the_wrong_shape_gets_invalid_request_without_a_traceback(raw_server, message, answered_id):
    """`method: null` got no answer; an object `id` got -32603 with a Python traceback in `data`."""
    server = await raw_server()
    await server.initialize(FIXTURES)
    server.send(frame(message))
    server.request(50, "workspace/executeCommand", STATUS)
    assert "result" in await server.response(50)
    errors = [m for m in server.messages if "error" in m]
    assert [e["id"] for e in errors] == [answered_id]
    assert errors[0]["error"]["code"] == -32600 and "data" not in errors[0]["error"]



def test_an_internal_error_carries_no_traceback_on_the_wire():
    """Every error path ends in `_send_response`: pygls' -32603 puts the traceback in `data`; it is
    logged, and the answer keeps only code and message."""
    from pygls.exceptions import JsonRpcInternalError
    from soma_lsp.server.app import create_server

    server, sent = create_server(), []
    server.protocol._send_data = sent.append
    try:
        raise TypeError("unhashable type: 'dict'")
    except TypeError:
        import sys
        error = JsonRpcInternalError.of(sys.exc_info()).to_response_error()
    assert "traceback" in error.data
    server.protocol._send_response(60, error=error)
    assert sent[0].error.data is None and sent[0].error.message == "TypeError: unhashable type: 'dict'"
