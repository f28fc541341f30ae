"""Experiment records: the validated, immutable form of one run in the pool (SPEC 1.2-1.4).

`parse_record` turns a decoded mapping (from JSON or YAML) into a `Record` or raises `RecordError`
naming the field path and what is wrong. It is pure: where the mapping came from is passed in as a
`Source` and only carried along, so the loader can report `path:line: field.path: problem`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from enum import StrEnum
from typing import Any, Literal


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
_DRIVE = re.compile(r"[A-Za-z]:")


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

    @property
    def time(self) -> datetime | None:
        """The record's time for recency: `finished_at`, else `created_at` (SPEC 2.3)."""
        return self.finished_at or self.created_at


_KNOWN = {"id", "name", "status", "created_at", "finished_at", "conclusion", "notes", "architecture",
          "metrics", "code", "commit", "tags", "url", "importance"}


def _is_mapping(value: Any) -> bool:
    return type(value) is dict or isinstance(value, Mapping)  # decoded JSON/YAML: skip the ABC check


def _is_list(value: Any) -> bool:
    return type(value) is list or type(value) is tuple


def parse_record(mapping: Any, *, source: Source | None = None) -> Record:
    """Validate one decoded record; raise `RecordError` on the first problem found."""
    if not _is_mapping(mapping):
        raise RecordError("", f"a record must be an object, not {_kind(mapping)}")
    warnings: list[str] = []
    headline, details = _conclusion(mapping.get("conclusion"))
    return Record(
        id=_required_text(mapping, "id"),
        name=_required_text(mapping, "name"),
        status=_status(mapping.get("status"), warnings),
        created_at=parse_timestamp(mapping.get("created_at"), "created_at"),
        finished_at=parse_timestamp(mapping.get("finished_at"), "finished_at"),
        headline=headline,
        details=details,
        notes=_optional_text(mapping.get("notes"), "notes"),
        architecture=_architecture(mapping.get("architecture")),
        metrics=_metrics(mapping.get("metrics")),
        code=_code(mapping.get("code")),
        commit=_commit(mapping.get("commit")),
        tags=_tags(mapping.get("tags")),
        url=_optional_text(mapping.get("url"), "url"),
        importance=_importance(mapping.get("importance")),
        extra={k: v for k, v in mapping.items() if k not in _KNOWN} if mapping.keys() - _KNOWN else {},
        source=source,
        warnings=tuple(warnings),
    )


def _kind(value: Any) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list",
             tuple: "a list", dict: "an object", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _required_text(mapping: Mapping, key: str) -> str:
    if key not in mapping or mapping[key] is None:
        raise RecordError(key, "is required")
    value = mapping[key]
    if type(value) is not str:
        raise RecordError(key, f"expected a non-empty string, got {_kind(value)}")
    if not value.strip():
        raise RecordError(key, "must not be empty")
    return value


def _optional_text(value: Any, path: str) -> str | None:
    """Optional free text; an empty or blank string means absent."""
    if value is None:
        return None
    if type(value) is not str:
        raise RecordError(path, f"expected a string, got {_kind(value)}")
    return value if value.strip() else None


def _status(value: Any, warnings: list[str]) -> Status:
    if value is None:
        return Status.UNKNOWN
    if not isinstance(value, str):
        raise RecordError("status", f"expected a string, got {_kind(value)}")
    status = STATUS_ALIASES.get(value.strip().lower())
    if status is None:
        warnings.append(f"status: unknown status {value!r}, loaded as 'unknown'")
        return Status.UNKNOWN
    return status


def parse_timestamp(value: Any, path: str = "timestamp") -> datetime | None:
    """RFC 3339 (or ISO 8601) text, or a YAML timestamp; without a zone it is UTC."""
    if value is None:
        return None
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, date):
        parsed = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise RecordError(path, f"expected an RFC 3339 timestamp, got {value!r}") from None
    else:
        raise RecordError(path, f"expected an RFC 3339 timestamp string, got {_kind(value)}")
    return parsed.replace(tzinfo=timezone.utc) if parsed.tzinfo is None else parsed


def _conclusion(value: Any) -> tuple[str | None, str | None]:
    if value is None:
        return None, None
    if type(value) is str:
        return _optional_text(value, "conclusion"), None
    if not _is_mapping(value):
        raise RecordError("conclusion", f"expected a string or {{headline, details}}, got {_kind(value)}")
    return (_optional_text(value.get("headline"), "conclusion.headline"),
            _optional_text(value.get("details"), "conclusion.details"))


def number(value: Any, path: str, *, non_finite: bool = False) -> float:
    """A real number (not a boolean); with `non_finite`, also NaN/infinity in their text forms."""
    kind = type(value)
    if kind is float and (non_finite or math.isfinite(value)):
        return value
    if kind is int:
        return float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise RecordError(path, f"expected a number, got {_kind(value)}")
    if isinstance(value, str):
        special = _NON_FINITE.get(value.strip().lower()) if non_finite else None
        if special is None:
            raise RecordError(path, f"expected a number, got the string {value!r}")
        return special
    result = float(value)
    if not non_finite and not math.isfinite(result):
        raise RecordError(path, f"expected a finite number, got {value!r}")
    return result


