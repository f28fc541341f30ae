"""Reading one pool file into records and problems (docs/spec.md §1.1, §1.4).

`load_file(path)` never raises: whatever is wrong with the file or with one of its records becomes a
`Problem`, and every valid record around it still loads. Decoding is as fast as the formats allow:
a `.jsonl` line or `.json` record of the well-formed shape straight to its record
(`records.decode_record`), else orjson for JSON (the stdlib `json` only as a fallback for what orjson
refuses: `NaN`/`Infinity` literals, huge integers), PyYAML's libyaml `CSafeLoader` when available
(safe loaders only). Each record carries its `Source(path, line)` with a 0-based line: the line
number in `.jsonl`, the line where each element of a `.json` array (or the object) starts, the node's
start line in YAML.

Limits (documented in docs/architecture.md): a `.json` file is read whole and refused above
`MAX_JSON_BYTES` (64 MiB), a YAML file above `MAX_YAML_BYTES` (16 MiB, YAML decodes ~20x slower);
`.jsonl` is streamed line by line (one line at most `MAX_JSON_BYTES`). JSON and YAML nested deeper
than ~1000 levels is refused; a YAML document whose aliases expand past `YAML_EXPANSION_LIMIT` nodes
(a "billion laughs" alias bomb) or refer to themselves is refused. Only regular files are read (opened
non-blocking, checked with fstat: a FIFO never blocks the loader), and at most `MAX_PER_FILE` problems
are kept per file (docs/reliability.md).
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import json
import os
import re
import stat
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Protocol

import orjson
import yaml

from ..records import Record, RecordError, Source, decode_record, kind_of, parse_record, record_errors
from ..stored import RecordList
from .lines import Changed, LineDigests, digest
from .problems import FileProblems, Problem

MiB = 1 << 20
MAX_JSON_BYTES = 64 * MiB
MAX_YAML_BYTES = 16 * MiB
YAML_EXPANSION_LIMIT = 1_000_000  # nodes a document may expand to through aliases (or 10x its own size)
PROGRESS_BYTES = 4 * MiB
BOM = b"\xef\xbb\xbf"
RACY_NS = 2_000_000_000  # a file whose mtime or ctime is this recent keeps no stamp (see FileLoad.stamp)
DIGESTS_LATER_BYTES = MiB  # a first read of a `.jsonl` file this big leaves its lines' digests for later (pool.lines)
#: a stamp's layout (`stamp_of`): size, mtime_ns, ctime_ns, inode, device
STAMP = struct.Struct("<QqqQQ")
#: an inode or device number kept to its low 64 bits: Windows' ReFS gives 128-bit file ids and macOS a
#: signed `dev_t`, which the unsigned fields would refuse (a stamp only tells one file's states apart)
ID_BITS = (1 << 64) - 1

SUFFIXES = {".json": "json", ".jsonl": "jsonl", ".yaml": "yaml", ".yml": "yaml"}

YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_WS = re.compile(r"[ \t\n\r]*")
_JSON_DECODER = json.JSONDecoder()


@dataclass(slots=True)
class FileLoad:
    """What one file holds: its valid records in line order, and its problems."""

    path: str
    records: list[Record] | RecordList = field(default_factory=list)  # RecordList: restored from a snapshot
    problems: list[Problem] = field(default_factory=list)
    exists: bool = True
    #: `stamp_of` the file as it was opened — what a snapshot's restart compares with the listing — or
    #: None when it was modified (or its inode changed) less than RACY_NS before: a write within the
    #: clock's granularity could then leave the stamp as it is, so such a file is always read again
    stamp: bytes | None = None
    #: `.jsonl` only: a 16-byte digest of each valid line's bytes → (the position of its record in
    #: `records`, its line), so that re-reading a file that grew or changed in a few lines reuses the
    #: records of the lines that did not change (the same objects — or, restored from a snapshot, the
    #: same unbuilt positions — so the index is not touched for them).
    line_records: LineDigests | None = field(default=None, repr=False, compare=False)


class Parts(Protocol):
    """Where a first read of a `.jsonl` file hands its prefixes (`pool.parts.Parts`)."""

    end: int  # the line the current part ends at

    def cut(self, load: FileLoad) -> int:
        """Take the prefix read so far (every line before `end`); the next part's end."""


