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
        assert answer["error"]["code"] == -32700
        assert answer["error"]["message"] == f"Parse error: message nested deeper than {MAX_DEPTH} levels"
    at_limit = await server.response(10)
    assert at_limit.get("error", {}).get("code") != -32700  # reached the command (which refuses a list)
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
    assert answer["error"]["message"].startswith(f"Parse error: message over the {MAX_MESSAGE}-byte limit")
    await wait_until(lambda: server.process.returncode is None)
