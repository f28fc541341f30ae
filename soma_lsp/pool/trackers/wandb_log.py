"""Reading a W&B run's binary log (`run-<id>.wandb`) without wandb or protobuf installed.

An offline run keeps its notes, tags, config, summary and git commit only in this log. Its framing is
LevelDB's log format: a 7-byte header (`:W&B`, magic 0xBEE1 little-endian, version 0), then 32 KiB
blocks of chunks — CRC-32 (IEEE, of the type byte and the data; little-endian), uint16 length, type
(1 full, 2 first, 3 middle, 4 last) — a block's tail shorter than a chunk header is zero padding. Each
whole record is a protobuf `wandb.internal.Record`.

Why a hand-written decoder rather than `wandb.proto.wandb_internal_pb2`: that module comes only with
wandb itself (≈ 125 MB installed, and it writes under the user's cache), and the product needs a
dozen fields. Protobuf's wire format is stable and small (varints and length-delimited fields); the
field numbers below are those of wandb 0.31's `wandb_internal.proto`, which keeps numbers stable as
protobuf requires. A log this reader cannot follow (other magic or version, a bad CRC) raises
`LogError`, and the run is reported as skipped rather than guessed at.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
BLOCK = 32 * 1024
CHUNK = 7  # crc32, length, type
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4

# wandb_internal.proto (wandb 0.31): Record and the messages read here
R_HISTORY, R_SUMMARY, R_CONFIG, R_RUN, R_EXIT, R_ENVIRONMENT = 2, 3, 5, 17, 18, 26
RUN_ID, RUN_ENTITY, RUN_PROJECT, RUN_CONFIG, RUN_NAME, RUN_NOTES, RUN_TAGS, RUN_START, RUN_GIT = \
    1, 2, 3, 4, 8, 9, 10, 17, 21
ITEM_KEY, ITEM_NESTED, ITEM_JSON = 1, 2, 16  # ConfigItem, SummaryItem, HistoryItem
UPDATE, REMOVE = 1, 2  # ConfigRecord, SummaryRecord; HistoryRecord.item is 1 too
EXIT_CODE = 1
ENV_GIT = 9
GIT_REMOTE, GIT_COMMIT = 1, 2
TS_SECONDS = 1


class LogError(ValueError):
    """A log this reader cannot follow; the message says why."""


@dataclass(slots=True)
class RunLog:
    """What a run's log says, the last word winning (each notes/tags edit appends a new run record)."""

    id: str | None = None
    entity: str | None = None
    project: str | None = None
    name: str | None = None
    notes: str | None = None
    tags: list[str] = field(default_factory=list)
    start_seconds: int | None = None
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    history: dict[str, Any] = field(default_factory=dict)  # each key's latest logged value
    exit_code: int | None = None
    commit: str | None = None
    remote: str | None = None


def read(data: bytes) -> RunLog:
    """Decode a whole log. A torn last record (a run still writing) ends the log quietly."""
    log = RunLog()
    for record in records(data):
        _apply(log, fields(record))
    return log


def records(data: bytes) -> Iterator[bytes]:
    """The whole records of a log, in order."""
    if not data.startswith(HEADER):
        raise LogError("not a W&B run log of a known version (header "
                       f"{data[:len(HEADER)]!r}, expected {HEADER!r})")
    pos, parts = len(HEADER), []
    while pos + CHUNK <= len(data):
        room = BLOCK - pos % BLOCK
        if room < CHUNK:
            pos += room
            continue
        crc, length, kind = struct.unpack_from("<IHB", data, pos)
        start, end = pos + CHUNK, pos + CHUNK + length
        if kind == 0 and length == 0:  # zero padding (a block tail or a preallocated end)
            pos += room
            continue
        if end > len(data):
            return  # the writer is still writing this chunk
        chunk = data[start:end]
        if zlib.crc32(chunk, zlib.crc32(bytes([kind]))) != crc:
            raise LogError(f"damaged record at byte {pos} (checksum mismatch)")
        pos = end
        if kind == FULL:
            yield chunk
        elif kind == FIRST:
            parts = [chunk]
        elif kind == MIDDLE:
            parts.append(chunk)
        elif kind == LAST:
            parts.append(chunk)
            yield b"".join(parts)
            parts = []
        else:
            raise LogError(f"unknown chunk type {kind} at byte {pos}")


