"""The protocol under abuse, in raw bytes: every request with an id gets an answer, exit codes right."""

from __future__ import annotations

import asyncio
import json
import re

from conftest import FIXTURES, TIMEOUT, frame, wait_until

HOVER = {"textDocument": {"uri": (FIXTURES / "model/transformer.py").as_uri()}, "position": {"line": 54, "character": 8}}


async def test_hover_without_position_gets_invalid_params(raw_server):
    server = await raw_server()
    await server.initialize(FIXTURES)
    server.request(2, "textDocument/hover", {"textDocument": {"uri": HOVER["textDocument"]["uri"]}})
    answer = await server.response(2)
    assert answer["error"]["code"] == -32602
    assert "position" in answer["error"]["message"]
    server.request(3, "textDocument/hover", {"textDocument": {"uri": 7}, "position": {"line": "x"}})
    assert (await server.response(3))["error"]["code"] == -32602
    server.request(4, "soma/unknown", {})
    assert (await server.response(4))["error"]["code"] == -32601
    server.request(5, "shutdown")
    assert "result" in await server.response(5)


async def test_bad_json_with_an_id_gets_a_parse_error(raw_server):
    server = await raw_server()
    await server.initialize(FIXTURES)
    server.send(frame('{"jsonrpc": "2.0", "id": 42, "method": "textDocument/hover", "params": {oops'))
    answer = await server.response(42)
    assert answer["error"]["code"] == -32700
    server.send(frame(b'{"jsonrpc": "2.0", "id": "s-1", "method": "x", "params": "\xff\xfe"}'))
    assert (await server.response("s-1"))["error"]["code"] == -32700
    server.send(frame("not json at all"))  # no id to answer: a parse error with id null
    await wait_until(lambda: any(m.get("id") is None and "error" in m for m in server.messages))
    server.request(43, "workspace/executeCommand", {"command": "soma.poolStatus", "arguments": [{}]})
    assert "result" in await server.response(43)  # and it still serves


async def test_lf_headers_wrong_lengths_and_garbage_do_not_make_it_deaf(raw_server):
    server = await raw_server()
    await server.initialize(FIXTURES)
    status = {"jsonrpc": "2.0", "id": 10, "method": "workspace/executeCommand",
              "params": {"command": "soma.poolStatus", "arguments": [{}]}}
    body = json.dumps(status).encode()
    server.send(b"Content-Length: %d\n\n" % len(body) + body)  # LF-only header lines
    assert "result" in await server.response(10)
    body = json.dumps({**status, "id": 11}).encode()
    server.send(b"content-length: %d\r\ncontent-type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" % len(body) + body)
    assert "result" in await server.response(11)
    body = json.dumps({**status, "id": 12}).encode()
    server.send(b"Content-Length: %d\r\n\r\n" % (len(body) + 50) + body)  # declared too long
    assert "result" in await server.response(12)
    body = json.dumps({**status, "id": 13}).encode()
    server.send(b"garbage that is no header\r\n" + frame(body))
    assert "result" in await server.response(13)
    body = json.dumps({**status, "id": 14}).encode()
    server.send(b"Content-Length: %d\r\n\r\n" % (len(body) - 5) + body)  # declared too short
    assert "result" in await server.response(14)
    server.request(15, "workspace/executeCommand", {"command": "soma.poolStatus", "arguments": [{}]})
    assert "result" in await server.response(15)


async def test_exit_without_shutdown_exits_1(raw_server):
    server = await raw_server()
    await server.initialize(FIXTURES)
    server.notify("exit")
    assert await server.exit_code() == 1


async def test_shutdown_then_exit_exits_0_and_requests_in_between_are_refused(raw_server):
    server = await raw_server()
    await server.initialize(FIXTURES)
    server.request(2, "shutdown")
    assert (await server.response(2))["result"] is None
    server.request(3, "textDocument/hover", HOVER)
    assert (await server.response(3))["error"]["code"] == -32600
    server.notify("exit")
    assert await server.exit_code() == 0


async def test_end_of_input_without_exit_ends_the_server(raw_server):
    server = await raw_server()
    await server.initialize(FIXTURES)
    server.process.stdin.close()
    assert await server.exit_code() == 1


async def test_cancelled_request_is_answered_cancelled_and_the_server_goes_on(raw_server):
    server = await raw_server()
    await server.initialize(FIXTURES)
    await wait_until(lambda: any(m.get("method") == "soma/poolStatus" and not m["params"]["indexing"]
                                 and m["params"]["version"] > 0 for m in server.messages))
    find = {"command": "soma.findRelatedExperiments", "arguments": [{"text": "rope theta attention", "limit": 0}]}
    # the request and its cancellation arrive together: the work is cancelled before it starts
    server.send(frame({"jsonrpc": "2.0", "id": 7, "method": "workspace/executeCommand", "params": find})
                + frame({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 7}})
                + frame({"jsonrpc": "2.0", "id": 8, "method": "textDocument/hover", "params": HOVER})
                + frame({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 8}}))
    assert (await server.response(7))["error"]["code"] == -32800
    assert (await server.response(8))["error"]["code"] == -32800
    server.request(9, "workspace/executeCommand", find)
    answer = await server.response(9)
    assert answer["result"] and answer["result"][0]["id"] == "exp-0042"


async def test_tcp(tmp_path):
    import sys

    from conftest import server_env

    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "soma_lsp", "serve", "--tcp", "127.0.0.1:0",
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        env=server_env())
    try:
        port = None
        while port is None:
            line = (await asyncio.wait_for(process.stderr.readline(), TIMEOUT)).decode()
            assert line, "server ended before listening"
            if "listening on" in line:
                port = int(line.rsplit(":", 1)[1])
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), TIMEOUT)
        writer.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                            "params": {"processId": None, "rootUri": FIXTURES.as_uri(), "capabilities": {}}}))
        header = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), TIMEOUT)
        length = int(re.search(rb"Content-Length: *(\d+)", header).group(1))
        body = await asyncio.wait_for(reader.readexactly(length), TIMEOUT)
        assert json.loads(body)["result"]["serverInfo"]["name"] == "soma-lsp"
        writer.write(frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}) + frame({"jsonrpc": "2.0", "method": "exit"}))
        await writer.drain()
        assert await asyncio.wait_for(process.wait(), TIMEOUT) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