def stamp_of(status: os.stat_result) -> bytes:
    """(size, mtime_ns, ctime_ns, inode, device), packed (`STAMP`): what tells a changed file from an
    unchanged one without reading it. ctime catches what mtime alone does not: content written back
    with its old mtime (`cp -p`, `rsync -t`, `touch -r`) and a change of permissions. Packed because a
    pool holds one per file: 73 bytes, where a tuple of the five ints is 236 (issue 22 point 2)."""
    return STAMP.pack(status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino & ID_BITS,
                      status.st_dev & ID_BITS)


def file_format(path: str) -> str | None:
    """`json`, `jsonl` or `yaml` for a pool file name, None for anything else."""
    return SUFFIXES.get(os.path.splitext(path)[1].lower())


def load_file(path: str | os.PathLike, *, max_json_bytes: int = MAX_JSON_BYTES,
              max_yaml_bytes: int = MAX_YAML_BYTES, progress: Callable[[int], None] | None = None,
              previous: FileLoad | None = None, batch: Parts | None = None,
              read: tuple[int, bytes | None, bytes] | None = None) -> FileLoad:
    """Read one pool file; never raises (a problem of kind `vanished` if it does not exist).
    `progress(bytes_read)` is called now and then while a `.jsonl` file streams in. `previous` (the last
    load of the same `.jsonl` file) lets unchanged lines keep their records without re-validation.
    `batch`: a `.jsonl` file's prefixes are handed to it as they are read (`pool.parts`).
    `read`: what `read_ahead.ReadAhead` read of a `.json` or YAML file — its size, stamp and bytes —
    decoded here instead of reading the file again.
    At most `MAX_PER_FILE` problems are kept, then one of kind `more` counting the rest."""
    path = os.fspath(path)
    out = FileLoad(path, problems=FileProblems())
    if read is None:
        _read(path, out, max_json_bytes, max_yaml_bytes, progress, previous, batch)
    else:
        _, out.stamp, data = read
        _decode(path, data, out)
    out.problems = out.problems.done(path)
    return out


def _read(path: str, out: FileLoad, max_json_bytes: int, max_yaml_bytes: int,
          progress: Callable[[int], None] | None, previous: FileLoad | None, batch: Parts | None) -> None:
    fmt = file_format(path) or "json"
    try:
        f, status = open_regular(path)
        with f:
            size = status.st_size
            if time.time_ns() - max(status.st_mtime_ns, status.st_ctime_ns) >= RACY_NS:
                out.stamp = stamp_of(status)
            if fmt == "jsonl":
                _load_jsonl(f, out, max_json_bytes, progress, previous, batch, size >= DIGESTS_LATER_BYTES)
                return
            limit = max_yaml_bytes if fmt == "yaml" else max_json_bytes
            if size > limit:
                out.problems.append(_too_large(path, size, limit, fmt))
                return
            data = read_bounded(f, size, limit)
            if len(data) > limit:
                out.problems.append(_too_large(path, len(data), limit, fmt))
                return
    except NotRegularFile as error:
        out.problems.append(not_regular(path, error.mode))
        return
    except OSError as error:
        out.exists = not isinstance(error, FileNotFoundError)
        out.problems.append(_os_problem(path, error))
        return
    except Exception as error:  # noqa: BLE001 - a loader must not take the server down
        out.problems.append(Problem(path, 0, "", f"could not read the file: {error!r}", "error", "unreadable"))
        return
    _decode(path, data, out)


def _decode(path: str, data: bytes, out: FileLoad) -> None:
    """The records of a whole `.json` or YAML file's bytes."""
    try:
        if file_format(path) == "yaml":
            _load_yaml(data, out)
        else:
            _load_json(data, out)
    except Exception as error:  # noqa: BLE001
        out.problems.append(Problem(path, 0, "", f"could not load the file: {error!r}", "error", "unreadable"))
    out.records = out.records[:]  # held as long as it is: one record appended leaves room for 4 (88 B, not 64)


# -- reading any file that may be hostile ----------------------------------------------------------

class NotRegularFile(Exception):
    """What `open_regular` refuses: a FIFO, a socket, a device or a directory (`mode` says which)."""

    def __init__(self, path: str, mode: int) -> None:
        super().__init__(f"{path} is {file_kind(mode)}, not a regular file")
        self.mode = mode


