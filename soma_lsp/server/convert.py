"""Between the core's values and LSP's: URIs and paths, ranges, locations, JSON shapes.

Positions: the server always negotiates UTF-16 (every client supports it), which is what the query
builder speaks, so `(line, character)` pairs pass through unchanged.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp

from ..pool.commit_ties import CommitTie
from ..records import Record
from ..results import location as record_location, result_json, rfc3339
from ..retrieval import ScoredRecord, is_dead_end
from .markdown import flat

MAX_URL = 2048  # a record's url in a command's answer (longer is no link a browser opens)


def uri_to_path(uri: str) -> str | None:
    """The filesystem path of a `file:` URI (None for other schemes or a malformed URI)."""
    try:
        parsed = urlparse(uri)
    except ValueError:
        return None
    if parsed.scheme != "file":
        return None
    path = unquote(parsed.path)
    if parsed.netloc and parsed.netloc != "localhost":
        path = f"//{parsed.netloc}{path}"
    if os.name == "nt" and path.startswith("/") and len(path) > 2 and path[2] == ":":
        path = path[1:]
    return path or None


def path_to_uri(path: str | os.PathLike) -> str:
    return Path(os.path.abspath(os.fspath(path))).as_uri()


def real(path: str) -> str:
    return os.path.realpath(os.path.abspath(path))


def inside(path: str, root: str) -> bool:
    """Whether resolved `path` lies in resolved `root` (both resolved by the caller)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def relative_to_folders(path: str, folders: Iterable[str]) -> str | None:
    """The `/`-separated path relative to the innermost workspace folder containing it, else None.
    As written first (a symlinked directory inside the workspace keeps its workspace name), then
    with symlinks resolved on both sides."""
    folders = list(folders)
    for resolve in (os.path.abspath, real):
        candidate = resolve(path)
        best: str | None = None
        for folder in folders:
            root = resolve(folder)
            if inside(candidate, root) and (best is None or len(root) > len(best)):
                best = root
        if best is not None and candidate != best:
            return Path(os.path.relpath(candidate, best)).as_posix()
    return None


def code_tie_path(relpath: str, folders: Iterable[str]) -> str | None:
    """Where a record's `code` path lies in the workspace — resolved and checked to stay inside a
    folder (symlinks included), else None. Nothing is read."""
    for folder in folders:
        root = real(folder)
        candidate = real(os.path.join(root, *relpath.split("/")))
        if inside(candidate, root) and os.path.exists(candidate):
            return candidate
    return None


def lsp_range(span: Sequence[Sequence[int]]) -> lsp.Range:
    (sl, sc), (el, ec) = span
    return lsp.Range(lsp.Position(sl, sc), lsp.Position(el, ec))


def line_range(line: int, lines: Sequence[str] | None = None) -> lsp.Range:
    """The whole of one line (its UTF-16 length when the text is known)."""
    length = 0
    if lines is not None and 0 <= line < len(lines):
        length = len(lines[line].rstrip("\r\n").encode("utf-16-le")) // 2
    return lsp.Range(lsp.Position(line, 0), lsp.Position(line, length))


def record_lsp_location(record: Record) -> lsp.Location | None:
    where = record_location(record)
    if where is None:
        return None
    line = int(where["line"])
    return lsp.Location(where["uri"], lsp.Range(lsp.Position(line, 0), lsp.Position(line, 0)))


def result(scored: ScoredRecord, tied: bool, commit: CommitTie | None = None) -> dict[str, Any]:
    """docs/spec.md §2.8's object with `tied` and `origin` (where a tracker's run came from; null for a record
    file's), and for a tie through a commit `tied_by_commit`: the sha, how many commits ago, whether
    the definition changed since, and a sweep's evidence."""
    out = result_json(scored, tied=tied)
    out["origin"] = flat(scored.record.origin) if scored.record.origin else None
    # Record text is data, and clients show it: one line, capped (docs/spec.md §2.8; the CLI keeps it whole).
    for key in ("name", "headline"):
        if out[key] is not None:
            out[key] = flat(out[key])
    if out["url"] is not None:
        out["url"] = flat(out["url"], MAX_URL)
    for key in ("matched_terms", "shared_components"):
        out[key] = [flat(term) for term in out[key]]
    if commit is not None:
        out["tied_by_commit"] = {
            "commit": commit.commit, "commits_ago": commit.commits_ago, "definition": flat(commit.qualname),
            "changed_since": commit.changed_since, "blames_code": commit.blames_code,
            "succeeded_at_same_code": commit.sweep.succeeded if commit.sweep else 0,
            "differs_in": [flat(name) for name in commit.sweep.differs] if commit.sweep else []}
    return out


def metric_json(metric) -> dict[str, Any]:
    return {"name": metric.name, "value": _number(metric.value), "baseline": _number(metric.baseline),
            "goal": metric.goal}


def _number(value: float | None) -> float | str | None:
    if value is None:
        return None
    if value != value:
        return "nan"
    if value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    return value


def record_json(record: Record) -> dict[str, Any]:
    """The whole record (for `soma.showExperiment`), with its location and whether it is a dead end."""
    conclusion = None
    if record.headline or record.details:
        conclusion = {"headline": record.headline, "details": record.details}
    return {
        "id": record.id,
        "name": record.name,
        "status": record.status.value,
        "dead_end": is_dead_end(record),
        "created_at": rfc3339(record.created_at),
        "finished_at": rfc3339(record.finished_at),
        "time": rfc3339(record.time),
        "conclusion": conclusion,
        "headline": record.headline,
        "notes": record.notes,
        "architecture": {name: count for name, count in record.architecture},
        "metrics": [metric_json(m) for m in record.metrics],
        "code": [str(tie) for tie in record.code],
        "commit": record.commit,
        "repo": record.repo,
        "origin": record.origin,
        "tags": list(record.tags),
        "url": record.url,
        "importance": record.importance,
        "extra": _jsonable(dict(record.extra)),
        "warnings": list(record.warnings),
        "location": record_location(record),
    }


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return rfc3339(value)
    if isinstance(value, float):
        return _number(value)
    if value is None or isinstance(value, bool | int | str):
        return value
    return str(value)


def age(when: datetime | None, now: datetime) -> str:
    """`3 months ago`, `just now`, `in 2 days` (future times)."""
    if when is None:
        return "no date"
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    seconds = (now - when).total_seconds()
    future = seconds < 0
    seconds = abs(seconds)
    for unit, size in (("year", 365 * 86400), ("month", 30 * 86400), ("week", 7 * 86400),
                       ("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = int(seconds // size)
            text = f"{n} {unit}{'s' if n != 1 else ''}"
            return f"in {text}" if future else f"{text} ago"
    return "just now"


_DOCSTRING = re.compile(r'[rRuUbB]{0,2}("""|\'\'\'|"|\')')


def file_anchor(lines: list[str]) -> lsp.Range:
    """Where what concerns a whole file goes (a warning, a lens): the module docstring's first line,
    else line 0."""
    for number, line in enumerate(lines[:200]):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if _DOCSTRING.match(stripped):
            return line_range(number, lines)
        break
    return line_range(0, lines)
