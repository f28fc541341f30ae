"""Experiment records: the validated, immutable form of one run in the pool (docs/spec.md §1.2-1.4).

`parse_record` turns a decoded mapping (from JSON or YAML) into a `Record` or raises `RecordError`
naming the field path and what is wrong. It is pure: where the mapping came from is passed in as a
`Source` and only carried along, so the loader can report `path:line: field.path: problem`.

`decode_record` takes a JSON line's bytes straight to the same `Record`, decoded and type-checked in
C (msgspec) for a record of the well-formed shape, or None for anything else — which the caller then
decodes and validates as above, so that every error is still reported by `parse_record` alone.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, make_dataclass
from datetime import date, datetime, timezone
from enum import StrEnum
from string import ascii_letters
from sys import intern  # metric names and tags: the few a pool repeats in every record, held once
from typing import Any, Literal

import msgspec


class RecordError(ValueError):
    """A record that cannot be used: `field` is a dotted path such as `metrics[1].value`."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}" if field else problem)
        self.field = field
        self.problem = problem


class Status(StrEnum):
    PLANNED = "planned"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CRASHED = "crashed"
    REGRESSED = "regressed"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"


STATUS_ALIASES: Mapping[str, Status] = {
    **{s.value: s for s in Status},
    "finished": Status.SUCCEEDED,
    "completed": Status.SUCCEEDED,
    "success": Status.SUCCEEDED,
    "ok": Status.SUCCEEDED,
    "error": Status.CRASHED,
    "errored": Status.CRASHED,
    "killed": Status.CANCELLED,
    "canceled": Status.CANCELLED,
    "aborted": Status.CANCELLED,
    "scheduled": Status.PLANNED,
    "queued": Status.PLANNED,
    "pending": Status.PLANNED,
}

Goal = Literal["min", "max"]
GOAL_ALIASES: Mapping[str, Goal] = {
    "min": "min",
    "minimize": "min",
    "lower": "min",
    "max": "max",
    "maximize": "max",
    "higher": "max",
}

_NON_FINITE = {"nan": math.nan, "inf": math.inf, "+inf": math.inf, "-inf": -math.inf,
               "infinity": math.inf, "+infinity": math.inf, "-infinity": -math.inf}
_COMMIT = re.compile(r"[0-9a-fA-F]{7,40}")


@dataclass(frozen=True, slots=True)
class Source:
    """Where a record was read from: a filesystem path and its 0-based line."""

    path: str
    line: int = 0


@dataclass(frozen=True, slots=True)
class Metric:
    name: str
    value: float
    baseline: float | None = None
    goal: Goal | None = None

    @property
    def moved_wrong_way(self) -> bool | None:
        """True/False when value, baseline and goal are all known; None otherwise."""
        if self.baseline is None or self.goal is None:
            return None
        if not math.isfinite(self.value):
            return True
        return self.value > self.baseline if self.goal == "min" else self.value < self.baseline


@dataclass(frozen=True, slots=True)
class CodeTie:
    """Code an experiment touched: a workspace-relative `/` path and optionally `Qualified.symbol`."""

    path: str
    symbol: str | None = None

    def __str__(self) -> str:
        return f"{self.path}::{self.symbol}" if self.symbol else self.path


@dataclass(frozen=True, slots=True)
class Record:
    id: str
    name: str
    status: Status = Status.UNKNOWN
    created_at: datetime | None = None
    finished_at: datetime | None = None
    headline: str | None = None
    details: str | None = None
    notes: str | None = None
    architecture: tuple[tuple[str, float], ...] = ()
    metrics: tuple[Metric, ...] = ()
    code: tuple[CodeTie, ...] = ()
    commit: str | None = None
    tags: tuple[str, ...] = ()
    url: str | None = None
    importance: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    source: Source | None = field(default=None, compare=False)
    warnings: tuple[str, ...] = field(default=(), compare=False, repr=False)
    #: the remote URL of the repository `commit` belongs to, so runs of another repository tie nothing here
    repo: str | None = None
    #: where the run came from when a tracker holds it (tracker, store, experiment), for hover and
    #: find-related: "MLflow tracking server http://host:5000 · experiment rope"; None for soma's own files
    origin: str | None = None
    #: the file holding the diff of the run's uncommitted changes against `commit` (W&B's
    #: `files/diff.patch`): set by a tracker reader only, never read from a record file (nothing reads
    #: a path a record names)
    patch: str | None = None

    @property
    def time(self) -> datetime | None:
        """The record's time for recency: `finished_at`, else `created_at` (spec §2.3)."""
        return self.finished_at or self.created_at