def open_regular(path: str) -> tuple[BinaryIO, os.stat_result]:
    """Open `path` for reading, only if it is a regular file, without ever blocking: O_NONBLOCK so
    that opening a FIFO (or a device) does not wait for a writer, then `fstat` on what was opened
    (not the name, which may have changed since a listing) so that nothing is read from what is not
    a regular file. Raises `NotRegularFile`, or the OSError of opening."""
    f = os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb")
    try:
        status = os.fstat(f.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise NotRegularFile(path, status.st_mode)
    except BaseException:
        f.close()
        raise
    return f, status


def read_bounded(f: BinaryIO, size: int, limit: int) -> bytes:
    """The file's bytes, but never more than `limit` + 1 (more than `limit` means too large): `size`
    is what fstat said, and the file may have grown since."""
    data = f.read(min(size, limit) + 1)  # (a read of `limit` bytes would allocate `limit` bytes)
    if size < len(data) <= limit:  # the file grew since fstat: read on, still bounded
        data += f.read(limit + 1 - len(data))
    return data


def file_kind(mode: int) -> str:
    return {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
            stat.S_IFBLK: "a block device", stat.S_IFDIR: "a directory"}.get(stat.S_IFMT(mode), "not a file")


# -- errors --------------------------------------------------------------------------------------

def _too_large(path: str, size: int, limit: int, fmt: str) -> Problem:
    hint = "split it into several files, or use .jsonl (streamed line by line)" if fmt == "json" \
        else "split it into several files"
    return Problem(path, 0, "", f"file is {size / MiB:.1f} MiB, over the {limit // MiB} MiB limit for one "
                                f".{fmt} file; not loaded ({hint})", "error", "too-large")


def _os_problem(path: str, error: OSError) -> Problem:
    if isinstance(error, FileNotFoundError):
        return Problem(path, 0, "", "file vanished before it could be read (deleted or renamed)", "warning",
                       "vanished")
    if error.errno == errno.ELOOP:
        return Problem(path, 0, "", "symlink loop; not loaded", "error", "symlink")
    if isinstance(error, PermissionError):
        return Problem(path, 0, "", "permission denied; not loaded", "error", "unreadable")
    if isinstance(error, IsADirectoryError):
        return Problem(path, 0, "", "is a directory, not a record file", "error", "unreadable")
    return Problem(path, 0, "", f"cannot read: {error.strerror or error}", "error", "unreadable")


def not_regular(path: str, mode: int) -> Problem:
    """A pool file that is a FIFO, a socket or a device: never opened for reading (it could block)."""
    return Problem(path, 0, "", f"is {file_kind(mode)}, not a regular file; not loaded", "error", "unreadable")


def _utf8_problem(path: str, data: bytes, error: UnicodeDecodeError, base_line: int = 0) -> Problem:
    line = base_line + data.count(b"\n", 0, error.start)
    column = error.start - (data.rfind(b"\n", 0, error.start) + 1)
    return Problem(path, line, "", f"invalid UTF-8 (byte 0x{data[error.start]:02x} at column {column + 1}); "
                                   "pool files must be UTF-8", "error", "utf-8")


def _json_problem(path: str, error: Exception, base_line: int = 0) -> Problem:
    if isinstance(error, RecursionError):
        return Problem(path, base_line, "", "JSON nested too deeply (limit ~1000 levels); not loaded", "error",
                       "too-deep")
    if isinstance(error, json.JSONDecodeError):
        return Problem(path, base_line + error.lineno - 1, "",
                       f"invalid JSON: {error.msg} (column {error.colno})", "error", "json")
    return Problem(path, base_line, "", f"invalid JSON: {error}", "error", "json")


# -- records -------------------------------------------------------------------------------------

def _add_record(out: FileLoad, value: Any, line: int, where: Any = None) -> None:
    """Keep the record, or report every problem it has, each at its field (`where`: the record's
    text as `(text, start, end, first line)` — str or bytes — or its YAML node; read only on failure)."""
    try:
        record = parse_record(value, source=Source(out.path, line))
    except RecordError:
        for error in record_errors(value):  # every problem at once, each where its field is
            at, column = field_position(where, error.field, line)
            out.problems.append(Problem(out.path, at, error.field, error.problem, "error", "validation", column))
        return
    except RecursionError:
        out.problems.append(Problem(out.path, line, "", "record nested too deeply", "error", "too-deep"))
        return
    except Exception as error:  # noqa: BLE001
        out.problems.append(Problem(out.path, line, "", f"invalid record: {error!r}", "error", "validation"))
        return
    _keep_record(out, record, line)


def field_position(where: Any, field: str, line: int) -> tuple[int, int | None]:
    """The 0-based (line, column) of `field`'s key in a record (`where`, see `_add_record`); the
    record's own `line` and no column when the format does not say."""
    key = re.split(r"[.\[]", field, maxsplit=1)[0]
    if not key or where is None:
        return line, None
    if isinstance(where, yaml.MappingNode):
        for key_node, _ in where.value:
            if getattr(key_node, "value", None) == key:
                return key_node.start_mark.line, key_node.start_mark.column
        return line, None
    text, start, end, first = where
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")  # (the error path only: a record already refused)
    at = _top_level_key(text, start, end, key)
    if at is None:
        return line, None
    return first + text.count("\n", start, at), at - (text.rfind("\n", 0, at) + 1)


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]]')
_COLON = re.compile(r"\s*:")


