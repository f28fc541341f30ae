"""A loaded pool and its index on disk, so that a restart on an unchanged pool reads no record file.

One file per set of roots, in the user's cache directory (never in a pool): after a short prefix (size,
the header's size, a CRC-32 of the body and one of the header), the records as bytes, which are decoded only when something shows them
(`stored.RecordStore`), then raw arrays (postings, columns), then a `marshal` header that locates
them — the pool's files with their stamps and problems, the duplicate-id claims, the index's ids,
vocabularies, ties and the ids of the records naming a commit (last, so that the file is written
front to back while the records are encoded: `write`). The file is read
whole into memory and checked (size, CRC-32s) before anything in it is used — not mapped: a mapping
faults the reader with SIGBUS when the file is truncated under it, and bytes read cannot change after
the check (issue 23; reading costs ≈ 30-60 ms for 150 MB, docs/benchmarks.md). The header has its own
checksum so that it is checked and decoded while another thread reads and checks the body (reading
and `zlib.crc32` release the interpreter): at 1M records the body's read and check (≈ 2 s) and the
header's decode (≈ 1.5 s) were a restart's three biggest steps one after another (issue 22 point 5).

Never stale: `LivePool.load` takes a file from the snapshot only when the listing's stamp (size,
mtime_ns, ctime_ns, inode, device: `loader.stamp_of`) equals the stamp the file had when it was read,
and that stamp was not racy (`FileLoad.stamp`); every other file — changed, new, gone, racy — is read
again and applied as an ordinary update. The snapshot's name keys the roots, the load limits, the
format and the code that made it (`_code_key`), so nothing else ever sees it.

Trusted only as far as it is ours: written 0600 into a 0700 directory to a new file renamed into place
(never truncated or rewritten in place; a directory in its place is removed first); one
owned by someone else, writable by others, truncated, or of another format is ignored (`marshal` is
not meant for untrusted bytes), and any failure to read it falls back to reading the pool.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import marshal
import os
import shutil
import stat
import sys
import tempfile
import zlib
from array import array
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO

import msgspec
import numpy as np
import orjson

from .. import __version__, foreground
from ..records import Record
from ..retrieval import IndexState
from ..stored import RecordList, RecordStore, encode, items_of
from .cache import CacheLimits, tidy
from .claims import Claims
from .lines import LineDigests
from .loader import YAML_LOADER, FileLoad
from .problems import NO_PROBLEMS, Problem

log = logging.getLogger(__name__)

FORMAT = 8  # 8: the header's own CRC; 7: claims packed (`pool.claims`), stamps as bytes, no file sizes
MAGIC = b"SOMASNAP"
ALIGN = 64
PREFIX = len(MAGIC) + 32  # the magic, the file's size, the header's size, the body's CRC-32, the header's


def cache_directory(environ: Mapping[str, str]) -> Path:
    """`$SOMA_CACHE_DIR`, else `$XDG_CACHE_HOME/soma-lsp`, else `~/.cache/soma-lsp`."""
    if environ.get("SOMA_CACHE_DIR"):
        return Path(environ["SOMA_CACHE_DIR"])
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "soma-lsp"


def snapshot_path(directory: str | os.PathLike, roots: Iterable[str], limits: Mapping[str, int]) -> Path:
    key = repr((FORMAT, _code_key(), sorted(roots), sorted(limits.items()))).encode()
    return Path(directory) / f"pool-{hashlib.blake2b(key, digest_size=16).hexdigest()}.snapshot"


@lru_cache(maxsize=1)
def _code_key() -> str:
    """What decides a snapshot's content besides the pool's files: this package's code (validation,
    tokenizing, the index; the version number does not move with every change), the interpreter's
    `marshal`, and the decoders. A change of any of them is a different snapshot."""
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.blake2b(repr((__version__, sys.version_info[:2], marshal.version, orjson.__version__,
                                   msgspec.__version__, YAML_LOADER.__name__)).encode(), digest_size=16)
    for source in sorted(package.rglob("*.py")):
        digest.update(source.relative_to(package).as_posix().encode())
        digest.update(source.read_bytes())
    return digest.hexdigest()


@dataclass(slots=True)
class PoolState:
    """A pool's state as `LivePool` keeps it (records as `Record`s or positions in `store`)."""

    files: list[FileLoad]  # in path order
    claims: Claims
    visible: dict[str, Record | int]  # filled by `read`; `write` derives it from the claims
    dups: dict[str, list[Problem]]
    index: IndexState
    store: RecordStore | None


