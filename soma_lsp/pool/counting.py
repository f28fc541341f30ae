"""Counting a big `.jsonl` file's records in a second process while this one validates the file.

A first load of one 100k-record JSONL file spends about as long counting what the index needs of the
records' text and architecture (the documents' terms — name, headline, notes, details — and the
components) as decoding and validating the records, all in one Python thread. With a core to spare,
`start` has a child process read the same file and count every line (`records.document_texts` and
`retrieval.component_bag` of the decoded line's architecture, unvalidated: it bags what
`records.parse_architecture` accepts as that would, and a line it refuses is no record, whose row the
index never takes) while the loader validates it; the index takes the
child's counts (`LiveIndex.update(counted=...)`) once the rest of the file's batch is prepared, and the
two halves of the work overlap. A first read is committed in parts (`pool.parts`): the child cuts its
count at the same lines and sends one block per part as soon as it is counted, so each part's commit
takes its block, waiting for it only if the child is behind — but the first part, which the loader
commits before the child has started (≈ 0.2 s of imports), is always counted by the loader, and the
child leaves its lines uncounted (`counted_here`): 10k lines of the child's work, on the load's
critical path when the child is behind.

Never wrong, only sometimes not faster: the child sends the file's stamp (`loader.stamp_of`: size,
mtime, ctime, inode, device) from before and after its read, and its count is used only when both
equal the stamp the loader took and the file still has — the rule that lets a snapshot serve a file
unread — and that stamp is not racy (`FileLoad.stamp`); a part's block is checked alike, with the
stamp the child had when it sent it. A file changed or replaced meanwhile, or
written in the last two seconds, a child that failed, hung or sent anything malformed: the documents
are counted here, as without it. The child (`pool.apart.Child`) reads nothing but that file and writes
nothing but its stdout and stderr, two unnamed temporary files, its count in a fixed binary layout (no
pickle).
"""

from __future__ import annotations

import gc
import logging
import os
import struct
import sys
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import msgspec
import numpy as np

from ..records import document_texts, fields_texts
from ..retrieval import CountedLines, Counts, component_bag, count_lines
from .apart import Child
from .loader import STAMP, FileLoad, decode_line, jsonl_lines, stamp_of
from .read_ahead import spare_cores
from . import parts

log = logging.getLogger(__name__)

APART_BYTES = 32 << 20  # smaller files count faster here than a child starts (~0.2 s of imports)
SKIP_BYTES = 64 << 20  # the child holds at most this much of the first part's lines uncounted
MAGIC = b"SOMACNT2"
_HEADER = struct.Struct("<8sQQQ" + "3Q" * 2 + f"{STAMP.size}s" * 2)  # magic, first line, end line, last block?;
# per `Counts`: bytes of names, names, postings; two stamps
_EMPTY = ("", "", "", "")


def start(files: Iterable[tuple[str, int]], max_line: int, *, in_parts: bool = True) -> dict[str, "Counting"]:
    """A child for each `.jsonl` (path, size) of at least `APART_BYTES`, as many as there are spare
    cores (none on one core); `in_parts`: whether the loader commits the file in parts (else the
    child counts it as one block)."""
    chosen = [path for path, size in files if size >= APART_BYTES and path.endswith(".jsonl")][:max(spare_cores(), 0)]
    countings = {}
    for path in chosen:
        try:
            countings[path] = Counting(path, max_line, in_parts)
        except OSError as error:
            log.warning("could not start counting %s apart: %r", path, error)
    return countings


class Block(NamedTuple):
    """One part of a file's count: rows are line numbers, `counted`'s rows `first` to its size."""

    counted: CountedLines
    stamps: tuple[bytes, bytes]  # the file's stamp when the child opened it, and when it sent this
    first: int
    last: bool  # the file's end