def _top_level_key(text: str, start: int, end: int, key: str) -> int | None:
    """Where `"key":` stands at the top level of the JSON object at `text[start:end]` (a nested
    object's key of the same name does not count), or None."""
    depth = 0
    quoted = json.dumps(key)
    for token in _JSON_TOKEN.finditer(text, start, end):
        value = token.group()
        if value in "{[":
            depth += 1
        elif value in "}]":
            depth -= 1
        elif depth == 1 and value == quoted and _COLON.match(text, token.end(), end):
            return token.start()
    return None


def _keep_record(out: FileLoad, record: Record, line: int) -> None:
    out.records.append(record)
    for warning in record.warnings:
        name, sep, message = warning.partition(": ")
        kind = "status" if name == "status" else "validation"
        out.problems.append(Problem(out.path, line, name if sep else "", message if sep else warning,
                                    "warning", kind))


def _not_a_record(out: FileLoad, value: Any, line: int, what: str) -> None:
    out.problems.append(Problem(out.path, line, "", f"expected {what}, got {kind_of(value)}", "error",
                                "not-records"))


# -- JSON ----------------------------------------------------------------------------------------

def _decode_json(data: bytes | str) -> Any:
    """orjson, falling back to the stdlib for what orjson refuses but spec §1.2 allows (NaN, Infinity)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        if "recursion limit" in str(error):
            raise RecursionError(str(error)) from None
        return json.loads(data)  # raises the stdlib's error (with line/column) if really invalid


def _load_json(data: bytes, out: FileLoad) -> None:
    if data.startswith(BOM):
        data = data[len(BOM):]
    stripped = data.lstrip(b" \t\r\n")
    if stripped.startswith(b"{"):  # the common case, one record: orjson checks UTF-8 itself
        line = data.count(b"\n", 0, len(data) - len(stripped))
        record = decode_record(data, source=Source(out.path, line))  # of the well-formed shape, in C
        if record is not None:
            _keep_record(out, record, line)
            return
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass  # below: the UTF-8 check, the stdlib fallback, the error report
        else:
            _add_record(out, value, line, (data, 0, len(data), 0))
            return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        out.problems.append(_utf8_problem(out.path, data, error))
        return
    start = _WS.match(text).end()
    if start == len(text):
        out.problems.append(Problem(out.path, 0, "", "empty file: expected a record or an array of records",
                                    "warning", "not-records"))
        return
    first_line = text.count("\n", 0, start)
    if text[start] == "[":
        _load_json_array(text, start, first_line, out)
        return
    try:
        value = _decode_json(data)
    except (ValueError, RecursionError) as error:
        out.problems.append(_json_problem(out.path, error))
        return
    if isinstance(value, dict):
        _add_record(out, value, first_line, (text, 0, len(text), 0))
    else:
        _not_a_record(out, value, first_line, "a record (an object) or an array of records")


def _load_json_array(text: str, start: int, line: int, out: FileLoad) -> None:
    """Decode element by element with the stdlib's C scanner, so each element's start line is known and
    the elements before a syntax error (a truncated file) still load."""
    scan = _JSON_DECODER.scan_once
    ws = _WS.match
    position = ws(text, start + 1).end()
    line += text.count("\n", start, position)
    if text.startswith("]", position):
        return _json_trailer(text, position + 1, out)
    while True:
        try:
            value, end = scan(text, position)
        except StopIteration as stop:
            at = stop.value
            error = json.JSONDecodeError("Expecting value", text, at)
            out.problems.append(_json_problem(out.path, error))
            return
        except (ValueError, RecursionError) as error:
            out.problems.append(_json_problem(out.path, error, 0 if isinstance(error, ValueError) else line))
            return
        if isinstance(value, dict):
            _add_record(out, value, line, (text, position, end, line))
        else:
            _not_a_record(out, value, line, "each element of the array to be a record (an object)")
        position = ws(text, end).end()
        if text.startswith(",", position):
            following = ws(text, position + 1).end()
            line += text.count("\n", end, following)
            position = following
            continue
        if text.startswith("]", position):
            return _json_trailer(text, position + 1, out)
        what = "end of file" if position >= len(text) else repr(text[position])
        error = json.JSONDecodeError(f"Expecting ',' or ']' after an array element, got {what}", text, position)
        out.problems.append(_json_problem(out.path, error))
        return


def _json_trailer(text: str, position: int, out: FileLoad) -> None:
    rest = _WS.match(text, position).end()
    if rest < len(text):
        out.problems.append(_json_problem(out.path, json.JSONDecodeError("Extra data", text, rest)))


def jsonl_lines(f, max_line: int) -> Iterator[tuple[int, bytes | None, int]]:
    """(0-based number, bytes without the line end, bytes read so far) of each non-blank line of a
    `.jsonl` file, streamed; None for a line longer than `max_line` bytes (read past, never held). A
    UTF-8 BOM on the first line is dropped. The loader and `pool.counting`'s child read lines alike."""
    readline = f.readline
    number = -1
    read = 0
    while True:
        raw = readline(max_line + 1)
        if not raw:
            return
        number += 1
        read += len(raw)
        if len(raw) > max_line and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):
                raw = readline(MiB)
                read += len(raw)
            yield number, None, read
            continue
        if number == 0 and raw.startswith(BOM):
            raw = raw[len(BOM):]
        line = raw.rstrip(b"\r\n")
        if line and not line.isspace():
            yield number, line, read


