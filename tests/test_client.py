"""`soma_lsp.client`, the editor stand-in of `soma-lsp demo` and the LSP benchmarks: it reads the
server's stderr as it comes, so a server that logs much is never stopped by a full pipe, and keeps the
last lines to say why a session failed."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from soma_lsp.client import LINE_KEPT, STDERR_KEPT, start

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "workspace"

#: A server that writes 1 MiB to stderr (16 times a pipe's buffer) before it serves — as a server
#: logging at INFO through a first load does — with one line longer than any kept.
LOUD_SERVER = """
import sys
for n in range(4096):
    sys.stderr.write(f"log line {n} " + "x" * 240 + "\\n")
sys.stderr.write("y" * 5000 + "\\n")
sys.stderr.write("the last line\\n")
sys.stderr.flush()
from soma_lsp.cli import main
sys.exit(main(["serve"]))
"""


def test_a_server_that_writes_more_stderr_than_a_pipe_holds_still_serves_and_exits(tmp_path):
    script = tmp_path / "loud_server.py"
    script.write_text(LOUD_SERVER)

    async def session():
        client = await start([sys.executable, str(script)], FIXTURE)
        await client.open_workspace(FIXTURE)
        status = await client.wait_for_pool()
        await client.close()
        return client, status

    # (a hang guard, not a time limit: without the reading the server blocks in its first write for good)
    client, status = asyncio.run(asyncio.wait_for(session(), 120))
    assert status["records"] > 0
    assert client.exited() == 0
    tail = list(client.stderr_tail)
    assert len(tail) == STDERR_KEPT and "the last line" in tail
    assert "y" * LINE_KEPT in tail and all(len(line) <= LINE_KEPT for line in tail)