def _architecture(value: Any) -> tuple[tuple[str, float], ...]:
    """Components as (name, count) pairs, in input order; canonicalisation belongs to retrieval."""
    if value is None:
        return ()
    if _is_mapping(value):
        pairs = []
        for name, count in value.items():
            if not isinstance(name, str):
                raise RecordError("architecture", f"component names must be strings, got {_kind(name)}")
            pairs.append((name, number(count, f"architecture.{name}")))
        return tuple(pairs)
    if _is_list(value):
        for i, name in enumerate(value):
            if type(name) is not str:
                raise RecordError(f"architecture[{i}]", f"expected a string, got {_kind(name)}")
        return tuple((name, 1.0) for name in value)
    raise RecordError("architecture", f"expected a list of strings or a map name → count, got {_kind(value)}")


def _metric(body: Any, name: Any, path: str) -> Metric:
    if not isinstance(name, str) or not name.strip():
        raise RecordError(f"{path}.name", "expected a non-empty string")
    if not _is_mapping(body):
        return Metric(name, number(body, path, non_finite=True))
    if body.get("value") is None:
        raise RecordError(f"{path}.value", "is required")
    goal = body.get("goal")
    if goal is not None:
        canonical = GOAL_ALIASES.get(goal.strip().lower()) if isinstance(goal, str) else None
        if canonical is None:
            raise RecordError(f"{path}.goal", f"expected min or max (or minimize/lower, maximize/higher), got {goal!r}")
        goal = canonical
    baseline = body.get("baseline")
    return Metric(
        name=name,
        value=number(body["value"], f"{path}.value", non_finite=True),
        baseline=None if baseline is None else number(baseline, f"{path}.baseline", non_finite=True),
        goal=goal,
    )


def _metrics(value: Any) -> tuple[Metric, ...]:
    if value is None:
        return ()
    if _is_mapping(value):
        return tuple(_metric(body, name, f"metrics.{name}") for name, body in value.items())
    if _is_list(value):
        out = []
        for i, item in enumerate(value):
            if not _is_mapping(item):
                raise RecordError(f"metrics[{i}]", f"expected an object {{name, value, baseline?, goal?}}, got {_kind(item)}")
            out.append(_metric(item, item.get("name"), f"metrics[{i}]"))
        return tuple(out)
    raise RecordError("metrics", f"expected a list or a map of metrics, got {_kind(value)}")


def code_path(raw: Any, path: str) -> str:
    """A workspace-relative `/` path; absolute paths and `..` would reach outside the root."""
    if not isinstance(raw, str) or not raw.strip():
        raise RecordError(path, "expected a non-empty path")
    text = raw.strip()
    if "\\" in text:
        raise RecordError(path, f"paths are '/'-separated, got {raw!r}")
    if text.startswith(("/", "~")) or _DRIVE.match(text):
        raise RecordError(path, f"must be relative to the workspace root, got {raw!r}")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise RecordError(path, f"must not leave the workspace root ('..'), got {raw!r}")
    if not parts:
        raise RecordError(path, f"expected a file path, got {raw!r}")
    return "/".join(parts)


def _code(value: Any) -> tuple[CodeTie, ...]:
    if value is None:
        return ()
    if type(value) is str or _is_mapping(value):
        value = [value]
    if not _is_list(value):
        raise RecordError("code", f"expected a list of code references, got {_kind(value)}")
    ties = []
    for i, item in enumerate(value):
        where = f"code[{i}]"
        if type(item) is str:
            path, _, symbol = item.partition("::")
            ties.append(CodeTie(code_path(path, where), symbol.strip() or None))
        elif _is_mapping(item):
            symbol = item.get("symbol")
            if symbol is not None and not isinstance(symbol, str):
                raise RecordError(f"{where}.symbol", f"expected a string, got {_kind(symbol)}")
            ties.append(CodeTie(code_path(item.get("path"), f"{where}.path"), (symbol or "").strip() or None))
        else:
            raise RecordError(where, f"expected \"path\", \"path::Symbol\" or {{path, symbol}}, got {_kind(item)}")
    return tuple(ties)


def _commit(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _COMMIT.fullmatch(value.strip()):
        raise RecordError("commit", f"expected a hex commit of 7 to 40 characters, got {value!r}")
    return value.strip().lower()


def _tags(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not _is_list(value):
        raise RecordError("tags", f"expected a list of strings, got {_kind(value)}")
    for i, tag in enumerate(value):
        if type(tag) is not str:
            raise RecordError(f"tags[{i}]", f"expected a string, got {_kind(tag)}")
    return tuple(value)


def _importance(value: Any) -> float | None:
    if value is None:
        return None
    result = number(value, "importance")
    if not 0.0 <= result <= 1.0:
        raise RecordError("importance", f"must be in [0, 1], got {value!r}")
    return result