def decode_line(line: bytes) -> Any:
    """One `.jsonl` line's value (orjson first: most lines are plain JSON); raises what `_decode_json`
    and UTF-8 decoding raise."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return _decode_json(line.decode("utf-8"))


def lines_again(path: str, stamp: bytes, max_line: int) -> Iterator[tuple[int, bytes | None]]:
    """(number, bytes) of each non-blank line of the `.jsonl` file at `path` as `jsonl_lines` read it
    when its stamp was `stamp`; raises `lines.Changed` if it is not that file any more, checked when
    opened and once read to the end (a `LineDigests.later` table's lines)."""
    f, status = open_regular(path)
    with f:
        if stamp_of(status) != stamp:
            raise Changed
        for number, line, _ in jsonl_lines(f, max_line):
            yield number, line
        if stamp_of(os.fstat(f.fileno())) != stamp:
            raise Changed


def _load_jsonl(f, out: FileLoad, max_line: int, progress: Callable[[int], None] | None,
                previous: FileLoad | None, batch: Parts | None, big: bool = False) -> None:
    """One record per non-empty line, streamed; a bad line is reported and the next one still loads.
    The lines' digests of a `big` file's first read (with a stamp to find it unchanged by) are taken
    later (`LineDigests.later`)."""
    path = out.path
    reported = read = 0
    part_end = batch.end if batch is not None else -1
    known_lines = (previous.line_records if previous is not None else None) or LineDigests()
    known_lines.settle()  # (a table left for later is settled here, if it was not: empty if the file changed)
    reusing = len(known_lines) > 0
    stamp = out.stamp
    later = big and not reusing and stamp is not None
    line_records = out.line_records = LineDigests.later(functools.partial(lines_again, path, stamp, max_line)) \
        if later else LineDigests()
    if reusing:
        known_items = previous.records
        if isinstance(known_items, RecordList):  # restored: keep unbuilt records unbuilt
            out.records, known_items = RecordList((), known_items.store), known_items.items
        line_problems: dict[int, list[Problem]] = {}  # a valid record's line has only its warnings
        for problem in previous.problems:
            line_problems.setdefault(problem.line, []).append(problem)
    for number, line, read in jsonl_lines(f, max_line):
        if number >= part_end >= 0:  # every line before `part_end` is read: hand that prefix over
            part_end = batch.cut(out)
        if progress is not None and read - reported >= PROGRESS_BYTES:
            reported = read
            progress(read)
        if line is None:
            out.problems.append(Problem(path, number, "", f"line longer than {max_line // MiB} MiB; skipped",
                                        "error", "too-large"))
            continue
        key = None if later else digest(line)
        known = known_lines.get(key) if reusing else None
        if known is not None:  # an unchanged line: the same record, at its (possibly new) line
            position, known_line = known
            line_records.add(key, len(out.records), number)
            if known_line == number:
                out.records.append(known_items[position])
                out.problems.extend(line_problems.get(known_line, ()))
            else:
                record = previous.records[position]
                _keep_record(out, dataclasses.replace(record, source=Source(path, number)), number)
            continue
        records_before = len(out.records)
        record = decode_record(line, source=Source(path, number))  # a well-formed line, in C
        if record is not None:
            line_records.add(key, records_before, number)
            _keep_record(out, record, number)
            continue
        try:
            value = decode_line(line)
        except UnicodeDecodeError as error:
            out.problems.append(_utf8_problem(path, line, error, number))
            continue
        except (ValueError, RecursionError) as error:
            out.problems.append(_json_problem(path, error, number))
            continue
        if isinstance(value, dict):
            _add_record(out, value, number, (line, 0, len(line), number))
            if len(out.records) > records_before:
                line_records.add(key, records_before, number)
        else:
            _not_a_record(out, value, number, "one record (an object) per line")
    if progress is not None:
        progress(read)


# -- YAML ----------------------------------------------------------------------------------------

class _AliasBomb(Exception):
    pass


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a node graph that expands too far through aliases, or refers to itself (iterative, memoised
    by node: cost proportional to the distinct nodes)."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    distinct = 0
    while stack:
        node, done = stack.pop()
        key = id(node)
        if isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = node.value
        else:
            children = ()
        if done:
            open_nodes.discard(key)
            size = 1 + sum(sizes[id(child)] for child in children)
            sizes[key] = size
            if size > max(YAML_EXPANSION_LIMIT, 10 * distinct):
                raise _AliasBomb(f"aliases expand this document to more than {size:,} nodes (alias bomb?); "
                                 "not loaded")
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise _AliasBomb("an alias refers to a node that contains it (recursive structure); not loaded")
        distinct += 1
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children)