_STR_ONLY = frozenset({str})  # the item types of a list of strings
_KNOWN = {"id", "name", "status", "created_at", "finished_at", "conclusion", "notes", "architecture",
          "metrics", "code", "commit", "tags", "url", "importance", "repo", "origin"}


def _constructor(cls: type) -> type:
    """A positional constructor of the frozen, slotted dataclass `cls`, for the hot path of parsing.

    A frozen dataclass's `__init__` stores each field through `object.__setattr__` (2 µs for a
    `Record`, the largest single cost of `parse_record`). This one stores them on a mutable twin with
    the same slots and then makes it a `cls`: CPython allows `__class__` assignment between classes of
    identical layout. What comes out is an ordinary `cls` (type, equality, hashing, immutability)."""
    def become(self: Any) -> None:
        self.__class__ = cls

    return make_dataclass(f"_{cls.__name__}Draft", [(f.name, f.type) for f in fields(cls)], slots=True,
                          eq=False, repr=False, match_args=False, namespace={"__post_init__": become})


# Unchecked constructors from field values in declared order, for values already validated: by the
# parsers below, and by `stored.RecordStore`, which rebuilds the records it kept.
record_from_fields = _constructor(Record)
metric_from_fields = _constructor(Metric)
tie_from_fields = _constructor(CodeTie)


def _is_mapping(value: Any) -> bool:
    return type(value) is dict or isinstance(value, Mapping)  # decoded JSON/YAML: skip the ABC check


def _is_list(value: Any) -> bool:
    """Checked before `_is_mapping` where either may come: a list fails the ABC check slowly."""
    return type(value) is list or type(value) is tuple


def parse_record(mapping: Any, *, source: Source | None = None) -> Record:
    """Validate one decoded record; raise `RecordError` on the first problem found."""
    if not _is_mapping(mapping):
        raise RecordError("", f"a record must be an object, not {kind_of(mapping)}")
    get = mapping.get
    headline, details = _conclusion(get("conclusion"))
    id_, name = _required_text(get("id"), "id"), _required_text(get("name"), "name")
    raw_status = get("status")
    status = _status(raw_status)  # None: a status text that names none, loaded as unknown with a warning
    return record_from_fields(  # the fields in their declared order
        id_, name, status or Status.UNKNOWN,
        parse_timestamp(get("created_at"), "created_at"),
        parse_timestamp(get("finished_at"), "finished_at"),
        headline, details,
        _optional_text(get("notes"), "notes"),
        parse_architecture(get("architecture")),
        _metrics(get("metrics")),
        _code(get("code")),
        _commit(get("commit")),
        _tags(get("tags")),
        _optional_text(get("url"), "url"),
        _importance(get("importance")),
        _extra(mapping),
        source,
        () if status else _unknown_status(raw_status),
        _optional_text(get("repo"), "repo"),
        _optional_text(get("origin"), "origin"),
        None,  # patch: a tracker reader's to set, never a record file's
    )


def _unknown_status(raw: str) -> tuple[str]:
    """The record's warnings when its status names none (§1.3): it loads as `unknown`."""
    return (f"status: unknown status {raw!r}, loaded as 'unknown'",)


# -- a JSON line straight to a record ---------------------------------------------------------------

class _Conclusion(msgspec.Struct, forbid_unknown_fields=True):
    headline: str | None = None
    details: str | None = None


_Number = int | float  # (an integer stays an int, of any size: the helpers make a float of it, as of orjson's)
_MetricBody = dict[str, str | _Number | None]  # {value, baseline?, goal?} and `name` in the list form
_Tie = dict[str, str | None]  # {path, symbol?}