# -- writing -------------------------------------------------------------------------------------

def write(path: Path, state: PoolState, limits: CacheLimits = CacheLimits()) -> None:
    """Write the snapshot next to its final name, then move it there (a reader sees old or new);
    then tidy the cache directory (`pool.cache`: snapshots of pools no longer used must not pile up).

    Streamed in the file's order — the records as each is encoded, then the arrays, then the header
    that locates them — so the records' bytes are never all in memory at once (at 1M records
    holding them, then joining them, was 2 GB on top of the loaded pool: the server's peak)."""
    files: list[tuple] = []
    start_of: dict[str, int] = {}
    offsets = array("q", [0])
    with _Output(path) as out:
        out.pieces(_encoded(state, files, start_of, offsets))
        records = (PREFIX, out.at - PREFIX)
        visible = {}
        for record_id in state.claims:
            where, ordinal = state.claims.first(record_id)
            visible[record_id] = start_of[where] + ordinal
        index = state.index
        slot_positions = np.full(len(index.records), -1, dtype=np.int64)
        for record_id, slot in index.slot_of.items():
            slot_positions[slot] = visible[record_id]
        arrays: dict[str, np.ndarray] = {"offsets": np.frombuffer(offsets, dtype=np.int64),
                                         "slot_positions": slot_positions,
                                         **{f"column.{name}": values for name, values in index.columns.items()}}
        postings = {}
        for kind, (vocabulary, doc_freq, segments) in (("terms", index.terms), ("components", index.components)):
            arrays[f"{kind}.doc_freq"] = doc_freq
            for i, segment in enumerate(segments):
                for part, values in zip(("indptr", "slots", "counts"), segment):
                    arrays[f"{kind}.{i}.{part}"] = values
            postings[kind] = (vocabulary, len(segments))
        layout = {}
        for name, values in arrays.items():
            out.pad_to(_aligned(out.at))
            layout[name] = (values.dtype.str, values.shape, out.at)
            out.pieces([np.ascontiguousarray(values).data.cast("B")])
        header = marshal.dumps({
            "format": FORMAT, "files": files, "claims": state.claims.held, "visible": visible,
            "dups": {i: [_problem(p) for p in ps] for i, ps in state.dups.items()}, "postings": postings,
            "slot_of": index.slot_of, "ties": index.ties, "total_dl": index.total_dl,
            "dead_slots": index.dead_slots, "commits": sorted(index.commits), "arrays": layout,
            "records": records})
        out.header(header)
    tidy(path.parent, limits, keep=(path,))


def _encoded(state: PoolState, files: list[tuple], start_of: dict[str, int], offsets: array) -> Iterator[bytes]:
    """Every file's records as bytes (those still stored, as stored), in order; meanwhile each
    file's row of the header goes to `files`, its first position to `start_of`, and each record's
    end to `offsets`."""
    for load in state.files:
        start_of[load.path] = first = len(offsets) - 1
        stamp = load.stamp
        for item in items_of(load.records):
            if len(offsets) % foreground.STEP == 0:
                foreground.pause()  # (a server saves right after its load, when lenses are being computed)
            if type(item) is int:
                chunk = state.store.encoded(item)
            else:
                try:
                    chunk = encode(item)
                except ValueError:  # an `extra` value marshal cannot hold: keep the rest, read the file again
                    chunk = encode(_without_extra(item))
                    stamp = None
            offsets.append(offsets[-1] + len(chunk))
            yield chunk
        files.append((load.path, len(offsets) - 1 - first, stamp, load.exists,
                      [_problem(p) for p in load.problems],
                      None if load.line_records is None else load.line_records.packed()))