class Counting:
    """One child counting one file."""

    def __init__(self, path: str, max_line: int, in_parts: bool = True) -> None:
        self.path = path
        self._result: CountedLines | None = None
        self._for: FileLoad | None = None  # the load (a part, or the whole file) `_result` is for
        self._counted = 0  # the records of the loads counted so far
        self._failed = False
        self._at = 0  # where the next block starts in the child's output
        self._end = 0  # the line the blocks taken so far end at
        self._child = Child(__name__, [path, str(max_line), str(parts.FIRST_PART_LINES if in_parts else 0)],
                            f"counting {path}")

    def counts(self, load: FileLoad) -> CountedLines | None:
        """The child's counts of the lines of `load`'s records not counted before — a part of the
        file (`pool.parts`) or its end — waited for, or None when they are not of exactly what the
        loader read (then, and from then on, the records are counted here)."""
        if load is not self._for and not self._failed:
            self._for = load
            try:
                self._result = self._checked(load)
            except Exception:  # noqa: BLE001 - counting here is always possible
                log.exception("counting %s apart failed; counted here", self.path)
                self._result = None
            if self._result is None:
                self._failed = True
                self.close()
        return None if self._failed else self._result

    def counted_here(self, load: FileLoad) -> None:
        """`load`, the file's first part, is counted by the loader (the child skips its lines)."""
        self._for, self._result, self._counted = load, None, len(load.records)

    def _checked(self, load: FileLoad) -> CountedLines | None:
        if load.stamp is None:  # written in the last two seconds: maybe still being written
            return None
        if self._child.closed:
            log.info("counting %s apart was stopped; counted here", self.path)
            return None
        records = load.records  # (in line order)
        last = records[-1].source.line if records else -1
        while True:  # past the blocks of parts that brought no record (or were counted here)
            block = self._next_block()
            if block is None:
                return None
            if block.first != self._end:
                raise ValueError(f"a block of lines {block.first}.. after lines ..{self._end}")
            self._end = block.counted.terms.size
            if last < self._end or block.last:
                break
        if block.stamps != (load.stamp, load.stamp) or _stamp(self.path) != load.stamp:
            log.info("%s changed while it was counted apart, or just before; counted here", self.path)
            return None
        # every record not counted before must be this block's (not of a part whose block was passed)
        new = records[self._counted].source.line if len(records) > self._counted else last
        self._counted = len(records)
        return block.counted if block.first <= new and last < self._end else None

    def _next_block(self) -> Block | None:
        """The child's next block, waited for; None when the child failed or took too long (logged)."""
        header = self._child.read(self._at, _HEADER.size)
        if header is None:
            return None
        data = self._child.read(self._at, _HEADER.size + _body_size(_HEADER.unpack(header)))
        if data is None:
            return None
        self._at += len(data)
        return decode_block(data)

    def close(self) -> None:
        """Stop the child if it still runs (its count is not wanted, or came too late)."""
        self._child.close()


# -- the child ------------------------------------------------------------------------------------

def main() -> None:
    """The child: `python -c ... PATH MAX_LINE FIRST_PART_LINES`; the count of PATH on stdout, a block
    per part (one for the whole file when FIRST_PART_LINES is 0; the first part's lines left empty,
    the loader's to count), each written as soon as it is counted. It ends without freeing what it
    counted."""
    gc.disable()  # many small acyclic objects, a short life
    path, max_line, first_part = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    for block in count_parts(path, max_line, parts.part_ends(first_part) if first_part else iter(()),
                             skip_first=bool(first_part)):
        sys.stdout.buffer.write(encode(block.counted, block.stamps, block.first, block.last))
        sys.stdout.flush()
    os._exit(0)


def count_parts(path: str, max_line: int, ends: Iterator[int], skip_first: bool = False) -> Iterator[Block]:
    """The count of each part of the file, the parts ending at `ends` (as `pool.parts` cuts them;
    rows are the lines of the part, counted from its first), then of the rest of the file.
    `skip_first`: the first part's block has every line empty (the loader counts that part itself) —
    unless the file ends within it or its lines pass `SKIP_BYTES`, when they are counted after all."""
    documents: list[tuple[str, str, str, str]] = []
    bags: list[dict[str, float]] = []
    first, end = 0, next(ends, -1)
    deferred: list[tuple[int, bytes | None]] | None = [] if skip_first and end >= 0 else None
    held = 0
    with open(path, "rb") as f:
        before = stamp_of(os.fstat(f.fileno()))
        for number, line, _ in jsonl_lines(f, max_line):
            if number >= end >= 0:  # (as the loader cuts: on the first line past the part)
                if deferred is not None:  # the first part, the loader's to count
                    deferred = None
                    documents, bags = [_EMPTY] * (end - first), [{}] * (end - first)
                _pad(documents, bags, end - first)
                yield Block(count_lines(documents, bags), (before, stamp_of(os.fstat(f.fileno()))), first, False)
                documents, bags, first, end = [], [], end, next(ends, -1)
            if deferred is not None:
                deferred.append((number, line))
                held += len(line or b"")
                if held <= SKIP_BYTES:
                    continue
                for earlier, text in deferred:  # too much to hold: counted, the block then unused
                    _count(documents, bags, earlier - first, text)
                deferred = None
                continue
            _count(documents, bags, number - first, line)
        for earlier, text in deferred or ():  # the file ended within its first part: counted after all
            _count(documents, bags, earlier - first, text)
        after = stamp_of(os.fstat(f.fileno()))
    yield Block(count_lines(documents, bags), (before, after), first, True)


class _Document(msgspec.Struct):
    """What the child reads of a line: its document's fields and its architecture, as decoded (any
    JSON); the record's other fields are skipped unbuilt, where `orjson.loads` builds them all."""

    name: Any = None
    conclusion: Any = None
    notes: Any = None
    architecture: Any = None


