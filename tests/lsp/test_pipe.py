"""`soma-lsp serve --pipe PATH` (issue 23 #10): a Unix socket only its owner can connect to, served to
one real client byte by byte (initialize, a command, a hover, shutdown, exit), removed at exit; a path
that is not a socket is refused untouched. docs/reliability.md, docs/spec.md §6.1."""

from __future__ import annotations

import asyncio
import json
import os
import re
import stat
import sys

import pytest

from conftest import FIXTURES, TIMEOUT, frame, server_env, wait_until

TRANSFORMER = FIXTURES / "model" / "transformer.py"


async def start(path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "soma_lsp", "serve", "--pipe", str(path), stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=server_env())


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.loaded = False  # a soma/poolStatus said the first load ended

    async def ask(self, msg_id: int, method: str, params=None) -> dict:
        self.writer.write(frame({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}))
        while True:
            message = await self.receive()
            if message.get("id") == msg_id and "method" not in message:
                return message

    async def until_loaded(self) -> None:
        while not self.loaded:
            await self.receive()

    async def receive(self) -> dict:
        header = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), TIMEOUT)
        length = int(re.search(rb"Content-Length: *(\d+)", header).group(1))
        message = json.loads(await asyncio.wait_for(self.reader.readexactly(length), TIMEOUT))
        if "method" in message and "id" in message:  # a request from the server: answer it
            self.writer.write(frame({"jsonrpc": "2.0", "id": message["id"], "result": None}))
        if message.get("method") == "soma/poolStatus" and not message["params"]["indexing"]:
            self.loaded = True
        return message


async def test_a_client_is_served_over_an_owner_only_socket_removed_at_exit(tmp_path):
    path = tmp_path / "soma.sock"
    process = await start(path)
    try:
        await wait_until(lambda: path.exists())
        assert stat.S_ISSOCK(path.lstat().st_mode) and stat.S_IMODE(path.lstat().st_mode) == 0o600
        client = Client(*await asyncio.wait_for(asyncio.open_unix_connection(str(path)), TIMEOUT))
        answer = await client.ask(1, "initialize", {"processId": None, "rootUri": FIXTURES.as_uri(),
                                                    "capabilities": {}})
        assert answer["result"]["serverInfo"]["name"] == "soma-lsp"
        client.writer.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        await client.until_loaded()  # (asked during the load, the answer would be partial)
        found = await client.ask(2, "workspace/executeCommand", {
            "command": "soma.findRelatedExperiments", "arguments": [{"text": "rope theta"}]})
        assert found["result"]
        line = next(n for n, text in enumerate(TRANSFORMER.read_text(encoding="utf-8").splitlines())
                    if "class RotaryEmbedding" in text)
        hover = await client.ask(3, "textDocument/hover", {"textDocument": {"uri": TRANSFORMER.as_uri()},
                                                           "position": {"line": line, "character": 8}})
        assert "rope-theta-500k" in hover["result"]["contents"]["value"]
        assert "result" in await client.ask(4, "shutdown")
        client.writer.write(frame({"jsonrpc": "2.0", "method": "exit"}))
        await client.writer.drain()
        assert await asyncio.wait_for(process.wait(), TIMEOUT) == 0
        assert not os.path.lexists(path)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_a_path_that_is_not_a_socket_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("keep me\n", encoding="utf-8")
    process = await start(path)
    _, err = await asyncio.wait_for(process.communicate(), TIMEOUT)
    assert process.returncode == 2
    assert b"exists and is not a socket" in err
    assert path.read_text(encoding="utf-8") == "keep me\n"


async def test_a_directory_owned_by_another_user_is_refused():
    if os.stat("/").st_uid == os.getuid():
        pytest.skip("this user owns / (root): no directory owned by another user to try")
    process = await start("/soma-test.sock")
    _, err = await asyncio.wait_for(process.communicate(), TIMEOUT)
    assert process.returncode == 2 and b"not owned by this user" in err
