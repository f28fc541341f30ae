"""Reading LSP frames robustly: what pygls 2.1's own reader loop gets wrong, done right here.

pygls' loop wants `Content-Length: N\\r\\n` exactly, goes deaf after a bad header or LF-only line
endings, and drops a frame whose body is not JSON without answering its request. This reader keeps
its own buffer and:

* accepts CRLF and LF header lines, header names in any case, other headers ignored;
* resynchronises on the next `Content-Length:` after garbage;
* tolerates a wrong Content-Length: a body that is a complete JSON object before N bytes arrive is
  taken as the message (the rest of the buffer is framed again), a too-short one is extended to the
  end of the JSON object it starts;
* answers a body that is not JSON with a JSON-RPC parse error (-32700) to the request id when one can
  be read from the bytes (else id null), so a client never waits for an answer that will not come.

Decoded messages go to `protocol.handle_raw(data)` (see `protocol.SomaProtocol`).

Serving: `serve_stdio` reads stdin in its own thread (never made non-blocking), `serve_tcp` serves
the first client that connects; both run `server.run(read, writer)` (see `app.SomaServer`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

logger = logging.getLogger(__name__)

_CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*(\d+)", re.IGNORECASE)
_HEADER_START = re.compile(rb"content-length[ \t]*:", re.IGNORECASE)
_HEADER_END = re.compile(rb"\r?\n\r?\n")
_HEADER_LINE = re.compile(rb"^[A-Za-z][A-Za-z0-9-]*[ \t]*:")
_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')
MAX_HEADER = 8192
_DECODER = json.JSONDecoder()


def request_id_in(body: bytes) -> int | str | None:
    """The `id` of a request whose body does not parse, when it can still be read from the bytes."""
    match = _ID.search(body)
    if match is None:
        return None
    try:
        value = json.loads(match.group(1))
    except ValueError:
        return None
    return value if isinstance(value, int | str) else None


class FrameReader:
    """Split a byte stream into JSON-RPC messages; `feed` returns the decoded ones (or parse errors)."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self._length: int | None = None  # Content-Length of the frame whose body we wait for

    def feed(self, data: bytes, *, eof: bool = False) -> list[tuple[str, Any]]:
        """Add bytes; return ("message", dict|list|...) and ("error", (id, text)) items in order."""
        self.buffer += data
        out: list[tuple[str, Any]] = []
        while True:
            if self._length is None:
                if not self._read_header(out):
                    break
            item = self._read_body(eof)
            if item is None:
                break
            out.append(item)
        return out

    def _read_header(self, out: list) -> bool:
        buffer = self.buffer
        start = _HEADER_START.search(buffer)
        if start is None:
            junk = bytes(buffer).strip()
            if len(buffer) > MAX_HEADER:
                logger.warning("discarding %d bytes that are not an LSP frame", len(buffer))
                del buffer[:]
            elif junk and b"\n" in buffer and not _could_be_header_prefix(junk):
                if not _HEADER_LINE.match(junk):
                    logger.warning("discarding bytes that are not an LSP frame: %r", junk[:200])
                del buffer[: buffer.rfind(b"\n") + 1]
            return False
        if start.start() > 0:
            junk = bytes(buffer[: start.start()]).strip()
            if junk and not all(_HEADER_LINE.match(line.strip()) for line in junk.splitlines() if line.strip()):
                logger.warning("discarding bytes before an LSP header: %r", junk[:200])
            del buffer[: start.start()]
        end = _HEADER_END.search(buffer)
        if end is None:
            if len(buffer) > MAX_HEADER:
                logger.warning("LSP header too long; discarding it")
                del buffer[: len(b"content-length:")]
                return True  # look for the next header
            return False
        header = bytes(buffer[: end.start()])
        del buffer[: end.end()]
        match = _CONTENT_LENGTH.match(header)
        if match is None:
            logger.warning("LSP header without a valid Content-Length: %r", header[:200])
            return True
        self._length = int(match.group(1))
        return True

    def _read_body(self, eof: bool) -> tuple[str, Any] | None:
        length, buffer = self._length, self.buffer
        assert length is not None
        head = bytes(buffer[: min(length, len(buffer))])
        if len(buffer) < length:
            # Too large a Content-Length, or simply more to come: take a complete JSON object now
            # when the bytes so far hold one (what could follow it in a real body is only space).
            if not eof and not head.rstrip().endswith(b"}") and not _HEADER_START.search(head):
                return None
            decoded = _decode_prefix(bytes(buffer))
            if decoded is None:
                if eof:
                    self._length = None
                    del buffer[:]
                    return ("error", (request_id_in(head), "incomplete message at end of input"))
                return None
            value, end = decoded
            del buffer[:end]
            self._length = None
            logger.warning("Content-Length %d is larger than the message (%d bytes)", length, end)
            return ("message", value)
        body = bytes(buffer[:length])
        try:
            value = json.loads(body)
        except (ValueError, UnicodeDecodeError) as error:
            decoded = _decode_prefix(bytes(buffer))
            if decoded is not None and decoded[1] != length:
                # Content-Length was wrong, the bytes hold one JSON object: take it.
                value, end = decoded
                del buffer[:end]
                self._length = None
                logger.warning("Content-Length %d does not match the message (%d bytes)", length, end)
                return ("message", value)
            del buffer[:length]
            self._length = None
            return ("error", (request_id_in(body), f"Parse error: {error}"))
        del buffer[:length]
        self._length = None
        return ("message", value)


