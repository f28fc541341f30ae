"""Counting a big `.jsonl` file's records in a second process while this one validates the file.

A first load of one 100k-record JSONL file spends about as long counting what the index needs of the
records' text and architecture (the documents' terms — name, headline, notes, details — and the
components) as decoding and validating the records, all in one Python thread. With a core to spare,
`start` has a child process read the same file and count every line (`records.document_texts` and
`records.parse_architecture` of the decoded line) while the loader validates it; the index takes the
child's counts (`LiveIndex.update(counted=...)`) once the rest of the file's batch is prepared, and the
two halves of the work overlap.

Never wrong, only sometimes not faster: the child sends the file's stamp (`loader.stamp_of`: size,
mtime, ctime, inode, device) from before and after its read, and its count is used only when both
equal the stamp the loader took and the file still has — the rule that lets a snapshot serve a file
unread — and that stamp is not racy (`FileLoad.stamp`). A file changed or replaced meanwhile, or
written in the last two seconds, a child that failed, hung or sent anything malformed: the documents
are counted here, as without it. The child reads nothing but that file and writes nothing but its
stdout and stderr, two unnamed temporary files, its count in a fixed binary layout (no pickle).
"""

from __future__ import annotations

import gc
import logging
import os
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ..records import document_texts, parse_architecture
from ..retrieval import CountedLines, Counts, component_bag, count_lines
from .loader import FileLoad, decode_line, jsonl_lines, stamp_of

log = logging.getLogger(__name__)

APART_BYTES = 32 << 20  # smaller files count faster here than a child starts (~0.2 s of imports)
WAIT_SECONDS = 120  # a child this late is stopped and its file counted here
MAGIC = b"SOMACNT1"
_HEADER = struct.Struct("<8sQ" + "3Q" * 2 + "QqqQQ" * 2)  # magic, lines; per `Counts`: bytes of names,
# names, postings; two stamps
_EMPTY = ("", "", "", "")
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])


def start(files: Iterable[tuple[str, int]], max_line: int) -> dict[str, "Counting"]:
    """A child for each `.jsonl` (path, size) of at least `APART_BYTES`, as many as there are spare
    cores (none on one core)."""
    spare = len(os.sched_getaffinity(0)) - 1 if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1) - 1
    chosen = [path for path, size in files if size >= APART_BYTES and path.endswith(".jsonl")][:max(spare, 0)]
    countings = {}
    for path in chosen:
        try:
            countings[path] = Counting(path, max_line)
        except OSError as error:
            log.warning("could not start counting %s apart: %r", path, error)
    return countings