def _load_yaml(data: bytes, out: FileLoad) -> None:
    path = out.path
    if data.startswith(BOM):
        data = data[len(BOM):]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        out.problems.append(_utf8_problem(path, data, error))
        return
    may_alias = "&" in text  # no anchor, no alias: skip the expansion check
    loader = YAML_LOADER(text)
    try:
        while True:
            try:
                if not loader.check_node():
                    return
                node = loader.get_node()
                if node is None:
                    continue
                if may_alias:
                    _check_expansion(node)
                value = loader.construct_document(node)
            except yaml.MarkedYAMLError as error:
                mark = error.problem_mark or error.context_mark
                detail = error.problem or "syntax error"
                if error.context:
                    detail = f"{detail} ({error.context})"
                deep = "nesting depth" in detail  # libyaml's own limit (1000 levels)
                out.problems.append(Problem(path, mark.line if mark else 0, "",
                                            f"YAML nested too deeply: {detail}; not loaded" if deep
                                            else f"invalid YAML: {detail}", "error", "too-deep" if deep else "yaml"))
                return
            except _AliasBomb as error:
                out.problems.append(Problem(path, node.start_mark.line, "", str(error), "error", "alias-bomb"))
                return
            except RecursionError:
                out.problems.append(Problem(path, 0, "", "YAML nested too deeply; not loaded", "error",
                                            "too-deep"))
                return
            except yaml.YAMLError as error:
                out.problems.append(Problem(path, 0, "", f"invalid YAML: {error}", "error", "yaml"))
                return
            if isinstance(value, dict):
                _add_record(out, value, node.start_mark.line, node)
            elif isinstance(value, list):
                for item, item_node in zip(value, node.value):
                    line = item_node.start_mark.line
                    if isinstance(item, dict):
                        _add_record(out, item, line, item_node)
                    else:
                        _not_a_record(out, item, line, "each item of the list to be a record (a mapping)")
            elif value is not None:
                _not_a_record(out, value, node.start_mark.line, "a record (a mapping) or a list of records")
    finally:
        loader.dispose()