def _could_be_header_prefix(junk: bytes) -> bool:
    return b"content-length".startswith(junk.lower()[:14])


def _decode_prefix(data: bytes) -> tuple[Any, int] | None:
    """A JSON object at the start of `data` (after space) and the byte offset where it ends."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        text = data[: error.start].decode("utf-8")
    stripped = len(text) - len(text.lstrip())
    if not text[stripped:stripped + 1] == "{":
        return None
    try:
        value, end = _DECODER.raw_decode(text, stripped)
    except ValueError:
        return None
    return value, len(text[:end].encode("utf-8"))


async def serve_stream(read: Callable[[], Awaitable[bytes]], protocol: Any,
                       stop: asyncio.Event) -> None:
    """Read frames until end of input or `stop`; hand each message to `protocol.handle_raw`."""
    frames = FrameReader()
    while not stop.is_set():
        reading = asyncio.ensure_future(read())
        stopping = asyncio.ensure_future(stop.wait())
        done, _ = await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if reading not in done:
            reading.cancel()
            break
        stopping.cancel()
        data = reading.result()
        eof = not data
        for kind, value in frames.feed(data, eof=eof):
            try:
                if kind == "message":
                    protocol.handle_raw(value)
                else:
                    msg_id, text = value
                    protocol.answer_parse_error(msg_id, text)
            except Exception:  # never let one message end the loop
                logger.exception("error handling a message")
        if eof:
            break


def serve_stdio(server: Any, stdin=None, stdout=None) -> int:
    """Serve over stdio; returns the exit status (0 after shutdown + exit, else 1)."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer

    def write(data: bytes) -> None:
        stdout.write(data)  # a BufferedWriter: partial writes are retried for us
        stdout.flush()

    async def main() -> int:
        loop = asyncio.get_running_loop()
        read = _stdin_reader(loop, stdin)
        return await server.run(read, _Writer(write))

    return asyncio.run(main())


def serve_tcp(server: Any, host: str, port: int, ready: Callable[[str, int], None] | None = None) -> int:
    """Listen on host:port, serve the first client that connects, exit when it is done."""

    async def main() -> int:
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        connected = False

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal connected
            if done.done() or connected:
                writer.close()
                return
            connected = True

            try:
                code = await server.run(lambda: reader.read(65536), _Writer(writer.write, writer.close))
            finally:
                writer.close()
            if not done.done():
                done.set_result(code)

        listener = await asyncio.start_server(connection, host, port)
        bound = listener.sockets[0].getsockname()
        logger.info("listening on %s:%s", bound[0], bound[1])
        if ready is not None:
            ready(bound[0], bound[1])
        async with listener:
            code = await done
        return code

    return asyncio.run(main())


class _Writer:
    """What the protocol writes its frames to."""

    def __init__(self, write: Callable[[bytes], Any], close: Callable[[], Any] = lambda: None) -> None:
        self.write, self.close = write, close


def _stdin_reader(loop: asyncio.AbstractEventLoop, stdin) -> Callable[[], Any]:
    """An async `read()` of whatever stdin has, from a dedicated thread.

    Not `connect_read_pipe`: that makes the descriptor non-blocking, and a client that gives the
    server one socket for stdin and stdout would then see writes fail with EAGAIN. The thread is
    outside the loop's default executor, so a read still blocked at exit holds nothing up."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="soma-stdin")
    read1 = getattr(stdin, "read1", None) or stdin.read
    return lambda: loop.run_in_executor(executor, read1, 65536)
