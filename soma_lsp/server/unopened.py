"""Reading a document the client has not opened (a hover, a lens or `findRelated` naming any URI).

pygls would read such a file whole, on the event loop, wherever it is: `file:///dev/zero` grew the
server without bound, a FIFO made it deaf for good, and `/etc/passwd` was ranked against the pool
(issue 23 #3). Here a document that is not open is read only when it is a regular file (opened
without blocking and checked on what was opened: `pool.loader.open_regular`), inside a workspace
folder or a pool root (both resolved, symlinks included), and at most `MAX_UNOPENED` bytes; the
caller runs this in the query executor. Anything else raises `Unavailable`, which a feature answers
empty (`guard.contained`) and a command with -32602.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..pool.loader import NotRegularFile, open_regular, read_bounded
from . import convert
from .guard import Unavailable

MiB = 1024 * 1024
MAX_UNOPENED = 4 * MiB  # a source file an editor would open; larger is not code a hover is about


def read_unopened(uri: str, roots: Iterable[str]) -> tuple[str, str]:
    """(path, text) of the file at `uri`, read as the module docstring says, or `Unavailable`."""
    path = convert.uri_to_path(uri)
    if path is None:
        raise Unavailable(f"{uri} is not open and not a file: URI")
    resolved = convert.real(path)
    if not any(convert.inside(resolved, convert.real(root)) for root in roots):
        raise Unavailable(f"{uri} is not open and not inside a workspace folder or pool root")
    try:
        f, status = open_regular(resolved)
        with f:
            if status.st_size > MAX_UNOPENED:
                raise Unavailable(f"{uri} is not open and is {status.st_size / MiB:.1f} MiB, over the "
                                  f"{MAX_UNOPENED // MiB} MiB limit for a document read from disk")
            data = read_bounded(f, status.st_size, MAX_UNOPENED)
    except (NotRegularFile, OSError) as error:
        raise Unavailable(f"{uri} is not open and cannot be read: {error}") from None
    if len(data) > MAX_UNOPENED:
        raise Unavailable(f"{uri} is not open and grew over the {MAX_UNOPENED // MiB} MiB limit while read")
    return path, data.decode("utf-8", errors="replace")