class _Line(msgspec.Struct, forbid_unknown_fields=True):
    """A record of the well-formed shape, as msgspec decodes it: each field's JSON kinds as spec §1.2
    accepts them, so that what it decodes holds the values `orjson.loads` would give and the checks
    left to `_line_record` are those of `parse_record`'s own helpers. The decoder refuses an unknown
    field (at the top, kept in `extra` by `parse_record`; in a conclusion, ignored by it), a value of
    another kind, `NaN`/`Infinity` literals, a lone surrogate, a float beyond a float's range, a
    missing id or name: such a line takes the full path."""

    id: str
    name: str
    status: str | None = None
    created_at: str | None = None
    finished_at: str | None = None
    conclusion: str | _Conclusion | None = None
    notes: str | None = None
    architecture: list[str] | dict[str, _Number] | None = None
    metrics: list[_MetricBody] | dict[str, _MetricBody | _Number | str] | None = None
    code: list[str | _Tie] | str | _Tie | None = None
    commit: str | None = None
    tags: list[str] | None = None
    url: str | None = None
    importance: _Number | None = None
    repo: str | None = None
    origin: str | None = None


_decode_line = msgspec.json.Decoder(_Line).decode


def decode_record(line: bytes, *, source: Source | None = None) -> Record | None:
    """The record `parse_record(orjson.loads(line), source=source)` gives — the same fields, warnings
    and all — for a line of the well-formed shape (`_Line`); None for any other line, valid or not,
    which the caller decodes and validates the full way (the reports stay `parse_record`'s alone).
    Decoded and type-checked in C: ≈ 17% less time than `orjson.loads` and `parse_record` for the
    records of a generated 100k pool (docs/benchmarks.md, issue 22 point 3)."""
    try:
        return _line_record(_decode_line(line), source)
    except (msgspec.DecodeError, ValueError, RecursionError):  # (RecordError and UnicodeDecodeError are
        return None                                            # ValueErrors, ValidationError a DecodeError)


def _line_record(raw: _Line, source: Source | None) -> Record:
    """`parse_record`'s record from what the decoder checked the kinds of; raises `RecordError` where
    `parse_record` would."""
    id_, name = _required_text(raw.id, "id"), _required_text(raw.name, "name")
    conclusion = raw.conclusion
    if conclusion is None or type(conclusion) is str:
        headline, details = _optional_text(conclusion, "conclusion"), None
    else:
        headline = _optional_text(conclusion.headline, "conclusion.headline")
        details = _optional_text(conclusion.details, "conclusion.details")
    raw_status = raw.status
    status = _status(raw_status)
    created_at, finished_at, commit = raw.created_at, raw.finished_at, raw.commit
    return record_from_fields(  # as `parse_record`'s, with the kinds already checked
        id_, name, status or Status.UNKNOWN,
        None if created_at is None else parse_timestamp(created_at, "created_at"),
        None if finished_at is None else parse_timestamp(finished_at, "finished_at"),
        headline, details,
        _optional_text(raw.notes, "notes"),
        parse_architecture(raw.architecture, kinds_checked=True),
        _metrics(raw.metrics),
        _code(raw.code),
        None if commit is None else _commit(commit),
        _tags(raw.tags),
        _optional_text(raw.url, "url"),
        _importance(raw.importance),
        {},
        source,
        () if status else _unknown_status(raw_status),
        _optional_text(raw.repo, "repo"),
        _optional_text(raw.origin, "origin"),
        None,
    )


def record_errors(mapping: Any) -> list[RecordError]:
    """Every problem of a record `parse_record` refuses, not only the first: each field it knows is
    checked on its own (through `parse_record` itself, so the rules stay written once), the required
    `id` and `name` on the record. For a linter (`soma-lsp check`) and the pool's diagnostics, which
    show them all at once; a record it accepts has none."""
    try:
        parse_record(mapping)
    except RecordError as error:
        first = error  # (`error` itself is unbound when the `except` block ends)
        if not _is_mapping(mapping):
            return [first]
    else:
        return []
    errors = []
    for key in ("id", "name"):
        try:
            _required_text(mapping.get(key), key)
        except RecordError as error:
            errors.append(error)
    for key, value in mapping.items():
        if key in _KNOWN and key not in ("id", "name"):
            try:
                parse_record({"id": "x", "name": "x", key: value})
            except RecordError as error:
                errors.append(error)
    return errors or [first]


def document_texts(mapping: dict) -> tuple[str, str, str, str]:
    """(name, headline, notes, details) as the record `parse_record(mapping)` builds holds them (absent
    or blank: ""), for a mapping it accepts; without validating or building the record. What lets
    `pool.counting` count a file's documents in another process while the loader validates it."""
    get = mapping.get
    return fields_texts(get("name"), get("conclusion"), get("notes"))