class _Output:
    """A snapshot file written front to back into a new file in `path`'s directory, the body's CRC-32
    taken as the bytes go out (the written file is not read or mapped back: its pages would count in
    this process's memory); on a clean exit the prefix (magic, size, the header's size, both CRCs)
    goes in front, the file is synced and renamed over `path` — on an error it is removed."""

    def __init__(self, path: Path) -> None:
        self.path, self.at, self.check = path, PREFIX, 0
        self.header_size = self.header_check = 0

    def __enter__(self) -> _Output:
        path = self.path
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if path.is_dir() and not path.is_symlink():  # a directory by our name would refuse every rename
            log.warning("removing the directory %s that stands where the snapshot goes", path)
            shutil.rmtree(path)
        fd, self.temporary = tempfile.mkstemp(dir=path.parent, prefix=".snapshot-")  # created 0600
        self.file = open(fd, "wb")
        self.file.write(bytes(PREFIX))
        return self

    def pieces(self, pieces: Iterable[bytes | memoryview], batch: int = 1 << 20) -> None:
        """Write these bytes in order, small pieces joined into about `batch` bytes (a write and a
        CRC call per record would cost more than the copy)."""
        held: list = []
        size = 0
        for piece in pieces:
            held.append(piece)
            size += len(piece)
            if size >= batch:
                self._write(b"".join(held) if len(held) > 1 else held[0])
                held, size = [], 0
        if held:
            self._write(b"".join(held) if len(held) > 1 else held[0])

    def pad_to(self, at: int) -> None:
        self._write(bytes(at - self.at))

    def header(self, header: bytes) -> None:
        """The header, last, with its own CRC (not the body's: `_decode` checks them apart)."""
        self.file.write(header)
        self.at += len(header)
        self.header_size, self.header_check = len(header), zlib.crc32(header)

    def _write(self, data: bytes | memoryview) -> None:
        self.file.write(data)
        self.check = zlib.crc32(data, self.check)
        self.at += len(data)

    def __exit__(self, kind, error, traceback) -> None:
        try:
            if kind is None:
                f = self.file
                f.seek(0)
                f.write(MAGIC + b"".join(n.to_bytes(8, "little")
                                         for n in (self.at, self.header_size, self.check, self.header_check)))
                f.flush()
                os.fsync(f.fileno())  # the rename below must not land before the bytes (a crash would leave zeros)
            self.file.close()
            if kind is None:
                os.replace(self.temporary, self.path)
        finally:
            if kind is not None or os.path.exists(self.temporary):
                with contextlib.suppress(OSError):
                    os.unlink(self.temporary)


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _problem(p: Problem) -> tuple:
    return p.path, p.line, p.field, p.message, p.severity, p.kind, p.column


def _without_extra(record: Record) -> Record:
    return replace(record, extra={})


# -- reading -------------------------------------------------------------------------------------

def read(path: Path) -> PoolState | None:
    """The snapshot at `path`, or None when there is none we can trust (the reason is logged)."""
    try:
        with open(path, "rb") as f:
            status = os.fstat(f.fileno())
            if status.st_uid != getattr(os, "getuid", lambda: status.st_uid)() or \
                    status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):  # (no owners to compare on Windows)
                log.warning("ignoring snapshot %s: not owned by this user or writable by others", path)
                return None
            if not stat.S_ISREG(status.st_mode):
                log.warning("ignoring snapshot %s: not a regular file", path)
                return None
            state = _decode(f, status.st_size)
    except FileNotFoundError:
        return None
    except OSError as error:
        log.warning("ignoring snapshot %s: %s", path, error)
        return None
    except Exception as error:  # noqa: BLE001 - a bad snapshot means reading the pool, nothing worse
        log.warning("ignoring snapshot %s: %r", path, error)
        return None
    try:
        os.utime(path)  # used: not to be pruned
    except OSError:
        pass
    return state


