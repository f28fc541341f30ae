"""Counting a big `.jsonl` file's documents in a second process while this one validates the file.

A first load of one 100k-record JSONL file spends about as long counting the records' documents
(name, headline, notes and details, tokenized into term counts) as decoding and validating the
records, all in one Python thread. With a core to spare, `start` has a child process read the same
file and count every line's document (`records.document_texts` of the decoded line) while the loader
validates it; the index takes the child's count (`LiveIndex.update(counted=...)`) once the rest of the
file's batch is prepared, and the two halves of the work overlap.

Never wrong, only sometimes not faster: the child sends the file's stamp (`loader.stamp_of`: size,
mtime, ctime, inode, device) from before and after its read, and its count is used only when both
equal the stamp the loader took and the file still has — the rule that lets a snapshot serve a file
unread — and that stamp is not racy (`FileLoad.stamp`). A file changed or replaced meanwhile, or
written in the last two seconds, a child that failed, hung or sent anything malformed: the documents
are counted here, as without it. The child reads nothing but that file and writes nothing but its
stdout pipe, in a fixed binary layout (no pickle).
"""

from __future__ import annotations

import gc
import logging
import os
import struct
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ..records import document_texts
from ..retrieval.documents import CountedDocuments, DocumentCounter
from .loader import FileLoad, decode_line, jsonl_lines, stamp_of

log = logging.getLogger(__name__)

APART_BYTES = 32 << 20  # smaller files count faster here than a child starts (~0.2 s of imports)
WAIT_SECONDS = 120  # a child this late is stopped and its file counted here
MAGIC = b"SOMACNT1"
_HEADER = struct.Struct("<8s4Q" + "QqqQQ" * 2)  # magic; lines, bytes of terms, terms, postings; two stamps
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
        self._result: CountedDocuments | None = None
        self._done = False
        environment = dict(os.environ)
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_PARENT, environment.get("PYTHONPATH")]))
        self._child = subprocess.Popen(
            [sys.executable, "-c", "from soma_lsp.pool.counting import main; main()", path, str(max_line)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment)

    def documents(self, load: FileLoad) -> CountedDocuments | None:
        """The child's count of `load`'s file (waited for once), or None when it is not exactly what
        the loader read."""
        if not self._done:
            self._done = True
            try:
                self._result = self._checked(load)
            except Exception:  # noqa: BLE001 - counting here is always possible
                log.exception("counting %s apart failed; counted here", self.path)
            finally:
                self.close()
        return self._result

    def _checked(self, load: FileLoad) -> CountedDocuments | None:
        if load.stamp is None:  # written in the last two seconds: maybe still being written
            return None
        try:
            out, err = self._child.communicate(timeout=WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            log.warning("counting %s apart took over %d s; counted here", self.path, WAIT_SECONDS)
            return None
        if self._child.returncode:
            log.warning("counting %s apart failed (exit %s): %s", self.path, self._child.returncode,
                        (err or b"").decode(errors="replace").strip()[-2000:])
            return None
        counted, stamps = decode(out)
        if stamps != (load.stamp, load.stamp) or _stamp(self.path) != load.stamp:
            log.info("%s changed while it was counted apart, or just before; counted here", self.path)
            return None
        if any(r.source.line >= counted.size for r in load.records[-1:]):  # (records come in line order)
            return None
        return counted

    def close(self) -> None:
        """Stop the child if it still runs (its count is not wanted, or came too late)."""
        if self._child.poll() is None:
            self._child.kill()
            self._child.communicate()


# -- the child ------------------------------------------------------------------------------------

def main() -> None:
    """The child: `python -c ... PATH MAX_LINE`; the count of PATH on stdout."""
    gc.disable()  # many small acyclic objects, a short life
    path, max_line = sys.argv[1], int(sys.argv[2])
    sys.stdout.buffer.write(encode(*count_file(path, max_line)))
    sys.stdout.flush()


def count_file(path: str, max_line: int) -> tuple[CountedDocuments, tuple[tuple[int, ...], tuple[int, ...]]]:
    """Every line's document counted (rows are line numbers; a line that is no record counts as an
    empty document), and the file's stamp before and after."""
    documents: list[tuple[str, str, str, str]] = []
    with open(path, "rb") as f:
        before = stamp_of(os.fstat(f.fileno()))
        for number, line, _ in jsonl_lines(f, max_line):
            if number > len(documents):  # blank lines
                documents.extend([_EMPTY] * (number - len(documents)))
            try:
                value = decode_line(line) if line is not None else None
            except (ValueError, RecursionError):  # (UnicodeDecodeError is a ValueError)
                value = None
            documents.append(document_texts(value) if isinstance(value, dict) else _EMPTY)
        after = stamp_of(os.fstat(f.fileno()))
    vocabulary: dict[str, int] = {}
    indptr, rows, counts = DocumentCounter(vocabulary).count(documents)
    return CountedDocuments(len(documents), list(vocabulary), indptr, rows, counts), (before, after)


def _stamp(path: str) -> tuple[int, ...] | None:
    try:
        return stamp_of(os.stat(path))
    except OSError:
        return None


def encode(counted: CountedDocuments, stamps: tuple[tuple[int, ...], tuple[int, ...]]) -> bytes:
    terms = "\0".join(counted.terms).encode()  # (terms are runs of letters and digits)
    return b"".join([_HEADER.pack(MAGIC, counted.size, len(terms), len(counted.terms), counted.rows.size,
                                  *stamps[0], *stamps[1]), terms,
                     counted.indptr.astype("<i8").tobytes(), counted.rows.astype("<i4").tobytes(),
                     counted.counts.astype("<f4").tobytes()])


def decode(data: bytes) -> tuple[CountedDocuments, tuple[tuple[int, ...], tuple[int, ...]]]:
    """`encode`'s bytes back; ValueError when they are malformed."""
    if len(data) < _HEADER.size:
        raise ValueError("a count cut short")
    magic, size, terms_bytes, n_terms, n_postings, *stamps = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ValueError("not a count")
    at = _HEADER.size
    parts = {}
    for name, dtype, length in (("terms", "u1", terms_bytes), ("indptr", "<i8", n_terms + 1),
                                ("rows", "<i4", n_postings), ("counts", "<f4", n_postings)):
        nbytes = length * np.dtype(dtype).itemsize
        if at + nbytes > len(data):
            raise ValueError("a count cut short")
        parts[name] = np.frombuffer(data, dtype=dtype, count=length, offset=at)
        at += nbytes
    if at != len(data):
        raise ValueError("a count with trailing bytes")
    terms = parts["terms"].tobytes().decode().split("\0") if n_terms else []
    indptr, rows = parts["indptr"], parts["rows"]
    if len(terms) != n_terms or indptr[0] != 0 or indptr[-1] != n_postings or np.any(np.diff(indptr) < 0) \
            or (n_postings and (rows.min() < 0 or rows.max() >= size)):
        raise ValueError("an inconsistent count")
    counted = CountedDocuments(size, terms, indptr.astype(np.int64, copy=False), rows.astype(np.int32, copy=False),
                               parts["counts"].astype(np.float32, copy=False))
    return counted, (tuple(stamps[:5]), tuple(stamps[5:]))