def fields_texts(name: Any, conclusion: Any, notes: Any) -> tuple[str, str, str, str]:
    """`document_texts` of a record's `name`, `conclusion` and `notes` as decoded."""
    headline, details = (conclusion.get("headline"), conclusion.get("details")) if type(conclusion) is dict \
        else (conclusion, None)
    return tuple([value if type(value) is str and not value.isspace() else ""  # ("".isspace() is False)
                  for value in (name, headline, notes, details)])


def _extra(mapping: Mapping) -> dict[str, Any]:
    """The unknown fields, in input order."""
    if _KNOWN.issuperset(mapping):
        return {}
    return {k: v for k, v in mapping.items() if k not in _KNOWN}


#: How an error message names the kind of a JSON value ("expected a string, got a number"); every
#: layer that reports a wrongly typed value (records, pool files, settings, command arguments) says it
#: the same way, from here.
KIND_NAMES = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list",
              tuple: "a list", dict: "an object", type(None): "null"}


def kind_of(value: Any) -> str:
    """`a boolean`, `a number`, … — the kind of a JSON value, for error messages."""
    return KIND_NAMES.get(type(value), type(value).__name__)


def _required_text(value: Any, key: str) -> str:
    if value is None:
        raise RecordError(key, "is required")
    if type(value) is not str:
        raise RecordError(key, f"expected a non-empty string, got {kind_of(value)}")
    if not value.strip():
        raise RecordError(key, "must not be empty")
    return value


def _optional_text(value: Any, path: str) -> str | None:
    """Optional free text; an empty or blank string means absent."""
    if value is None:
        return None
    if type(value) is not str:
        raise RecordError(path, f"expected a string, got {kind_of(value)}")
    return value if value.strip() else None


def _status(value: Any) -> Status | None:
    if value is None:
        return Status.UNKNOWN
    if not isinstance(value, str):
        raise RecordError("status", f"expected a string, got {kind_of(value)}")
    return STATUS_ALIASES.get(value.strip().lower())


def parse_timestamp(value: Any, path: str = "timestamp") -> datetime | None:
    """RFC 3339 (or ISO 8601) text, or a YAML timestamp; without a zone it is UTC."""
    if value is None:
        return None
    if isinstance(value, str):  # first: the common case (no type is both a str and a date)
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise RecordError(path, f"expected an RFC 3339 timestamp, got {value!r}") from None
    elif isinstance(value, datetime):
        parsed = value
    elif isinstance(value, date):
        parsed = datetime(value.year, value.month, value.day)
    else:
        raise RecordError(path, f"expected an RFC 3339 timestamp string, got {kind_of(value)}")
    zone = parsed.tzinfo
    if zone is None:
        return parsed.replace(tzinfo=timezone.utc)
    shared = _ZONES.get(zone)
    if shared is None:
        shared = zone
        if len(_ZONES) < _ZONES_MAX:
            _ZONES[zone] = zone
    return parsed if shared is zone else parsed.replace(tzinfo=shared)


#: Each `+02:00` that `fromisoformat` reads is a new `timezone` object (≈ 80 bytes with its timedelta,
#: held by every record of a pool that writes offsets); records share one per offset instead
_ZONES: dict[Any, Any] = {}
_ZONES_MAX = 1024


def _conclusion(value: Any) -> tuple[str | None, str | None]:
    if value is None:
        return None, None
    if type(value) is str:
        return _optional_text(value, "conclusion"), None
    if not _is_mapping(value):
        raise RecordError("conclusion", f"expected a string or {{headline, details}}, got {kind_of(value)}")
    return (_optional_text(value.get("headline"), "conclusion.headline"),
            _optional_text(value.get("details"), "conclusion.details"))


def number(value: Any, path: str, *, non_finite: bool = False) -> float:
    """A real number (not a boolean); with `non_finite`, also NaN/infinity in their text forms."""
    kind = type(value)
    if kind is float and (non_finite or math.isfinite(value)):
        return value
    if kind is int:
        return _int_float(value, path)
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise RecordError(path, f"expected a number, got {kind_of(value)}")
    if isinstance(value, str):
        special = _NON_FINITE.get(value.strip().lower()) if non_finite else None
        if special is None:
            raise RecordError(path, f"expected a number, got the string {value!r}")
        return special
    result = float(value)
    if not non_finite and not math.isfinite(result):
        raise RecordError(path, f"expected a finite number, got {value!r}")
    return result