class Counting:
    """One child counting one file."""

    def __init__(self, path: str, max_line: int) -> None:
        self.path = path
        self._result: CountedLines | None = None
        self._done = False
        environment = dict(os.environ)
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_PARENT, environment.get("PYTHONPATH")]))
        # the child writes into unnamed temporary files, not pipes: a pipe would hold it until this
        # process reads, and then pass 35 MB 64 KB at a time (0.1–0.3 s, measured)
        self._out, self._err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        try:
            self._child = subprocess.Popen(
                [sys.executable, "-c", "from soma_lsp.pool.counting import main; main()", path, str(max_line)],
                stdin=subprocess.DEVNULL, stdout=self._out, stderr=self._err, env=environment)
        except OSError:
            self._out.close()
            self._err.close()
            raise

    def counts(self, load: FileLoad) -> CountedLines | None:
        """The child's counts of `load`'s file (waited for once), or None when they are not of exactly
        what the loader read."""
        if not self._done:
            self._done = True
            try:
                self._result = self._checked(load)
            except Exception:  # noqa: BLE001 - counting here is always possible
                log.exception("counting %s apart failed; counted here", self.path)
            finally:
                self.close()
        return self._result

    def _checked(self, load: FileLoad) -> CountedLines | None:
        if load.stamp is None:  # written in the last two seconds: maybe still being written
            return None
        if self._out.closed:
            log.info("counting %s apart was stopped; counted here", self.path)
            return None
        try:
            code = self._child.wait(timeout=WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            log.warning("counting %s apart took over %d s; counted here", self.path, WAIT_SECONDS)
            return None
        if code:
            self._err.seek(max(0, os.fstat(self._err.fileno()).st_size - 2000))  # its last words
            log.warning("counting %s apart failed (exit %s): %s", self.path, code,
                        self._err.read().decode(errors="replace").strip())
            return None
        self._out.seek(0)
        counted, stamps = decode(self._out.read())
        if stamps != (load.stamp, load.stamp) or _stamp(self.path) != load.stamp:
            log.info("%s changed while it was counted apart, or just before; counted here", self.path)
            return None
        if any(r.source.line >= counted.terms.size for r in load.records[-1:]):  # (records come in line order)
            return None
        return counted

    def close(self) -> None:
        """Stop the child if it still runs (its count is not wanted, or came too late); drop its files."""
        if self._child.poll() is None:
            self._child.kill()
            self._child.wait()
        self._out.close()
        self._err.close()


# -- the child ------------------------------------------------------------------------------------

def main() -> None:
    """The child: `python -c ... PATH MAX_LINE`; the count of PATH on stdout. It ends without freeing
    what it counted (the parent waits for its exit)."""
    gc.disable()  # many small acyclic objects, a short life
    path, max_line = sys.argv[1], int(sys.argv[2])
    sys.stdout.buffer.write(encode(*count_file(path, max_line)))
    sys.stdout.flush()
    os._exit(0)


def count_file(path: str, max_line: int) -> tuple[CountedLines, tuple[tuple[int, ...], tuple[int, ...]]]:
    """Every line counted (rows are line numbers; a line that is no record counts as an empty one), and
    the file's stamp before and after."""
    documents: list[tuple[str, str, str, str]] = []
    bags: list[dict[str, float]] = []
    with open(path, "rb") as f:
        before = stamp_of(os.fstat(f.fileno()))
        for number, line, _ in jsonl_lines(f, max_line):
            if number > len(documents):  # blank lines
                bags.extend([{}] * (number - len(documents)))
                documents.extend([_EMPTY] * (number - len(documents)))
            try:
                value = decode_line(line) if line is not None else None
            except (ValueError, RecursionError):  # (UnicodeDecodeError is a ValueError)
                value = None
            if isinstance(value, dict):
                documents.append(document_texts(value))
                try:
                    bags.append(component_bag(parse_architecture(value.get("architecture"))))
                except Exception:  # noqa: BLE001 - an invalid record: the loader does not keep it
                    bags.append({})
            else:
                documents.append(_EMPTY)
                bags.append({})
        after = stamp_of(os.fstat(f.fileno()))
    return count_lines(documents, bags), (before, after)


def _stamp(path: str) -> tuple[int, ...] | None:
    try:
        return stamp_of(os.stat(path))
    except OSError:
        return None


def encode(counted: CountedLines, stamps: tuple[tuple[int, ...], tuple[int, ...]]) -> bytes:
    parts = (counted.terms, counted.components)
    names = ["\0".join(c.names).encode() for c in parts]  # (terms and components are runs of letters
    # and digits)
    sizes = [value for c, n in zip(parts, names) for value in (len(n), len(c.names), c.rows.size)]
    return b"".join([_HEADER.pack(MAGIC, counted.terms.size, *sizes, *stamps[0], *stamps[1])]
                    + [piece for c, n in zip(parts, names)
                       for piece in (n, c.indptr.astype("<i8").tobytes(), c.rows.astype("<i4").tobytes(),
                                     c.counts.astype("<f4").tobytes())]
                    + [counted.arch_total.astype("<f8").tobytes()])


def decode(data: bytes) -> tuple[CountedLines, tuple[tuple[int, ...], tuple[int, ...]]]:
    """`encode`'s bytes back; ValueError when they are malformed."""
    if len(data) < _HEADER.size:
        raise ValueError("a count cut short")
    magic, size, *fields = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ValueError("not a count")
    at = _HEADER.size

    def take(dtype: str, length: int) -> np.ndarray:
        nonlocal at
        nbytes = length * np.dtype(dtype).itemsize
        if at + nbytes > len(data):
            raise ValueError("a count cut short")
        array = np.frombuffer(data, dtype=dtype, count=length, offset=at)
        at += nbytes
        return array

    parts = []
    for names_bytes, n_names, n_postings in (fields[0:3], fields[3:6]):
        names = take("u1", names_bytes).tobytes().decode().split("\0") if n_names else []
        indptr, rows, counts = take("<i8", n_names + 1), take("<i4", n_postings), take("<f4", n_postings)
        if len(names) != n_names or indptr[0] != 0 or indptr[-1] != n_postings or np.any(np.diff(indptr) < 0) \
                or (n_postings and (rows.min() < 0 or rows.max() >= size)):
            raise ValueError("an inconsistent count")
        parts.append(Counts(size, names, indptr.astype(np.int64, copy=False), rows.astype(np.int32, copy=False),
                            counts.astype(np.float32, copy=False)))
    arch_total = take("<f8", size).astype(np.float64, copy=False)
    if at != len(data):
        raise ValueError("a count with trailing bytes")
    stamps = fields[6:]
    return CountedLines(*parts, arch_total), (tuple(stamps[:5]), tuple(stamps[5:]))