def _checked_body(f: BinaryIO, size: int, check: int) -> bytes:
    """The file's first `size` bytes (prefix and body), once their CRC-32 after the prefix is `check`."""
    f.seek(0)
    data = f.read(size)
    if len(data) != size or zlib.crc32(memoryview(data)[PREFIX:]) != check:  # (≈ 25 ms for 150 MB)
        raise ValueError("damaged (checksum)")
    return data


def _decode(f: BinaryIO, file_size: int) -> PoolState:
    """The state in an open snapshot: its header checked and decoded here while a thread reads and
    checks the body (module docstring); nothing of the body is used before its check has passed."""
    prefix = f.read(PREFIX)
    size, header_size, check, header_check = (int.from_bytes(prefix[i:i + 8], "little")
                                              for i in range(len(MAGIC), PREFIX, 8))
    if prefix[:len(MAGIC)] != MAGIC or size != file_size or not 0 < header_size <= size - PREFIX:
        raise ValueError("not a snapshot, or truncated")
    f.seek(size - header_size)
    header_bytes = f.read(header_size)
    if zlib.crc32(header_bytes) != header_check:
        raise ValueError("damaged (header checksum)")
    with ThreadPoolExecutor(1, thread_name_prefix="snapshot-read") as reader:
        body = reader.submit(_checked_body, f, size - header_size, check)
        header = marshal.loads(header_bytes)
        del header_bytes
        data = body.result()
    if header.get("format") != FORMAT:
        raise ValueError("another format")
    arrays = {name: np.frombuffer(data, dtype=np.dtype(dtype), count=int(np.prod(shape)), offset=at)
              .reshape(shape) for name, (dtype, shape, at) in header["arrays"].items()}
    at, blob_size = header["records"]
    slots, offsets = arrays["slot_positions"].size, arrays["offsets"]
    starts = np.cumsum([0, *(row[1] for row in header["files"])]).tolist()  # each file's first position
    if offsets.size != starts[-1] + 1 or offsets[-1] != blob_size or any(
            values.shape != (slots,) for name, values in arrays.items() if name.startswith("column.")):
        raise ValueError("inconsistent")  # (a writer's bug: the checksum covers what the disk could do)
    store = RecordStore(memoryview(data)[at:at + blob_size], offsets,
                        [(first, row[0]) for first, row in zip(starts, header["files"])])
    files = [FileLoad(path, RecordList(range(first, first + count), store),
                      [Problem(*p) for p in problems] if problems else NO_PROBLEMS,
                      exists, stamp, None if line_records is None else LineDigests(*line_records))
             for first, (path, count, stamp, exists, problems, line_records) in zip(starts, header["files"])]
    postings = {kind: (vocabulary, arrays[f"{kind}.doc_freq"],
                       [tuple(arrays[f"{kind}.{i}.{part}"] for part in ("indptr", "slots", "counts"))
                        for i in range(segments)])
                for kind, (vocabulary, segments) in header["postings"].items()}
    index = IndexState(
        records=[None if p < 0 else p for p in arrays["slot_positions"].tolist()], slot_of=header["slot_of"],
        columns={name[len("column."):]: values for name, values in arrays.items() if name.startswith("column.")},
        terms=postings["terms"], components=postings["components"], ties=header["ties"],
        total_dl=header["total_dl"], dead_slots=header["dead_slots"], commits=frozenset(header["commits"]))
    return PoolState(files, Claims(header["claims"]), header["visible"],
                     {i: [Problem(*p) for p in ps] for i, ps in header["dups"].items()}, index, store)