def _int_float(value: int, path: str) -> float:
    try:
        return float(value)
    except OverflowError:  # (YAML and JSON integers have no size limit)
        raise RecordError(path, f"number too large: an integer of about {int(value.bit_length() * 0.30103)} "
                                "digits, beyond the range of a float") from None


def parse_architecture(value: Any, *, kinds_checked: bool = False) -> tuple[tuple[str, float], ...]:
    """Components as (name, count) pairs, in input order; canonicalisation belongs to retrieval.
    `kinds_checked`: `value` is known to be None, a list of strings or a map string → int or float
    (`_Line`), so the pairs are looked up as they come (a boolean, which hashes as 1, cannot be one)."""
    if value is None:
        return ()
    if kinds_checked:
        get = _PAIRS.get
        if type(value) is list:
            return tuple([get((name, 1)) or _pair(name, 1) for name in value])
        return tuple([get(item) or _pair(*item) for item in value.items()])
    if _is_list(value):
        _check_strings(value, "architecture")
        return tuple([_PAIRS.get((name, 1)) or _pair(name, 1) for name in value])
    if _is_mapping(value):  # the common case, a string name and an integer count, shared (not True: == 1)
        return tuple([(_PAIRS.get((name, count)) or _pair(name, count)) if type(count) is int and type(name) is str
                      else _component(name, count) for name, count in value.items()])
    raise RecordError("architecture", f"expected a list of strings or a map name → count, got {kind_of(value)}")


def _pair(name: str, count: int) -> tuple[str, float]:
    """A (name, integer count) component, memoised: a pool's records repeat the same few components
    and counts, and the pairs are immutable (held apart, those of 100k generated records took 37 MB)."""
    pair = _component(name, count)
    if len(_PAIRS) >= _PAIRS_MAX:
        _PAIRS.clear()
    _PAIRS[(name, count)] = pair
    return pair


_PAIRS: dict[tuple[str, int], tuple[str, float]] = {}
_PAIRS_MAX = 16384  # distinct pairs remembered; beyond that the memo starts over


def _component(name: Any, count: Any) -> tuple[str, float]:
    if not isinstance(name, str):
        raise RecordError("architecture", f"component names must be strings, got {kind_of(name)}")
    return name, number(count, f"architecture.{name}")


def _check_strings(items: list | tuple, path: str) -> None:
    """Raise for the first item that is not a string (the check runs in C; the loop only names it)."""
    if not _STR_ONLY.issuperset(map(type, items)):
        for i, item in enumerate(items):
            if type(item) is not str:
                raise RecordError(f"{path}[{i}]", f"expected a string, got {kind_of(item)}")


def _metric(body: Any, name: Any, where: str | int) -> Metric:
    """One metric; `where` is its path, or its index in the list form (made a path only for an error)."""
    if not isinstance(name, str) or not name.strip():
        raise RecordError(f"{_metric_path(where)}.name", "expected a non-empty string")
    if not _is_mapping(body):
        return metric_from_fields(intern(name), number(body, _metric_path(where), non_finite=True), None, None)
    value, goal, baseline = body.get("value"), body.get("goal"), body.get("baseline")
    if value is None:
        raise RecordError(f"{_metric_path(where)}.value", "is required")
    if goal is not None:
        canonical = GOAL_ALIASES.get(goal.strip().lower()) if isinstance(goal, str) else None
        if canonical is None:
            raise RecordError(f"{_metric_path(where)}.goal",
                              f"expected min or max (or minimize/lower, maximize/higher), got {goal!r}")
        goal = canonical
    return metric_from_fields(intern(name), _metric_number(value, where, "value"),
                              None if baseline is None else _metric_number(baseline, where, "baseline"), goal)


def _metric_number(value: Any, where: str | int, key: str) -> float:
    """`number(value, path, non_finite=True)`, its common cases first so that the path is built only
    for what may be an error."""
    kind = type(value)
    if kind is float:
        return value
    if kind is int and value.bit_length() < 1024:  # (a larger one overflows a float: `number` says so)
        return float(value)
    return number(value, f"{_metric_path(where)}.{key}", non_finite=True)