def fields(message: bytes) -> dict[int, list[Any]]:
    """A protobuf message's fields: number → values in order (varints as ints, length-delimited
    fields as bytes, fixed-width ones as raw bytes)."""
    out: dict[int, list[Any]] = {}
    pos, end = 0, len(message)
    while pos < end:
        key, pos = _varint(message, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(message, pos)
        elif wire == 2:
            length, pos = _varint(message, pos)
            value, pos = message[pos:pos + length], pos + length
            if pos > end:
                raise LogError("truncated protobuf field")
        elif wire == 1:
            value, pos = message[pos:pos + 8], pos + 8
        elif wire == 5:
            value, pos = message[pos:pos + 4], pos + 4
        else:
            raise LogError(f"unsupported protobuf wire type {wire}")
        out.setdefault(number, []).append(value)
    return out


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise LogError("truncated protobuf varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _text(values: list[Any] | None) -> str | None:
    return values[-1].decode("utf-8", "replace") if values else None


def _items(message: bytes, number: int) -> Iterator[tuple[str, Any]]:
    """(key, decoded JSON value) of the ConfigItem/SummaryItem/HistoryItem under `number`; a nested
    key (`a.b`) is joined with dots."""
    for raw in fields(message).get(number, ()):
        item = fields(raw)
        nested = [part.decode("utf-8", "replace") for part in item.get(ITEM_NESTED, ())]
        key = ".".join(nested) if nested else _text(item.get(ITEM_KEY))
        if not key:
            continue
        try:
            value = orjson.loads(item[ITEM_JSON][-1]) if ITEM_JSON in item else None
        except orjson.JSONDecodeError:
            value = _text(item.get(ITEM_JSON))
        yield key, value


def _update(target: dict[str, Any], message: bytes) -> None:
    target.update(_items(message, UPDATE))
    for key, _ in _items(message, REMOVE):
        target.pop(key, None)


def _git(log: RunLog, message: bytes) -> None:
    git = fields(message)
    log.commit = _text(git.get(GIT_COMMIT)) or log.commit
    log.remote = _text(git.get(GIT_REMOTE)) or log.remote


def _apply(log: RunLog, record: dict[int, list[Any]]) -> None:
    for raw in record.get(R_RUN, ()):
        run = fields(raw)
        log.id = _text(run.get(RUN_ID)) or log.id
        log.entity = _text(run.get(RUN_ENTITY)) or log.entity
        log.project = _text(run.get(RUN_PROJECT)) or log.project
        log.name = _text(run.get(RUN_NAME)) or log.name
        if RUN_NOTES in run:
            log.notes = _text(run[RUN_NOTES])
        if RUN_TAGS in run or RUN_ID in run:  # a run record states the whole tag list
            log.tags = [tag.decode("utf-8", "replace") for tag in run.get(RUN_TAGS, ())]
        if RUN_START in run:
            log.start_seconds = fields(run[RUN_START][-1]).get(TS_SECONDS, [None])[-1]
        if RUN_CONFIG in run:
            _update(log.config, run[RUN_CONFIG][-1])
        if RUN_GIT in run:
            _git(log, run[RUN_GIT][-1])
    for raw in record.get(R_CONFIG, ()):
        _update(log.config, raw)
    for raw in record.get(R_SUMMARY, ()):
        _update(log.summary, raw)
    for raw in record.get(R_HISTORY, ()):
        log.history.update(_items(raw, UPDATE))
    for raw in record.get(R_EXIT, ()):
        code = fields(raw).get(EXIT_CODE, [0])[-1]
        log.exit_code = code - (1 << 64) if code >= 1 << 63 else code  # int32 as a varint: sign-extended
    for raw in record.get(R_ENVIRONMENT, ()):
        env = fields(raw)
        if ENV_GIT in env:
            _git(log, env[ENV_GIT][-1])