_decode_document = msgspec.json.Decoder(_Document).decode


def line_document(line: bytes) -> tuple[tuple[str, str, str, str], Any] | None:
    """(`records.document_texts`, the architecture) of a line's record as decoded — the same as of
    `loader.decode_line(line)` for every line the loader makes a record of —, or None for a line
    that is no object. Through `_Document` where msgspec decodes the line (0.1 s less than orjson
    at 100k), else as the loader decodes it (`NaN` literals, lone surrogates, …)."""
    try:
        value = _decode_document(line)
    except (msgspec.DecodeError, ValueError, RecursionError):  # (a line that is no object: the same)
        try:
            mapping = decode_line(line)
        except (ValueError, RecursionError):  # (UnicodeDecodeError is a ValueError)
            return None
        return (document_texts(mapping), mapping.get("architecture")) if isinstance(mapping, dict) else None
    return fields_texts(value.name, value.conclusion, value.notes), value.architecture


def _count(documents: list, bags: list, row: int, line: bytes | None) -> None:
    """One line's document and component bag at `row` (an empty one for what is no valid record)."""
    _pad(documents, bags, row)
    document = line_document(line) if line is not None else None
    if document is not None:
        texts, architecture = document
        documents.append(texts)
        try:
            bags.append(component_bag(architecture))  # (not validated: 0.16 s less at 100k)
        except Exception:  # noqa: BLE001 - an invalid record: the loader does not keep it
            bags.append({})
    else:
        documents.append(_EMPTY)
        bags.append({})


def _pad(documents: list, bags: list, rows: int) -> None:
    """Empty rows up to `rows` (blank lines)."""
    if rows > len(documents):
        bags.extend([{}] * (rows - len(documents)))
        documents.extend([_EMPTY] * (rows - len(documents)))


def _shifted(rows: np.ndarray, first: int) -> np.ndarray:
    """A block's rows as line numbers: a view of the bytes read for the first block (a 100k-line file
    counted as one block: no 27 MB copy of its postings' rows), `first` added for the others."""
    return rows + np.int32(first) if first else rows


def _stamp(path: str) -> bytes | None:
    try:
        return stamp_of(os.stat(path))
    except OSError:
        return None


def encode(counted: CountedLines, stamps: tuple[bytes, bytes], first: int = 0,
           last: bool = True) -> bytes:
    """One block: `counted`'s rows are the lines from `first` on (`last`: to the file's end)."""
    parts = (counted.terms, counted.components)
    names = ["\0".join(c.names).encode() for c in parts]  # (terms and components are runs of letters
    # and digits)
    sizes = [value for c, n in zip(parts, names) for value in (len(n), len(c.names), c.rows.size)]
    return b"".join([_HEADER.pack(MAGIC, first, first + counted.terms.size, last, *sizes, *stamps)]
                    + [piece for c, n in zip(parts, names)
                       for piece in (n, c.indptr.astype("<i8").tobytes(), c.rows.astype("<i4").tobytes(),
                                     c.counts.astype("<f4").tobytes())]
                    + [counted.arch_total.astype("<f8").tobytes()])


def _body_size(header: tuple) -> int:
    """The bytes of a block after its header (`_HEADER.unpack`ed)."""
    magic, first, end, _, *sizes = header[:10]
    if magic != MAGIC or end < first:
        raise ValueError("not a count")
    return sum(names + (n_names + 1) * 8 + postings * 8 for names, n_names, postings in (sizes[0:3], sizes[3:6])) \
        + (end - first) * 8


def decode(data: bytes) -> tuple[CountedLines, tuple[bytes, bytes]]:
    """`encode`'s bytes of a whole file's count back; ValueError when they are malformed."""
    block = decode_block(data)
    if block.first or not block.last:
        raise ValueError("a part of a count")
    return block.counted, block.stamps


def decode_block(data: bytes) -> Block:
    """`encode`'s bytes of one block back, its rows the file's lines; ValueError when malformed."""
    if len(data) < _HEADER.size:
        raise ValueError("a count cut short")
    magic, first, end, last, *fields = _HEADER.unpack_from(data)
    if magic != MAGIC or end < first or last > 1:
        raise ValueError("not a count")
    size = end - first
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
        parts.append(Counts(end, names, indptr.astype(np.int64, copy=False),
                            _shifted(rows.astype(np.int32, copy=False), first), counts.astype(np.float32, copy=False)))
    arch_total = np.concatenate([np.zeros(first), take("<f8", size)])  # (rows before `first`: not this block's)
    if at != len(data):
        raise ValueError("a count with trailing bytes")
    return Block(CountedLines(*parts, arch_total), tuple(fields[6:]), first, bool(last))