def _metric_path(where: str | int) -> str:
    return f"metrics[{where}]" if type(where) is int else where


def _metrics(value: Any) -> tuple[Metric, ...]:
    if value is None:
        return ()
    if _is_list(value):
        return tuple([_metric(item, item.get("name"), i) if _is_mapping(item) else _not_a_metric(item, i)
                      for i, item in enumerate(value)])
    if _is_mapping(value):
        return tuple([_metric(body, name, f"metrics.{name}") for name, body in value.items()])
    raise RecordError("metrics", f"expected a list or a map of metrics, got {kind_of(value)}")


def _not_a_metric(item: Any, i: int) -> Metric:
    raise RecordError(f"metrics[{i}]", f"expected an object {{name, value, baseline?, goal?}}, got {kind_of(item)}")


def code_path(raw: Any, path: str) -> str:
    """A workspace-relative `/` path; absolute paths and `..` would reach outside the root."""
    text = raw.strip() if isinstance(raw, str) else ""
    if not text:
        raise RecordError(path, "expected a non-empty path")
    if "\\" in text:
        raise RecordError(path, f"paths are '/'-separated, got {raw!r}")
    if text[0] in "/~" or text[1:2] == ":" and text[0] in ascii_letters:  # (a drive: `C:`)
        raise RecordError(path, f"must be relative to the workspace root, got {raw!r}")
    parts = text.split("/")
    if "" not in parts and "." not in parts and ".." not in parts:
        return text  # already in canonical form
    parts = [p for p in parts if p not in ("", ".")]
    if ".." in parts:
        raise RecordError(path, f"must not leave the workspace root ('..'), got {raw!r}")
    if not parts:
        raise RecordError(path, f"expected a file path, got {raw!r}")
    return "/".join(parts)


def _code(value: Any) -> tuple[CodeTie, ...]:
    if value is None:
        return ()
    if not _is_list(value):
        if type(value) is not str and not _is_mapping(value):
            raise RecordError("code", f"expected a list of code references, got {kind_of(value)}")
        value = [value]
    return tuple([_text_tie(item, i) if type(item) is str else _mapped_tie(item, i) for i, item in enumerate(value)])


def _text_tie(text: str, i: int) -> CodeTie:
    """`"path"` or `"path::Qualified.symbol"`. Memoised: a pool's records point at the same files and
    symbols over and over, and a CodeTie is immutable, so they can share one (and its strings)."""
    tie = _TEXT_TIES.get(text)
    if tie is None:
        path, _, symbol = text.partition("::")
        tie = tie_from_fields(code_path(path, f"code[{i}]"), symbol.strip() or None)
        if len(_TEXT_TIES) >= _TEXT_TIES_MAX:
            _TEXT_TIES.clear()
        _TEXT_TIES[text] = tie
    return tie


_TEXT_TIES: dict[str, CodeTie] = {}
_TEXT_TIES_MAX = 4096  # distinct texts remembered; beyond that the memo starts over


def _mapped_tie(item: Any, i: int) -> CodeTie:
    """`{path, symbol?}`; anything else is an error."""
    where = f"code[{i}]"
    if not _is_mapping(item):
        raise RecordError(where, f"expected \"path\", \"path::Symbol\" or {{path, symbol}}, got {kind_of(item)}")
    symbol = item.get("symbol")
    if symbol is not None and not isinstance(symbol, str):
        raise RecordError(f"{where}.symbol", f"expected a string, got {kind_of(symbol)}")
    return tie_from_fields(code_path(item.get("path"), f"{where}.path"), (symbol or "").strip() or None)


def _commit(value: Any) -> str | None:
    if value is None:
        return None
    text = value.strip() if isinstance(value, str) else ""
    if not _COMMIT.fullmatch(text):
        raise RecordError("commit", f"expected a hex commit of 7 to 40 characters, got {value!r}")
    return text.lower()


def _tags(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not _is_list(value):
        raise RecordError("tags", f"expected a list of strings, got {kind_of(value)}")
    _check_strings(value, "tags")
    return tuple(map(intern, value))  # (shared, as metric names: see `intern`)


def _importance(value: Any) -> float | None:
    if value is None:
        return None
    result = number(value, "importance")
    if not 0.0 <= result <= 1.0:
        raise RecordError("importance", f"must be in [0, 1], got {value!r}")
    return result
