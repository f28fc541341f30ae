"""Reading LSP frames robustly: what pygls 2.1's own reader loop gets wrong, done right here.

pygls' loop wants `Content-Length: N\\r\\n` exactly, goes deaf after a bad header or LF-only line
endings, and drops a frame whose body is not JSON without answering its request. This reader keeps
its own buffer and:

* accepts CRLF and LF header lines, header names in any case, other headers ignored;
* resynchronises on the next `Content-Length:` after garbage, or after a header whose length is not a
  number (`-1`, `abc`, empty: answered with a parse error, id null);
* tolerates a wrong Content-Length: a body that is a complete JSON object before N bytes arrive is
  taken as the message (the rest of the buffer is framed again), a too-short one is extended to the
  end of the JSON object it starts; a body that is not JSON and runs into the next header is answered
  and dropped at that header (no JSON text holds a raw line end after `content-length: N`);
* enforces limits (docs/reliability.md): a message over `MAX_MESSAGE` bytes, or nested deeper than
  `MAX_DEPTH` levels, is answered with an Invalid Request error (-32600) to its id when it can be
  read (else a parse error, -32700, id null: the bytes may not even be JSON) and dropped, never buffered on or recursed into; waiting for a body costs linear time (only new bytes
  are searched for a header, and a body that merely ends in `}` is tried as a message again only
  after it grew by a quarter);
* answers a body that is not JSON with a JSON-RPC parse error (-32700) to the request id when one can
  be read from the bytes (else id null), so a client never waits for an answer that will not come.

Decoded messages go to `protocol.handle_raw(data)` (see `protocol.SomaProtocol`).

Serving: `serve_stdio` reads stdin in its own thread (never made non-blocking), `serve_tcp` (an
unauthenticated port) and `serve_pipe` (an owner-only Unix socket) serve the first client that connects; both run `server.run(read, writer)` (see `app.SomaServer`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import stat
import sys
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

logger = logging.getLogger(__name__)

_CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*(\d{1,15})[ \t]*(?:\r?\n|$)", re.IGNORECASE)
_HEADER_START = re.compile(rb"content-length[ \t]*:", re.IGNORECASE)
_HEADER_END = re.compile(rb"\r?\n\r?\n")
_HEADER_LINE = re.compile(rb"^[A-Za-z][A-Za-z0-9-]*[ \t]*:")
#: A header line no JSON text can hold (a raw line end inside a string is invalid JSON): where it
#: appears inside a body, that body ended before it.
_NEXT_FRAME = re.compile(rb"content-length[ \t]*:[ \t]*\d+[ \t]*\r?\n", re.IGNORECASE)
_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')
MAX_HEADER = 8192
MAX_MESSAGE = 64 << 20  #: bytes in one message; larger ones are answered with an error and dropped
MAX_DEPTH = 256  #: levels of nesting in one message (an LSP message from a client has about 10)
_EAGER = 4096  # a waiting body this small is tried as a message whenever it ends in `}`
_DECODER = json.JSONDecoder()


class _TooDeep(ValueError):
    pass


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

    def __init__(self, max_message: int = MAX_MESSAGE, max_depth: int = MAX_DEPTH) -> None:
        self.buffer = bytearray()
        self.max_message = max_message
        self.max_depth = max_depth
        self._length: int | None = None  # Content-Length of the frame whose body we wait for
        self._searched = 0  # bytes of the waiting body already searched for the next header
        self._tried = 0  # size of the waiting body when it was last tried as a message

    def feed(self, data: bytes, *, eof: bool = False) -> list[tuple[str, Any]]:
        """Add bytes; return ("message", dict|list|...), ("error", (id, text)) for a body that is not
        JSON and ("refused", (id, text)) for one over the size or depth limit, in order."""
        self.buffer += data
        out: list[tuple[str, Any]] = []
        while True:
            if self._length is None:
                if not self._read_header(out):
                    break
                if self._length is None:  # no valid Content-Length in that header: on to the next one
                    continue
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
        end = _HEADER_END.search(buffer, 0, MAX_HEADER + 4)
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
            out.append(("error", (None, f"Parse error: invalid Content-Length header {header[:100]!r}")))
            return True
        self._length = int(match.group(1))
        self._searched = self._tried = 0
        return True

    def _read_body(self, eof: bool) -> tuple[str, Any] | None:
        length, buffer = self._length, self.buffer
        if length is not None and length <= self.max_message and len(buffer) >= length:
            return self._complete(length)
        return self._waiting(eof)

    def _complete(self, length: int) -> tuple[str, Any]:
        """The whole body is here: decode it (or the JSON object the bytes hold, if the length was wrong)."""
        buffer = self.buffer
        body = bytes(buffer[:length])
        try:
            value = self._parse(body.decode("utf-8"))
        except _TooDeep as error:
            return self._drop(length, body, str(error), "refused")
        except ValueError as error:
            if _truncated(error, length) or getattr(error, "msg", "") == "Extra data":
                taken = self._prefix(len(buffer))
                if taken is not None and taken[1] != length:
                    logger.warning("Content-Length %d does not match the message (%d bytes)", length, taken[1])
                    return taken[0]
            return self._drop(length, body, f"Parse error: {error}")
        return self._take(length, ("message", value))

    def _waiting(self, eof: bool) -> tuple[str, Any] | None:
        """Fewer bytes than the Content-Length: wait for more, unless the body is over already — a
        next header in it, the end of input, or the size limit — or the bytes so far hold a JSON object
        (a Content-Length too large; what could follow it in a real body is only space)."""
        buffer, length = self.buffer, self._length
        following = _NEXT_FRAME.search(buffer, max(0, self._searched - 64))
        self._searched = len(buffer)
        if following is not None or eof:
            end = following.start() if following is not None else len(buffer)
            taken = self._prefix(end)
            if taken is not None:
                logger.warning("Content-Length %d is larger than the message (%d bytes)", length, taken[1])
                return taken[0]
            what = "incomplete message at end of input" if following is None else \
                f"Parse error: Content-Length {length} runs into the next message, and the body is not JSON"
            return self._drop(end, bytes(buffer[:min(end, MAX_HEADER)]), what)
        if len(buffer) > self.max_message:
            return self._drop(len(buffer), bytes(buffer[:MAX_HEADER]),
                              f"Invalid Request: message over the {self.max_message}-byte limit "
                              f"(Content-Length {length})", "refused")
        if bytes(buffer[-64:]).rstrip().endswith(b"}") and (
                len(buffer) <= _EAGER or len(buffer) >= self._tried + self._tried // 4):
            self._tried = len(buffer)
            taken = self._prefix(len(buffer))
            if taken is not None:
                logger.warning("Content-Length %d is larger than the message (%d bytes)", length, taken[1])
                return taken[0]
        return None

    def _prefix(self, end: int) -> tuple[tuple[str, Any], int] | None:
        """The JSON object at the start of the buffer (within `end` bytes), taken: (item, its size)."""
        try:
            decoded = _decode_prefix(bytes(self.buffer[:min(end, self.max_message)]))
        except RecursionError:  # deeper than the decoder goes: dropped up to `end` (the rest is framed again)
            return self._drop(end, bytes(self.buffer[:MAX_HEADER]), self._too_deep(), "refused"), end
        if decoded is None:
            return None
        value, size = decoded
        if _deeper_than(value, self.max_depth):
            return self._drop(size, bytes(self.buffer[:MAX_HEADER]), self._too_deep(), "refused"), size
        return self._take(size, ("message", value)), size

    def _parse(self, text: str) -> Any:
        try:
            value = json.loads(text)
        except RecursionError:
            raise _TooDeep(self._too_deep()) from None
        if text.count("[") + text.count("{") > self.max_depth and _deeper_than(value, self.max_depth):
            raise _TooDeep(self._too_deep())
        return value

    def _too_deep(self) -> str:
        return f"Invalid Request: message nested deeper than {self.max_depth} levels"

    def _take(self, size: int, item: tuple[str, Any]) -> tuple[str, Any]:
        del self.buffer[:size]
        self._length = None
        return item

    def _drop(self, size: int, head: bytes, text: str, kind: str = "error") -> tuple[str, Any]:
        """Drop `size` bytes of a body that cannot be a message: an item of `kind` ("error": not
        JSON; "refused": over a limit) for its id (if readable)."""
        logger.warning("dropping a message of %d bytes: %s", size, text)
        return self._take(size, (kind, (request_id_in(head), text)))


def _truncated(error: ValueError, length: int) -> bool:
    """The body ended before its JSON did (a Content-Length too short)."""
    if isinstance(error, UnicodeDecodeError):
        return error.start >= length - 3  # a character cut at the end
    return isinstance(error, json.JSONDecodeError) and error.pos >= len(error.doc.rstrip()) - 1


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests containers more than `limit` levels deep (without recursing)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, dict | list):
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node)
                     if isinstance(child, dict | list))
    return False


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
                    protocol.answer_unreadable(*value, refused=kind == "refused")
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
    """Listen on host:port, serve the first client that connects, exit when it is done. Anyone who
    can reach the port is that client: TCP is unauthenticated (`serve_pipe` can be restricted)."""

    async def listen(connection) -> asyncio.Server:
        listener = await asyncio.start_server(connection, host, port)
        bound = listener.sockets[0].getsockname()
        logger.info("listening on %s:%s", bound[0], bound[1])
        if ready is not None:
            ready(bound[0], bound[1])
        return listener

    return asyncio.run(_serve_first_client(server, listen))


def serve_pipe(server: Any, path: str, ready: Callable[[str], None] | None = None) -> int:
    """Listen on a Unix domain socket at `path`, created owner-only (0600) in a directory the user
    owns, serve the first client, remove the socket at exit. Only the user (and root) can connect:
    the local transport that can be restricted, unlike TCP. `check_pipe_path` says what is refused."""
    path = os.path.abspath(path)
    check_pipe_path(path)

    async def listen(connection) -> asyncio.Server:
        if os.path.lexists(path):
            os.unlink(path)  # a stale socket (check_pipe_path refused anything else)
        mask = os.umask(0o177)  # created 0600: never a moment when others may connect
        try:
            listener = await asyncio.start_unix_server(connection, path)
        finally:
            os.umask(mask)
        logger.info("listening on %s", path)
        if ready is not None:
            ready(path)
        return listener

    try:
        return asyncio.run(_serve_first_client(server, listen))
    finally:
        try:
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                os.unlink(path)
        except OSError:
            pass


def check_pipe_path(path: str) -> None:
    """Refuse (ValueError) a socket path in a directory the user does not own, or one where
    something other than a socket stands (it would be deleted to make room)."""
    directory = os.path.dirname(path)
    try:
        owner = os.stat(directory).st_uid
    except OSError as error:
        raise ValueError(f"cannot use the directory of {path}: {error.strerror or error}") from None
    if owner != os.getuid():
        raise ValueError(f"{directory} is not owned by this user; put the socket in a directory you own")
    if os.path.lexists(path) and not stat.S_ISSOCK(os.lstat(path).st_mode):
        raise ValueError(f"{path} exists and is not a socket; not replaced")


async def _serve_first_client(server: Any, listen: Callable[[Any], Awaitable[asyncio.Server]]) -> int:
    """Serve the first client a listener accepts (later ones are closed at once); its exit status."""
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

    listener = await listen(connection)
    async with listener:
        return await done


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
